// A sponsored intake never waits on a spend shard another connection holds (spend-caps.ts, issue #53).
// A real relayer on anvil and PostgreSQL, with relayer.sponsorSpendShards 1: every backend's shard by
// its pid (pid % 1) is shard 0, whichever connection of the pool serves the intake. A second real
// connection holds shard 0's row in an open transaction, as another intake's charge holds it until its
// COMMIT; later it holds the rule's gas_sponsors row too, so the only way through is a shard no one holds.
// Before, a charge locked its pid's shard and waited: the intake failed at lock_timeout. The rule has no
// cap here (one shard would hold all of a cap's room, and a charge meeting it busy must be refused:
// sponsor-spend-shards.test.ts holds a capped rule's shards). Judged by the stored rows (which shard each
// charge went to, the counters summing to the charges) and by the chain (every meta-transaction mined
// once, each charge settled to its receipt's cost).

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allFinal, deployWallets, expectClean, mintBundles, sendVia, type LoadItem, type User } from './support/relay-load.ts';
import { sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';

let env: RelayerEnv;
let users: User[];
let items: LoadItem[];
let rule: number;
let holder: pg.Client | undefined;

beforeAll(async () => {
  env = await startRelayerEnv({ service: { sponsorSpendShards: 1 } });
  users = await deployWallets(env, 3);
  items = await mintBundles(env, users, 1);
  rule = (await sponsor(env, 'CONTRACT', env.token)).id;
}, 180_000);
afterAll(async () => {
  await holder?.end().catch(() => undefined);
  await env?.close();
});

const send = (item: LoadItem) => sendVia(env)(item);

/** The rule's shard rows as committed: shard → [today, total]. */
async function shards(): Promise<Map<number, [string, string]>> {
  const r = await env.services.db.query<{ shard: number; today: string; total: string }>(
    'SELECT shard, today_wei::text AS today, total_wei::text AS total FROM sponsor_spend_shards WHERE sponsor_id = $1 ORDER BY shard',
    [rule],
  );
  return new Map(r.rows.map((x) => [Number(x.shard), [x.today, x.total]]));
}

/** The shard a meta-transaction's charge went to. */
async function shardOf(id: string): Promise<number> {
  const r = await env.services.db.query<{ shard: number }>('SELECT shard FROM sponsor_charges WHERE sponsor_id = $1 AND meta_txn_id = $2 AND refunded_at IS NULL', [rule, id.replace(/^0x/, '')]);
  expect(r.rows).toHaveLength(1);
  return Number(r.rows[0]!.shard);
}

/** Sends one meta-transaction, expects it accepted, and waits until it is final (alone in its transaction on chain). */
async function sendFinal(item: LoadItem): Promise<string> {
  const r = await send(item);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  const id = r.body.txnHash as string;
  await allFinal(env, [id]);
  return id;
}

describe('a sponsored intake while another connection holds spend shards of its rule (PostgreSQL)', () => {
  it('goes to a shard no one holds, without waiting: every charge on chain and in the counters', async () => {
    const ids: string[] = [];
    // The first charge makes shard 0 (the only shard by pid) and shares the cap out to it.
    ids.push(await sendFinal(items[0]!));
    expect(await shardOf(ids[0]!)).toBe(0);

    holder = new pg.Client({ connectionString: env.testDb.location });
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM sponsor_spend_shards WHERE sponsor_id = $1 AND shard = 0 FOR UPDATE', [rule]);

    // Shard 0 held and no other shard yet: the charge shares out again under the rule's row, to a new shard.
    ids.push(await sendFinal(items[1]!));
    const second = await shardOf(ids[1]!);
    expect(second).toBeGreaterThan(0);

    // The rule's row held as well: the charge goes to the shard no one holds, taking no rule's row.
    await holder.query('SELECT 1 FROM gas_sponsors WHERE id = $1 FOR UPDATE', [rule]);
    ids.push(await sendFinal(items[2]!));
    expect(await shardOf(ids[2]!)).toBe(second);
    await holder.query('ROLLBACK');

    // The chain: each one mined once, every wallet's nonce used and its token minted.
    await expectClean(env, ids, users, 1);
    // Each charge settled to what its transaction cost on chain (one meta-transaction per transaction here).
    let spent = 0n;
    for (const id of ids) {
      const m = await env.services.db.query<{ txn_hash: string }>('SELECT txn_hash FROM meta_txns WHERE chain_id = $1 AND id = $2', [env.chainId, id.replace(/^0x/, '')]);
      const receipt = await env.public.getTransactionReceipt({ hash: m.rows[0]!.txn_hash as `0x${string}` });
      expect(receipt.status).toBe('success');
      const cost = receipt.gasUsed * receipt.effectiveGasPrice;
      const c = await env.services.db.query<{ wei: string }>('SELECT wei::text AS wei FROM sponsor_charges WHERE sponsor_id = $1 AND meta_txn_id = $2 AND refunded_at IS NULL', [
        rule,
        id.replace(/^0x/, ''),
      ]);
      expect(BigInt(c.rows[0]!.wei)).toBe(cost);
      spent += cost;
    }
    // The rule's counters (its shards summed, settlements' rows included) are what the chain cost.
    const all = [...(await shards()).values()];
    expect(all.reduce((a, x) => a + BigInt(x[0]), 0n)).toBe(spent);
    expect(all.reduce((a, x) => a + BigInt(x[1]), 0n)).toBe(spent);
  }, 180_000);
});
