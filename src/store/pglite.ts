import { mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import { pg_trgm } from '@electric-sql/pglite/contrib/pg_trgm';
import { commitSlot, type Db, type QueryResult, type Queryable } from './db.ts';
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
      const slot = commitSlot();
      let result: QueryResult<unknown> | undefined;
      try {
        const out = await pg.transaction(async (tx) => {
          const q = wrap(tx);
          const value = await fn({ ...q, atCommit: slot.atCommit });
          const last = slot.statement;
          if (last) result = await q.query(last.sql, last.params);
          return value;
        });
        slot.settle(result);
        return out;
      } catch (err) {
        slot.settle(undefined);
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
