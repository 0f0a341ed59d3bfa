import pg from 'pg';
import type { Db, QueryResult } from './db.ts';

// BIGINT (int8) comes back as string by default; ids and counters here fit in a JS number.
pg.types.setTypeParser(20, (v) => {
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : v;
});

export async function openPostgres(url: string, opts: { max?: number; probe?: boolean } = {}): Promise<Db> {
  const pool = new pg.Pool({ connectionString: url, max: opts.max ?? 10 });
  // Fail at boot, not at the first request, when the server is unreachable.
  if (opts.probe !== false) {
    const probe = await pool.connect();
    probe.release();
  }
  pool.on('error', () => {
    /* an idle client died; the pool replaces it on next use */
  });
  let closed = false;
  return {
    kind: 'postgres',
    async query<T>(sql: string, params?: unknown[]): Promise<QueryResult<T>> {
      const res = await pool.query(sql, params);
      return { rows: res.rows as T[], rowCount: res.rowCount ?? 0 };
    },
    async exec(sql: string) {
      await pool.query(sql);
    },
    async transaction(fn) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const out = await fn({
          async exec(sql: string) {
            await client.query(sql);
          },
          async query<T>(sql: string, params?: unknown[]) {
            const res = await client.query(sql, params);
            return { rows: res.rows as T[], rowCount: res.rowCount ?? 0 };
          },
        });
        await client.query('COMMIT');
        return out;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    },
    dedicated: (max: number) => openPostgres(url, { max, probe: false }),
    async close() {
      if (closed) return;
      closed = true;
      await pool.end();
    },
  };
}
