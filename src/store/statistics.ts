import type pg from 'pg';

/*
 * Planner statistics kept current, as PostgreSQL's autovacuum keeps them: a named statement keeps the
 * plan made with the statistics of its first runs until its tables are analysed again. Nothing analyses
 * PGlite's tables (it has no autovacuum), and a PostgreSQL server may run without autovacuum (this
 * machine's CI server does). A plan of the "already known" look-up made while meta_txns held a few rows
 * read the chain's rows by chain alone on every SendMetaTxn once they were thousands: 2 700 buffers each
 * after 1 000 sends (30 Nov; test/store-statistics.test.ts, docs/performance.md).
 *
 * At most every STATISTICS_EVERY_MS, each table changed since its last analysis by more than autovacuum's
 * default share (50 rows and a tenth of it) is analysed; that also drops the plans kept on it.
 */
export const STATISTICS_EVERY_MS = 10_000;

/** The tables of the current schema due for an analysis, by autovacuum's rule, named for ANALYZE. */
export const TABLES_DUE_SQL = `SELECT quote_ident(s.schemaname) || '.' || quote_ident(s.relname) AS t
  FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
  WHERE s.schemaname = current_schema() AND s.n_mod_since_analyze > 50 + 0.1 * greatest(c.reltuples, 0)`;

/** Processes sharing one PostgreSQL database take turns ("mrst" in ASCII): one analyses, the others skip. */
const STATISTICS_LOCK = 0x6d727374;

/** Analyses the tables due on PostgreSQL, unless another process is at it; errors wait for the next turn. */
async function analyseDue(pool: pg.Pool): Promise<void> {
  const client = await pool.connect().catch(() => undefined);
  if (!client) return;
  try {
    await client.query('BEGIN');
    const got = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock($1) AS ok', [STATISTICS_LOCK]);
    if (got.rows[0].ok) {
      const due = await client.query<{ t: string }>(TABLES_DUE_SQL);
      if (due.rows.length) await client.query(`ANALYZE ${due.rows.map((r) => r.t).join(', ')}`);
    }
    await client.query('COMMIT');
  } catch {
    await client.query('ROLLBACK').catch(() => undefined);
  } finally {
    client.release();
  }
}

/** Keeps a PostgreSQL pool's database analysed while it is open; returns the stop. */
export function keepStatistics(pool: pg.Pool): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    void analyseDue(pool).finally(() => (running = false));
  }, STATISTICS_EVERY_MS);
  // An idle process is not kept alive for it.
  timer.unref();
  return () => clearInterval(timer);
}
