import type pg from 'pg';
import { Held } from './pg-client.ts';

/*
 * What PostgreSQL's autovacuum does, done by the service where nothing else does it: PGlite has no
 * autovacuum, and a PostgreSQL server may run without (this machine's CI server does). A server with
 * autovacuum on is left to it: its workers are throttled and run beside the service's connections.
 * - Statistics: a named statement keeps the plan made with the statistics of its first runs until its
 *   tables are analysed again. A plan of the "already known" look-up made while meta_txns held a few rows
 *   read the chain's rows by chain alone on every SendMetaTxn once they were thousands: 2 700 buffers
 *   each after 1 000 sends (30 Nov; test/store-statistics.test.ts; docs/performance-log.md, "Statistics
 *   kept as the tables grow").
 * - Vacuum: rows updated or deleted stay in the table until vacuumed (meta_txns is updated at every
 *   status), and a count over an index reads the table for every row until vacuum marks its pages
 *   all-visible (the intake's count of a key's live rows read 245 buffers a send).
 *
 * At most every MAINTENANCE_EVERY_MS, with autovacuum's default rules: a table changed by more than 50
 * rows and a tenth of it since its last analysis is analysed (which also drops the plans kept on it);
 * one with more than 50 and a fifth of it dead, or 1 000 and a fifth of it inserted since its last
 * vacuum, is vacuumed and analysed. For MAINTENANCE_BUSY_MS after a turn that found work, the turns
 * come every MAINTENANCE_AGAIN_MS: tables growing by a tenth within seconds (a fresh database's first
 * burst) would otherwise run on plans made for a fraction of their size. At 1 000 sends in 12 s, the
 * "already known" look-up read 1 300 buffers a call with a turn every 10 s, 59 with one a second (30 Nov,
 * seventh session). A quiet database is looked at every 10 s: a look costs the server ~2.5 ms.
 */
export const MAINTENANCE_EVERY_MS = 10_000;
export const MAINTENANCE_AGAIN_MS = 1_000;
export const MAINTENANCE_BUSY_MS = 10_000;

/**
 * When the next turn is due, after one at `now` (ms); `workedAt`: the last turn that found work. The PGlite
 * worker applies the same rule to the three values it is handed (it cannot import this module).
 */
function nextTurnIn(now: number, workedAt: number): number {
  return now - workedAt < MAINTENANCE_BUSY_MS ? MAINTENANCE_AGAIN_MS : MAINTENANCE_EVERY_MS;
}

/**
 * Analyses sample 3 000 rows a table (default_statistics_target 10), not autovacuum's 30 000: on PGlite
 * the one connection waits for them, and at 20 000 meta-transactions an analysis took 572 ms of CPU at
 * 30 000 against 86 ms at 3 000 (bench/maintenance-pause.ts). The intake's statements are look-ups by
 * key, which need the tables' sizes and rough spreads, not fine histograms.
 */
export const MAINTENANCE_TARGET_SQL = 'SET default_statistics_target = 10';

/**
 * What is due in the current schema by autovacuum's rules, as at most two statements (`sql`): one
 * VACUUM (ANALYZE) and one ANALYZE, each of every table due.
 */
export const MAINTENANCE_DUE_SQL = `WITH due AS (
  SELECT quote_ident(s.schemaname) || '.' || quote_ident(s.relname) AS t,
    s.n_dead_tup > 50 + 0.2 * greatest(c.reltuples, 0) OR s.n_ins_since_vacuum > 1000 + 0.2 * greatest(c.reltuples, 0) AS vacuum,
    s.n_mod_since_analyze > 50 + 0.1 * greatest(c.reltuples, 0) AS stale
  FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.schemaname = current_schema())
SELECT 'VACUUM (ANALYZE) ' || string_agg(t, ', ') AS sql FROM due WHERE vacuum HAVING count(*) > 0
UNION ALL
SELECT 'ANALYZE ' || string_agg(t, ', ') FROM due WHERE stale AND NOT vacuum HAVING count(*) > 0`;

import type { MaintenanceListener, MaintenanceReport } from './db-core.ts';
export type { MaintenanceListener, MaintenanceReport };

/**
 * On PostgreSQL, how long a maintenance statement waits for a table's lock before it gives up (the turn
 * fails, and what was due is due again at the next): a VACUUM or an ANALYZE waiting behind a migration's
 * ALTER TABLE would otherwise hold every statement of the service queued behind it too. PGlite is one
 * connection: nothing holds a lock between its turns.
 */
export const MAINTENANCE_LOCK_TIMEOUT = '1s';

/** Processes sharing one PostgreSQL database take turns ("mrst" in ASCII): one does it, the others skip. */
const MAINTENANCE_LOCK = 0x6d727374;

/**
 * Does what is due on PostgreSQL, unless the server's autovacuum does it or another process is at it.
 * What it ran, or why it failed (what failed is due again at the next turn); undefined when nothing was.
 */
async function maintainDue(pool: pg.Pool): Promise<MaintenanceReport | undefined> {
  // Held: a connection that dies under the turn (a server restart) fails the turn, not the process.
  const held = await Held.of(pool).catch(() => undefined);
  if (!held) return undefined;
  const client = held.client;
  let failed: unknown;
  try {
    const server = await client.query<{ on: boolean }>(`SELECT current_setting('autovacuum') = 'on' AS on`);
    if (server.rows[0].on) return undefined;
    // A session lock: VACUUM cannot run inside a transaction.
    const got = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [MAINTENANCE_LOCK]);
    if (!got.rows[0].ok) return undefined;
    try {
      const due = await client.query<{ sql: string }>(MAINTENANCE_DUE_SQL);
      if (!due.rows.length) return undefined;
      const started = Date.now();
      await client.query(`${MAINTENANCE_TARGET_SQL}; SET lock_timeout = '${MAINTENANCE_LOCK_TIMEOUT}'`);
      try {
        for (const { sql } of due.rows) await client.query(sql);
      } finally {
        await client.query('RESET default_statistics_target; RESET lock_timeout');
      }
      return { ran: due.rows.map((r) => r.sql), ms: Date.now() - started };
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MAINTENANCE_LOCK]);
    }
  } catch (err) {
    failed = err;
    return { failed: (err as Error).message };
  } finally {
    // A failed turn may leave its session holding the advisory lock or the SETs: not reused.
    held.release(failed);
  }
}

/**
 * Keeps a PostgreSQL pool's database vacuumed and analysed while it is open, telling `listener()` (read
 * at each turn) what each turn did; returns the stop.
 */
export function keepMaintained(pool: pg.Pool, listener: () => MaintenanceListener | undefined = () => undefined): () => void {
  let stopped = false;
  let timer: NodeJS.Timeout;
  let workedAt = Number.NEGATIVE_INFINITY;
  const turn = (ms: number) => {
    timer = setTimeout(async () => {
      const report = await maintainDue(pool);
      // A failed turn found work too: it is looked at again soon, as a busy one.
      if (report) workedAt = Date.now();
      if (report && !stopped) listener()?.(report);
      if (!stopped) turn(nextTurnIn(Date.now(), workedAt));
    }, ms);
    // An idle process is not kept alive for it.
    timer.unref();
  };
  turn(MAINTENANCE_EVERY_MS);
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
