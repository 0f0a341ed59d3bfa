// A named statement keeps the plan made with the statistics of its first runs. PostgreSQL's autovacuum
// analyses a table again as it grows (and that drops the plans kept on it); PGlite has no autovacuum, so
// on `npm start` the plans made while the tables held a few rows were kept however large they grew. The
// "already known" look-up of every SendMetaTxn then read the chain's meta-transactions by chain alone:
// 2 700 buffers each after 1 000 sends (30 Nov). Judged by what the look-up reads, as counted by the
// database itself.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP_KNOWN_SQL } from '../src/relayer/store.ts';
import type { MaintenanceReport } from '../src/store/maintenance.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';
import { waitFor } from './support/relay-load.ts';

const CHAIN = 5;
const wallet = (g: string) => `'0x' || lpad(to_hex(${g}), 40, '0')`;
const rows = (from: number, to: number) => `
  INSERT INTO meta_txns (chain_id, id, wallet, entrypoint, input, status, gas_limit, gas_estimated)
    SELECT ${CHAIN}, 'm' || g, ${wallet('g')}, '0x', '0x', 'SUCCEEDED', 1, 1 FROM generate_series(${from}, ${to}) g;
  INSERT INTO meta_txn_bundles (chain_id, bundle_id, meta_txn_id, wallet, nonce_space, nonce, live)
    SELECT ${CHAIN}, 'b' || g, 'm' || g, ${wallet('g')}, 0, 0, false FROM generate_series(${from}, ${to}) g;`;
// A send's look-up of ids and a nonce nobody has, as most are: (member, chain, id) and (member, chain, wallet, space, nonce).
const LOOKUP = [[0, 0], [CHAIN, CHAIN], ['m-new', 'b-new'], [0], [CHAIN], ['0x0000000000000000000000000000000000000abc'], ['0'], ['1']];

let t: TestDb;
/** A PostgreSQL server running autovacuum is left to it (maintenance.ts); PGlite has none. */
let serverDoesIt = false;
/** What the service's maintenance told of its turns (Db.onMaintenance), in order. */
const reports: MaintenanceReport[] = [];
beforeAll(async () => {
  t = await createTestDb({ fresh: true });
  t.db.onMaintenance!((r) => reports.push(r));
  if (TEST_DB === 'postgres') serverDoesIt = (await t.db.query<{ on: boolean }>(`SELECT current_setting('autovacuum') = 'on' AS on`)).rows[0].on;
}, 120_000);
afterAll(() => t?.drop());

/** The first report of this kind from now on, within 20 s (undefined if none came). */
async function nextReport(kind: 'ran' | 'failed'): Promise<MaintenanceReport | undefined> {
  const from = reports.length;
  const until = Date.now() + 20_000;
  for (;;) {
    const found = reports.slice(from).find((r) => kind in r);
    if (found || Date.now() > until) return found;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Buffers meta_txns and meta_txn_bundles were read for, by the database's own counters (flushed first). */
async function buffersRead(): Promise<number> {
  await t.db.query('SELECT pg_stat_force_next_flush()');
  const r = await t.db.query<{ n: string }>(
    `SELECT sum(coalesce(heap_blks_hit, 0) + coalesce(heap_blks_read, 0) + coalesce(idx_blks_hit, 0) + coalesce(idx_blks_read, 0))::text AS n
       FROM pg_statio_user_tables WHERE relname IN ('meta_txns', 'meta_txn_bundles')`,
  );
  return Number(r.rows[0].n);
}

/** What one look-up reads. PGlite is one connection: its counters are this statement's, with the plan it kept. */
async function lookUpOnPglite(): Promise<number> {
  const before = await buffersRead();
  expect((await t.db.query(GROUP_KNOWN_SQL, LOOKUP)).rows).toEqual([]);
  return (await buffersRead()) - before;
}

/**
 * What one look-up reads under the plan PostgreSQL makes at the next run of a connection (whose plans
 * the analysis dropped): a generic plan, made now, run once.
 */
async function lookUpOnPostgres(): Promise<number> {
  return t.db.transaction(async (tx) => {
    await tx.exec(`SET LOCAL plan_cache_mode = force_generic_plan; PREPARE look_up AS ${GROUP_KNOWN_SQL}`);
    try {
      const types = ['int', 'bigint', 'text', 'int', 'bigint', 'text', 'numeric', 'numeric'];
      const values = LOOKUP.map((v, i) => `ARRAY[${v.map((x) => `'${x}'`).join(', ')}]::${types[i]}[]`);
      const r = await tx.query<{ 'QUERY PLAN': Array<{ Plan: Record<string, number> }> }>(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE look_up(${values.join(', ')})`);
      const plan = r.rows[0]['QUERY PLAN'][0].Plan;
      return (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0);
    } finally {
      await tx.exec('DEALLOCATE look_up');
    }
  });
}

/** What the tables' statistics say now (flushed first), and whether each was vacuumed. */
async function tablesNow() {
  await t.db.query('SELECT pg_stat_force_next_flush()');
  const r = await t.db.query<{ relname: string; tuples: number; dead: number; visible: number; vacuumed: boolean; analysedAt: Date | null }>(
    `SELECT s.relname, c.reltuples::int AS tuples, s.n_dead_tup::int AS dead, c.relallvisible::int AS visible,
       s.last_vacuum IS NOT NULL AS vacuumed, s.last_analyze AS "analysedAt"
     FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.relname IN ('meta_txns', 'sponsor_wallet_spend')`,
  );
  return Object.fromEntries(r.rows.map((x) => [x.relname, x]));
}

describe(`tables kept analysed and vacuumed as they change (${TEST_DB}; autovacuum's rules, by the service where no autovacuum runs)`, () => {
  it('a plan kept at eight rows reads by key again once the tables grew to 4 008; dead rows are vacuumed; a table changed a little is analysed only', async () => {
    await t.db.exec(rows(1, 8));
    // Statistics of eight rows, as the first analysis of a new database's tables takes them.
    await t.db.exec('ANALYZE meta_txns; ANALYZE meta_txn_bundles; ANALYZE sponsor_wallet_spend');
    for (let i = 0; i < 6; i++) expect((await t.db.query(GROUP_KNOWN_SQL, LOOKUP)).rows).toEqual([]);
    const changedAt = new Date();
    await t.db.transaction(async (tx) => {
      // 4 000 rows more (due for a vacuum by inserts), then a status change of every one (4 008 dead rows).
      await tx.exec(rows(9, 4008));
      await tx.exec(`UPDATE meta_txns SET status = 'FAILED' WHERE chain_id = ${CHAIN}`);
      // 500 rows of a table with none (due for an analysis, not a vacuum).
      await tx.exec(`INSERT INTO sponsor_wallet_spend (sponsor_id, wallet, day) SELECT 1, ${wallet('g')}, DATE '2026-11-30' FROM generate_series(1, 500) g`);
      // The changes counted at once (a connection reports them when idle, within a second or ten).
      await tx.query('SELECT pg_stat_force_next_flush()');
    });
    if (serverDoesIt) {
      // The service's turn (every 10 s) passes without a vacuum or an analysis of its own.
      await new Promise((r) => setTimeout(r, 12_000));
      const now = await tablesNow();
      expect(now.meta_txns.vacuumed).toBe(false);
      // Analysed last by the test itself, before the changes (autovacuum's own runs are apart).
      for (const table of [now.meta_txns, now.sponsor_wallet_spend]) expect(table.analysedAt!.getTime()).toBeLessThan(changedAt.getTime());
      expect(reports).toEqual([]);
      return;
    }
    // A table that keeps growing (400 rows a second, far past a tenth of it each second), from now on.
    await t.db.exec('CREATE TABLE growth (n int)');
    let growing = true;
    const grower = (async () => {
      for (let i = 0; growing; i++) {
        await t.db.exec(`INSERT INTO growth SELECT g FROM generate_series(${i * 100}, ${i * 100 + 99}) g`);
        await new Promise((r) => setTimeout(r, 250));
      }
    })();
    const analysesOfGrowth = async () => {
      await t.db.query('SELECT pg_stat_force_next_flush()');
      return Number((await t.db.query<{ n: string }>(`SELECT analyze_count::text AS n FROM pg_stat_user_tables WHERE relname = 'growth'`)).rows[0].n);
    };
    // The service looks at what changed at most every 10 s.
    const started = Date.now();
    let now = await tablesNow();
    while ((now.meta_txns.tuples !== 4008 || now.meta_txns.dead > 0 || now.sponsor_wallet_spend.tuples !== 500) && Date.now() - started < 30_000) {
      await new Promise((r) => setTimeout(r, 500));
      now = await tablesNow();
    }
    expect(now.meta_txns).toMatchObject({ tuples: 4008, dead: 0, vacuumed: true });
    // The turn told what it ran (the service counts it and logs it at debug: telemetry/db-maintenance.ts).
    expect(reports.flatMap((r) => ('ran' in r ? r.ran : []))).toContainEqual(expect.stringMatching(/^VACUUM \(ANALYZE\) .*public\.meta_txns/));
    // Marked all-visible: a count over an index reads the index alone.
    expect(now.meta_txns.visible).toBeGreaterThan(0);
    expect(now.sponsor_wallet_spend).toMatchObject({ tuples: 500, vacuumed: false });
    // Sampled as the service does (statistics target 10: a histogram of at most 11 bounds, not 101), so the
    // one PGlite connection waits a seventh as long (bench/maintenance-pause.ts).
    const bounds = await t.db.query<{ n: number }>(`SELECT array_length(histogram_bounds::text::text[], 1) AS n FROM pg_stats WHERE tablename = 'meta_txns' AND attname = 'id'`);
    expect(bounds.rows[0].n).toBeGreaterThan(1);
    expect(bounds.rows[0].n).toBeLessThanOrEqual(11);

    const lookUp = TEST_DB === 'pglite' ? lookUpOnPglite : lookUpOnPostgres;
    // The first run after the analysis plans the statement again (planning reads the indexes' first pages).
    await lookUp();
    // By key: two index pages per id and per nonce (8). By chain alone: every one of the 4 008 rows.
    const read = await lookUp();
    expect(read).toBeGreaterThan(0);
    expect(read).toBeLessThan(20);

    // A turn that found work is followed by another within a second or so, not 10 s (maintenance.ts): a
    // growing table is analysed again while it grows, so the plans kept on it follow its size.
    try {
      // Its first analysis comes with a turn after it passed a tenth of its size (up to 10 s apart; the
      // wait above may end before that turn under load).
      const before = await waitFor('the growth table analysed', async () => (await analysesOfGrowth()) || undefined, 30_000, 250);
      expect(before).toBeGreaterThan(0);
      // The next within 8 s (polled: it ends when that analysis is counted), where the idle cadence is 10 s.
      const next = await waitFor('the growth table analysed again', async () => ((await analysesOfGrowth()) > before ? true : undefined), 8_000, 250).catch(() => false);
      expect(next, 'a second analysis within 8 s of the first while the table grows').toBe(true);
    } finally {
      growing = false;
      await grower;
    }
    expect(reports.filter((r) => 'failed' in r)).toEqual([]);
    if (TEST_DB !== 'postgres') return;

    // On PostgreSQL a maintenance statement waits at most a second for a table's lock (a migration's,
    // here another session's ACCESS EXCLUSIVE): the turn fails and says why, then runs once the lock is gone.
    await t.db.transaction(async (tx) => {
      await tx.exec('INSERT INTO growth SELECT g FROM generate_series(1, 50000) g');
      await tx.query('SELECT pg_stat_force_next_flush()');
    });
    const other = new pg.Client({ connectionString: t.location });
    await other.connect();
    try {
      await other.query('BEGIN');
      await other.query('LOCK TABLE growth IN ACCESS EXCLUSIVE MODE');
      expect(await nextReport('failed')).toEqual({ failed: expect.stringMatching(/lock timeout/) });
      await other.query('ROLLBACK');
      expect(await nextReport('ran')).toEqual({ ran: expect.arrayContaining([expect.stringMatching(/public\.growth/)]), ms: expect.any(Number) });
    } finally {
      await other.end();
    }
  }, 90_000);
});
