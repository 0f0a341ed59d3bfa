// Issue #53: what one meta-transaction leaves in the database (bytes per meta-transaction, by table), and
// what `metarelay relayer prune` gives back. BENCH_N sponsored mints (default 300) relayed to SUCCEEDED
// on the test relayer (test/support/relayer-env.ts), pg_total_relation_size of every table summed before
// and after; then the rows are dated back two days, pruned (relayer/prune.ts) and vacuumed, and measured
// again. PostgreSQL only (PGlite's sizes are its own pages).
//
//   METARELAY_TEST_DB=postgres npx tsx bench/db-growth.ts
//
// The figure includes the indexes and the events outbox rows (webhook and stream events) each status
// writes; a fresh table's first pages make small runs read high, so N is in the hundreds.

import { pruneFinished } from '../src/relayer/prune.ts';
import { runBench } from './lib/harness.ts';
import { provideTestDbContext } from './lib/relayer-bench.ts';
import { mine } from '../test/support/anvil-control.ts';
import { allFinal, deployWallets, mintBundles, sendAll, sendVia, waitFor } from '../test/support/relay-load.ts';
import { sponsor, startRelayerEnv } from '../test/support/relayer-env.ts';

const N = Number(process.env.BENCH_N ?? 300);

runBench(async (cleanup) => {
  if (process.env.METARELAY_TEST_DB !== 'postgres') throw new Error('METARELAY_TEST_DB=postgres only');
  await provideTestDbContext(cleanup);
  const env = await startRelayerEnv();
  cleanup.add('relayer env', () => env.close());
  {
    await sponsor(env, 'CONTRACT', env.token);
    const db = env.services.db;
    const sizes = async () => {
      const r = await db.query<{ t: string; b: string }>(
        `SELECT c.relname AS t, pg_total_relation_size(c.oid)::text AS b FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = 'public' AND c.relkind = 'r'`,
      );
      return new Map(r.rows.map((x) => [x.t, Number(x.b)]));
    };
    const users = await deployWallets(env, Math.ceil(N / 4));
    const items = (await mintBundles(env, users, 4)).slice(0, N);
    const before = await sizes();
    const ids = await sendAll(sendVia(env), items, 16);
    await allFinal(env, ids, 600_000);
    await db.exec('CHECKPOINT');
    const after = await sizes();
    const grew = [...after].map(([t, b]) => [t, b - (before.get(t) ?? 0)] as const).filter(([, d]) => d > 0);
    grew.sort((a, b) => b[1] - a[1]);
    const total = grew.reduce((n, [, d]) => n + d, 0);
    const growth = { n: N, bytesPerMetaTxn: Math.round(total / N), byTable: Object.fromEntries(grew.map(([t, d]) => [t, Math.round(d / N)])) };

    // Confirmed (blocks past the confirmations, seen by the sweep), then two days pass.
    await mine(env.rpcUrl, 5);
    await waitFor('every row confirmed', async () => Number((await db.query<{ n: string }>('SELECT count(*)::text AS n FROM meta_txns WHERE NOT confirmed')).rows[0]!.n) === 0, 120_000, 500);
    await db.query(`UPDATE meta_txns SET updated_at = now() - interval '2 days', queued_at = now() - interval '2 days'`);
    await db.query(`UPDATE relay_txs SET created_at = now() - interval '2 days'`);
    const started = Date.now();
    const pruned = await pruneFinished(db, { cutoff: new Date(Date.now() - 86_400_000), batch: 500 });
    const ms = Date.now() - started;
    await db.exec('VACUUM FULL meta_txns, meta_txn_bundles, relay_txs, sponsor_charges');
    const vacuumed = await sizes();
    const freed = ['meta_txns', 'meta_txn_bundles', 'relay_txs', 'sponsor_charges'].reduce((n, t) => n + (after.get(t) ?? 0) - (vacuumed.get(t) ?? 0), 0);
    return { growth, prune: { pruned, pruneMs: ms, freedBytesPerMetaTxn: Math.round(freed / N) } };
  }
});
