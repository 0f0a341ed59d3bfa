// `metarelay relayer prune` (relayer/prune.ts): finished meta-transactions older than the cutoff go, with
// their bundles, attempts and sponsorship charges, in batches; rows in flight (however old) and recent
// finished ones stay, and the service still answers GetMetaTxnReceipt for what it kept. The usage
// roll-up counts what was pruned. Time is moved by dating rows back, as the days would.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pruneFinished } from '../src/relayer/prune.ts';
import { mine } from './support/anvil-control.ts';
import { runCli } from './support/cli.ts';
import { TEST_DB } from './support/env.ts';
import { allFinal, deployWallets, mintBundles, sendAll, sendVia, waitFor } from './support/relay-load.ts';
import { sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';

let env: RelayerEnv;
/** Finished and dated back 3 days: pruned. */
let old: string[];
/** Finished now: kept. */
let recent: string[];
/** Queued with no dispatcher, dated back 3 days: in flight, kept. */
let queued: string[];

const bare = (ids: string[]) => ids.map((id) => id.replace(/^0x/, ''));

async function count(table: string, column: string, ids: string[]): Promise<number> {
  const r = await env.services.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${table} WHERE chain_id = $1 AND ${column} = ANY($2)`, [env.chainId, bare(ids)]);
  return Number(r.rows[0]!.n);
}

const rowsOf = async (ids: string[]) => ({
  metaTxns: await count('meta_txns', 'id', ids),
  bundles: await count('meta_txn_bundles', 'meta_txn_id', ids),
  attempts: await count('relay_txs', 'meta_txn_id', ids),
  charges: await count('sponsor_charges', 'meta_txn_id', ids),
});

const usageTxns = async () => Number((await env.services.db.query<{ n: string | null }>('SELECT sum(txns)::text AS n FROM meta_txn_usage_hourly')).rows[0]!.n ?? 0);

beforeAll(async () => {
  env = await startRelayerEnv();
  await sponsor(env, 'CONTRACT', env.token);
  const users = await deployWallets(env, 4);
  const items = await mintBundles(env, users, 2);
  const send = sendVia(env);
  const finished = await sendAll(send, items.slice(0, 6), 3);
  await allFinal(env, finished);
  // Final and confirmed: blocks past the relayer's confirmations, and the sweep seeing them.
  await mine(env.rpcUrl, 5);
  await waitFor(
    'the finished meta-transactions confirmed',
    async () => Number((await env.services.db.query<{ n: string }>('SELECT count(*)::text AS n FROM meta_txns WHERE id = ANY($1) AND confirmed', [bare(finished)])).rows[0]!.n) === finished.length,
    60_000,
    200,
  );
  [old, recent] = [finished.slice(0, 4), finished.slice(4)];
  await Promise.all(env.services.dispatchers.map((d) => d.stop()));
  queued = await sendAll(send, items.slice(6), 2);
  // Three days pass for the old and the queued rows (the queued ones in another hour than the old).
  const db = env.services.db;
  await db.query(`UPDATE meta_txns SET queued_at = now() - interval '3 days', updated_at = now() - interval '3 days' WHERE id = ANY($1)`, [bare(old)]);
  await db.query(`UPDATE relay_txs SET created_at = now() - interval '3 days' WHERE meta_txn_id = ANY($1)`, [bare(old)]);
  await db.query(`UPDATE meta_txns SET queued_at = now() - interval '2 days', updated_at = now() - interval '2 days' WHERE id = ANY($1)`, [bare(queued)]);
}, 180_000);

afterAll(async () => {
  await env?.close();
});

describe('relayer prune', () => {
  it('deletes finished rows past the cutoff with their bundles, attempts and charges, in batches; keeps in-flight and recent rows, and their receipts', async () => {
    const before = await rowsOf(old);
    expect(before.metaTxns).toBe(4);
    expect(before.bundles).toBe(4);
    expect(before.attempts).toBeGreaterThan(0);
    expect(before.charges).toBe(4);
    const kept = { recent: await rowsOf(recent), queued: await rowsOf(queued) };
    expect(kept.queued.metaTxns).toBe(2);
    const cutoff = new Date(Date.now() - 86_400_000);

    // The dry run counts and deletes nothing.
    const dry = await pruneFinished(env.services.db, { cutoff, batch: 3, dryRun: true });
    expect(dry.metaTxns).toBe(4);
    expect(dry.charges).toBe(4);
    expect(await rowsOf(old)).toEqual(before);
    if (TEST_DB === 'postgres') {
      // The command, on the same database from its own process (PGlite's folder is this process's).
      const cli = await runCli(['relayer', 'prune', '--older-than', '1d', '--dry-run', '--batch', '3', '--database', env.testDb.location]);
      expect(cli.code, cli.stderr).toBe(0);
      expect(JSON.parse(cli.stdout.trim().split('\n').at(-1)!)).toMatchObject({ dryRun: true, metaTxns: 4, charges: 4 });
      expect(await rowsOf(old)).toEqual(before);
    }

    const batches: number[] = [];
    const done = await pruneFinished(env.services.db, { cutoff, batch: 3, onBatch: (c) => batches.push(c.metaTxns) });
    expect(done.metaTxns).toBe(4);
    expect(batches.filter((n) => n > 0)).toEqual([3, 1]);
    const after = await rowsOf(old);
    expect(after.metaTxns).toBe(0);
    expect(after.bundles).toBe(0);
    expect(after.charges).toBe(0);
    // At most each sender's highest final attempt is kept (the ledger's floor).
    expect(after.attempts).toBeLessThanOrEqual(1);
    expect(done.attempts).toBeGreaterThanOrEqual(before.attempts - 1);
    // The prune ran the usage roll-up first: the pruned rows are still counted (4 old, 2 recent, 2 queued).
    expect(await usageTxns()).toBe(8);

    expect(await rowsOf(recent)).toEqual(kept.recent);
    expect(await rowsOf(queued)).toEqual(kept.queued);
    const statuses = await env.services.db.query<{ status: string }>('SELECT status FROM meta_txns WHERE id = ANY($1)', [bare(queued)]);
    expect(statuses.rows.map((r) => r.status)).toEqual(['QUEUED', 'QUEUED']);
    for (const id of recent) {
      const r = await env.call('GetMetaTxnReceipt', { metaTxID: id }, { 'x-access-key': env.accessKey });
      expect(r.status).toBe(200);
      expect(r.body.receipt.status).toBe('SUCCEEDED');
    }
    // A second run finds nothing more.
    expect((await pruneFinished(env.services.db, { cutoff, batch: 3 })).metaTxns).toBe(0);
  });

  it('the command refuses a cutoff younger than an hour before opening a database', async () => {
    const r = await runCli(['relayer', 'prune', '--older-than', '30m', '--database', '/nonexistent/never-made']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/at least 1h/);
  });
});
