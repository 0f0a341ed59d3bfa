import { mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import { pg_trgm } from '@electric-sql/pglite/contrib/pg_trgm';
import type { Db, QueryResult, Queryable } from './db.ts';
import { lockFolder, type FolderLock } from './folder-lock.ts';

function wrap(q: { query: PGlite['query']; exec: PGlite['exec'] }): Queryable {
  return {
    async exec(sql: string) {
      await q.exec(sql);
    },
    async query<T>(sql: string, params?: unknown[]): Promise<QueryResult<T>> {
      const res = await q.query<T>(sql, params as unknown[] | undefined);
      return { rows: res.rows, rowCount: res.affectedRows ?? res.rows.length };
    },
  };
}

/**
 * PGlite is one connection: its own mutex serialises queries, and transaction() holds it throughout.
 * A folder is one process's: it is locked while open (folder-lock.ts).
 */
export async function openPglite(location: string): Promise<Db> {
  const inMemory = location === 'memory://' || location === '';
  let lock: FolderLock | undefined;
  if (!inMemory) {
    mkdirSync(location, { recursive: true });
    // Before PGlite reads a page: a folder another process holds is refused, not opened beside it.
    lock = lockFolder(location);
  }
  let pg: PGlite;
  try {
    pg = await PGlite.create(inMemory ? undefined : location, { extensions: { pg_trgm } });
  } catch (err) {
    lock?.release();
    throw err;
  }
  const base = wrap(pg);
  let closed = false;
  return {
    kind: 'pglite',
    query: base.query,
    exec: base.exec,
    async transaction(fn) {
      // One connection in this process: the last statement simply runs before the COMMIT.
      let last: { sql: string; params?: unknown[]; done: (r: QueryResult<unknown> | undefined) => void } | undefined;
      let result: QueryResult<unknown> | undefined;
      try {
        const out = await pg.transaction(async (tx) => {
          const q = wrap(tx);
          const value = await fn({
            ...q,
            atCommit<T>(sql: string, params?: unknown[]) {
              if (last) throw new Error('atCommit: one statement per transaction');
              return new Promise<QueryResult<T> | undefined>((resolve) => {
                last = { sql, params, done: resolve as (r: QueryResult<unknown> | undefined) => void };
              });
            },
          });
          if (last) result = await q.query(last.sql, last.params);
          return value;
        });
        last?.done(result);
        return out;
      } catch (err) {
        last?.done(undefined);
        throw err;
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      try {
        await pg.close();
      } finally {
        lock?.release();
      }
    },
  };
}
