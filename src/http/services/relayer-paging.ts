import { z } from 'zod';

export const RelayerPage = z
  .object({ page: z.number().int().min(0).optional(), pageSize: z.number().int().min(1).max(100).optional() })
  .loose()
  .optional();

const pageWire = (page: number, pageSize: number, more: boolean) => ({ pageSize, page, more, column: '', sort: [] });

/**
 * A requested page: the row offset it starts at and how many rows to read (one more than the page, to
 * tell whether another follows), and `cut` to turn what was read into the page's rows and wire shape.
 */
export function paging(p: { page?: number; pageSize?: number } | undefined, defaultSize: number) {
  const page = p?.page ?? 0;
  const pageSize = p?.pageSize ?? defaultSize;
  return {
    offset: page * pageSize,
    limit: pageSize + 1,
    cut: <T>(rows: T[]) => ({ page: pageWire(page, pageSize, rows.length > pageSize), rows: rows.slice(0, pageSize) }),
  };
}
