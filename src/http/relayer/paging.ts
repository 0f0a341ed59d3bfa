import { z } from 'zod';
import { nextPage, pageSizeUpTo } from '../core/page.ts';

/**
 * The relayer Page: numbered from 0, at most 100 rows (a larger size gets 100). Its Go type has no
 * omitempty, so a Go client's zero Page sends `pageSize: 0`: that means the default, not an error.
 */
export const RelayerPage = z
  .object({ page: z.number().int().min(0).optional(), pageSize: z.union([z.literal(0).transform(() => undefined), pageSizeUpTo(100)]).optional() })
  .loose()
  .optional();

/**
 * A requested page: the row offset it starts at and how many rows to read (one more than the page, to
 * tell whether another follows), and `cut` to turn what was read into the page's rows and wire shape.
 * The wire page is the next one to ask for (as every list of metarelay's answers it), with the relayer
 * schema's column and sort, which Go's encoder always writes.
 */
export function paging(p: { page?: number; pageSize?: number } | undefined, defaultSize: number) {
  const asked = { page: p?.page ?? 0, pageSize: p?.pageSize ?? defaultSize };
  return {
    offset: asked.page * asked.pageSize,
    limit: asked.pageSize + 1,
    cut: <T>(rows: T[]) => ({ page: { ...nextPage(asked, rows.length > asked.pageSize), column: '', sort: [] }, rows: rows.slice(0, asked.pageSize) }),
  };
}
