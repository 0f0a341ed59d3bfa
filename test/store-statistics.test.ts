// A named statement keeps the plan made with the statistics of its first runs. PostgreSQL's autovacuum
// analyses a table again as it grows (and that drops the plans kept on it); PGlite has no autovacuum, so
// on `npm start` the plans made while the tables held a few rows were kept however large they grew. The
// "already known" look-up of every SendMetaTxn then read the chain's meta-transactions by chain alone:
// 2 700 buffers each after 1 000 sends (30 Nov). Judged by what the look-up reads, as counted by the
// database itself.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KNOWN_SQL } from '../src/relayer/store.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';

const CHAIN = 5;
const wallet = (g: string) => `'0x' || lpad(to_hex(${g}), 40, '0')`;
const rows = (from: number, to: number) => `
  INSERT INTO meta_txns (chain_id, id, wallet, entrypoint, input, status, gas_limit, gas_estimated)
    SELECT ${CHAIN}, 'm' || g, ${wallet('g')}, '0x', '0x', 'SUCCEEDED', 1, 1 FROM generate_series(${from}, ${to}) g;
  INSERT INTO meta_txn_bundles (chain_id, bundle_id, meta_txn_id, wallet, nonce_space, nonce, live)
    SELECT ${CHAIN}, 'b' || g, 'm' || g, ${wallet('g')}, 0, 0, false FROM generate_series(${from}, ${to}) g;`;
// A send's look-up of ids and a nonce nobody has, as most are.
const LOOKUP = [CHAIN, ['m-new', 'b-new'], ['0x0000000000000000000000000000000000000abc'], ['0'], ['1']];

let t: TestDb;
/** A PostgreSQL server running autovacuum is left to it (maintenance.ts); PGlite has none. */
let serverDoesIt = false;
beforeAll(async () => {
  t = await createTestDb({ fresh: true });
  if (TEST_DB === 'postgres') serverDoesIt = (await t.db.query<{ on: boolean }>(`SELECT current_setting('autovacuum') = 'on' AS on`)).rows[0].on;
}, 120_000);
afterAll(() => t?.drop());

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
  expect((await t.db.query(KNOWN_SQL, LOOKUP)).rows).toEqual([]);
  return (await buffersRead()) - before;
}

/**
 * What one look-up reads under the plan PostgreSQL makes at the next run of a connection (whose plans
 * the analysis dropped): a generic plan, made now, run once.
 */
async function lookUpOnPostgres(): Promise<number> {
  return t.db.transaction(async (tx) => {
    await tx.exec(`SET LOCAL plan_cache_mode = force_generic_plan; PREPARE look_up AS ${KNOWN_SQL}`);
    try {
      const values = LOOKUP.map((v) => (Array.isArray(v) ? `ARRAY[${v.map((x) => `'${x}'`).join(', ')}]` : String(v)));
      const r = await tx.query<{ 'QUERY PLAN': Array<{ Plan: Record<string, number> }> }>(
        `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE look_up(${values[0]}, ${values[1]}::text[], ${values[2]}::text[], ${values[3]}::numeric[], ${values[4]}::numeric[])`,
      );
      const plan = r.rows[0]['QUERY PLAN'][0].Plan;
      return (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0);
    } finally {
      await tx.exec('DEALLOCATE look_up');
    }
  });
}

describe(`statistics kept as the tables grow (${TEST_DB}; autovacuum's rule, by the service: PGlite has no autovacuum, a server may run without)`, () => {
  it('the look-up a plan was kept for at eight rows reads by key again once the tables grew to 4 008', async () => {
    await t.db.exec(rows(1, 8));
    // Statistics of eight rows, as the first analysis of a new database's tables takes them.
    await t.db.exec('ANALYZE meta_txns; ANALYZE meta_txn_bundles');
    for (let i = 0; i < 6; i++) expect((await t.db.query(KNOWN_SQL, LOOKUP)).rows).toEqual([]);
    // The changes counted at once (a connection reports them when idle, within a second or ten).
    await t.db.transaction(async (tx) => {
      await tx.exec(rows(9, 4008));
      await tx.query('SELECT pg_stat_force_next_flush()');
    });
    if (serverDoesIt) {
      // The service's turn (every 10 s) passes without an analysis of its own (autovacuum's are apart).
      await new Promise((r) => setTimeout(r, 12_000));
      const r = await t.db.query<{ last: Date | null }>(`SELECT last_analyze AS last FROM pg_stat_user_tables WHERE relname = 'meta_txns'`);
      expect(r.rows[0].last).toBeNull();
      return;
    }
    // The service looks at what changed at most every 10 s.
    const started = Date.now();
    let analysed = 0;
    while (analysed !== 4008 && Date.now() - started < 30_000) {
      await new Promise((r) => setTimeout(r, 500));
      await t.db.query('SELECT 1');
      analysed = (await t.db.query<{ n: number }>(`SELECT reltuples::int AS n FROM pg_class WHERE relname = 'meta_txns'`)).rows[0].n;
    }
    expect(analysed).toBe(4008);
    const lookUp = TEST_DB === 'pglite' ? lookUpOnPglite : lookUpOnPostgres;
    // The first run after the analysis plans the statement again (planning reads the indexes' first pages).
    await lookUp();
    // By key: two index pages per id and per nonce (8). By chain alone: every one of the 4 008 rows.
    const read = await lookUp();
    expect(read).toBeGreaterThan(0);
    expect(read).toBeLessThan(20);
  }, 60_000);

  it('rows a status change left dead are vacuumed: the table does not keep them, and its pages are marked all-visible', async () => {
    // The server's autovacuum does this on its own schedule (naptime): checked in the test above.
    if (serverDoesIt) return;
    const dead = async () => {
      await t.db.query('SELECT pg_stat_force_next_flush()');
      const r = await t.db.query<{ dead: number; visible: number }>(
        `SELECT s.n_dead_tup::int AS dead, c.relallvisible::int AS visible FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.relname = 'meta_txns'`,
      );
      return r.rows[0];
    };
    await t.db.transaction(async (tx) => {
      await tx.exec(`UPDATE meta_txns SET status = 'FAILED' WHERE chain_id = ${CHAIN}`);
      await tx.query('SELECT pg_stat_force_next_flush()');
    });
    expect((await dead()).dead).toBeGreaterThanOrEqual(4008);
    const started = Date.now();
    let now = await dead();
    while (now.dead > 0 && Date.now() - started < 30_000) {
      await new Promise((r) => setTimeout(r, 500));
      now = await dead();
    }
    expect(now.dead).toBe(0);
    expect(now.visible).toBeGreaterThan(0);
  }, 60_000);
});
