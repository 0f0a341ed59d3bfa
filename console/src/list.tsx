import type { ComponentChildren } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { useApi } from './hooks.ts';

/*
 * Long lists a page at a time. The admin API answers `nextCursor` (null on the last page) and `total`
 * (what the filter keeps); the page keeps the cursors of the pages it came through, so "Newer" goes
 * back without the API having to page backwards.
 */

export interface Paged {
  nextCursor: string | null;
  total: number;
}

/** A cursor-paged list: its data for the current page, and the pager's state. A filter change starts again at the first page. */
export function usePaged<T extends Paged>(method: string, args: Record<string, unknown>, pageSize: number) {
  const key = JSON.stringify(args);
  // The cursors belong to one filter: with another, the list starts at its first page.
  const [state, setState] = useState<{ key: string; cursors: string[] }>({ key, cursors: [] });
  const cursors = state.key === key ? state.cursors : [];
  const setCursors = (c: string[]) => setState({ key, cursors: c });
  const cursor = cursors[cursors.length - 1];
  const list = useApi<T>(method, { ...args, pageSize, ...(cursor ? { cursor } : {}) });
  // The rows on screen are the last page that arrived: counted from where that page starts, not from the
  // page asked for and still loading ("126–150 of 131" for a moment after Older, with the old 25 rows).
  const shown = useRef<{ data: T | null; first: number }>({ data: null, first: 0 });
  if (list.data !== shown.current.data) shown.current = { data: list.data, first: cursors.length * pageSize };
  return {
    ...list,
    first: shown.current.first,
    older: () => list.data?.nextCursor && setCursors([...cursors, list.data.nextCursor]),
    newer: () => setCursors(cursors.slice(0, -1)),
    atStart: cursors.length === 0,
  };
}

/** "21–40 of 131", with Newer / Older (or `labels`, for a list in another order than newest first). */
export function Pager({
  paged,
  shown,
  testid,
  noun,
  labels = ['‹ Newer', 'Older ›'],
}: {
  paged: ReturnType<typeof usePaged<Paged>>;
  shown: number;
  testid: string;
  noun: string;
  labels?: [string, string];
}) {
  const d = paged.data;
  if (!d) return null;
  return (
    <div class="pager" data-testid={`${testid}-pager`}>
      <span data-testid={`${testid}-count`}>{d.total === 0 ? `No ${noun}` : `${shown ? paged.first + 1 : 0}–${paged.first + shown} of ${d.total} ${noun}`}</span>
      <button type="button" class="secondary" disabled={paged.atStart} onClick={paged.newer} data-testid={`${testid}-newer`}>
        {labels[0]}
      </button>
      <button type="button" class="secondary" disabled={!d.nextCursor} onClick={paged.older} data-testid={`${testid}-older`}>
        {labels[1]}
      </button>
    </div>
  );
}

/** A table that scrolls sideways inside its card on a narrow screen, never the page. */
export const TableWrap = ({ children }: { children: ComponentChildren }) => <div class="table-wrap">{children}</div>;
