// What the service's own maintenance costs (src/store/maintenance.ts): on PGlite it runs on the one
// connection, so while it vacuums or analyses, every statement waits. A relayer's history of BENCH_ROWS
// meta-transactions (one bundle each; a quarter of them changed once more before each vacuum, as
// statuses change), then the statements the maintenance issues, timed as the pause a statement sent at
// the same moment sees, with autovacuum's sample size and with the service's.
//
//   npx tsx bench/maintenance-pause.ts                               # PGlite, 100 000 rows
//   BENCH_ROWS=20000 METARELAY_TEST_DB=postgres npx tsx bench/maintenance-pause.ts
//
// Printed per statement: the wall time, the process's CPU (on PGlite the worker thread's work is the
// process's; on PostgreSQL the server's is not counted), and how long a look-up by id sent just after
// it started waited for its answer.
import { GROUP_KNOWN_SQL } from '../src/relayer/store.ts';
import { MAINTENANCE_TARGET_SQL } from '../src/store/maintenance.ts';
import { benchDb, log } from './support.ts';

const ROWS = Number(process.env.BENCH_ROWS ?? 100_000);
const KIND = process.env.METARELAY_TEST_DB === 'postgres' ? 'postgres' : 'pglite';
const CHAIN = 31337;

const t = await benchDb(KIND);
const started = Date.now();
for (let from = 1; from <= ROWS; from += 10_000) {
  const to = Math.min(ROWS, from + 9_999);
  await t.db.exec(`
    INSERT INTO meta_txns (chain_id, id, wallet, entrypoint, input, status, gas_limit, gas_estimated, key_id, client_ip)
      SELECT ${CHAIN}, md5('m' || g) || md5('n' || g), '0x' || lpad(to_hex(g), 40, '0'), '0x' || repeat('0', 40), '0x' || repeat(md5(g::text), 18),
        'SUCCEEDED', 100000, 90000, 1, '198.18.0.1' FROM generate_series(${from}, ${to}) g;
    INSERT INTO meta_txn_bundles (chain_id, bundle_id, meta_txn_id, wallet, nonce_space, nonce, live)
      SELECT ${CHAIN}, md5('b' || g) || md5('c' || g), md5('m' || g) || md5('n' || g), '0x' || lpad(to_hex(g), 40, '0'), 0, g, false FROM generate_series(${from}, ${to}) g;`);
}
log(`${ROWS} meta-transactions and bundles written in ${Date.now() - started} ms`);

const lookUp = () => t.db.query(GROUP_KNOWN_SQL, [[0, 0], [CHAIN, CHAIN], ['x', 'y'], [0], [CHAIN], ['0x0000000000000000000000000000000000000abc'], ['0'], ['1']]);
await lookUp();

async function timed(sql: string) {
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const done = t.db.exec(sql);
  // A statement arriving just after: on PGlite it waits for the maintenance to finish.
  await new Promise((r) => setTimeout(r, 1));
  const l0 = performance.now();
  await lookUp();
  const waited = performance.now() - l0;
  await done;
  const wall = performance.now() - t0;
  const used = process.cpuUsage(cpu);
  return { sql, wallMs: Math.round(wall), cpuMs: Math.round((used.user + used.system) / 1000), lookUpWaitedMs: Math.round(waited) };
}

const results = [];
// autovacuum's sample (30 000 rows a table), then the service's (maintenance.ts); a quarter of the rows
// changed again before each vacuum.
for (const [target, setting] of [
  ['autovacuum (default_statistics_target 100)', 'RESET default_statistics_target'],
  ['the service (default_statistics_target 10)', MAINTENANCE_TARGET_SQL],
]) {
  await t.db.exec(`UPDATE meta_txns SET confirmed = NOT confirmed WHERE chain_id = ${CHAIN} AND random() < 0.25`);
  await t.db.exec(setting);
  for (const sql of ['VACUUM (ANALYZE) meta_txns, meta_txn_bundles', 'ANALYZE meta_txns, meta_txn_bundles']) results.push({ target, ...(await timed(sql)) });
}
await t.db.exec('RESET default_statistics_target');
console.log(JSON.stringify({ bench: 'maintenance-pause', db: KIND, rows: ROWS, loadavg: (await import('node:os')).loadavg()[0], results }, null, 2));
await t.drop();
