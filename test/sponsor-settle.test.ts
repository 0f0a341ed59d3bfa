// A sponsorship's counters after the status writes that settle, refund and revive many charges at once
// (spend-caps.ts onStatus, one MOVE_SPEND statement per write): every counter a charge went to (the
// rule's total, its day, each wallet's day) must equal the sum over the rule's standing charges of what
// each stands at, and each charge its settled amount, whatever mix of rules, wallets and statuses one
// write carries. The expected figures are computed here from the charges alone, not read from the service.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Address } from 'viem';
import { spendCaps, type Charge } from '../src/relayer/intake/spend-caps.ts';
import { createTestDb, type TestDb } from './support/db.ts';

const CHAIN = 31337;
const A = '0x00000000000000000000000000000000000000a1' as Address;
const B = '0x00000000000000000000000000000000000000b2' as Address;
const C = '0x00000000000000000000000000000000000000c3' as Address;

let t: TestDb;
let rules: number[];

beforeAll(async () => {
  t = await createTestDb();
  const p = await t.db.query<{ id: string }>(`INSERT INTO projects (name) VALUES ('settle-${Date.now()}') RETURNING id`);
  const r = await t.db.query<{ id: string }>(`INSERT INTO gas_sponsors (project_id, chain_id, kind, address) VALUES ($1, $2, 'ANY', 'r1'), ($1, $2, 'ANY', 'r2') RETURNING id`, [p.rows[0]!.id, CHAIN]);
  rules = r.rows.map((x) => Number(x.id)).sort((a, b) => a - b);
});
afterAll(async () => {
  await t?.drop();
});

/** What one meta-transaction was charged: its rules (by index into `rules`), wallets and estimate. */
interface Charged {
  id: string;
  rules: number[];
  wallets: Address[];
  wei: bigint;
  usd: bigint;
}

const id = (n: number) => n.toString(16).padStart(64, '0');

async function charge(c: Charged): Promise<void> {
  const caps = spendCaps(t.db);
  const ch: Charge = { chainId: CHAIN, metaTxnId: c.id, ruleIds: c.rules.map((i) => rules[i]!), wallets: c.wallets, cost: { wei: c.wei, usd: c.usd } };
  await t.db.transaction(async (tx) => {
    caps.charge(tx, ch);
  });
}

/** Every counter as the database holds it, keyed rule / rule+wallet (today only: every charge here is today's). */
async function counters() {
  const out = new Map<string, [bigint, bigint]>();
  // A rule's spend is the sum of its shards' (spend-caps.ts).
  for (const r of (
    await t.db.query<{ id: string; wei: string; usd: string }>(
      'SELECT sponsor_id AS id, sum(total_wei)::text AS wei, sum(total_usd)::text AS usd FROM sponsor_spend_shards WHERE sponsor_id = ANY($1::bigint[]) GROUP BY sponsor_id',
      [rules],
    )
  ).rows)
    out.set(`total ${r.id}`, [BigInt(r.wei), BigInt(r.usd)]);
  for (const r of (
    await t.db.query<{ id: string; wei: string; usd: string }>(
      `SELECT sponsor_id AS id, sum(today_wei)::text AS wei, sum(today_usd)::text AS usd FROM sponsor_spend_shards WHERE sponsor_id = ANY($1::bigint[]) AND day = (now() AT TIME ZONE 'UTC')::date GROUP BY sponsor_id`,
      [rules],
    )
  ).rows)
    out.set(`today ${r.id}`, [BigInt(r.wei), BigInt(r.usd)]);
  for (const r of (
    await t.db.query<{ id: string; wallet: string; wei: string; usd: string }>(
      `SELECT sponsor_id AS id, wallet, spent_wei::text AS wei, spent_usd::text AS usd FROM sponsor_wallet_spend WHERE sponsor_id = ANY($1::bigint[]) AND day = (now() AT TIME ZONE 'UTC')::date`,
      [rules],
    )
  ).rows)
    out.set(`wallet ${r.id} ${r.wallet}`, [BigInt(r.wei), BigInt(r.usd)]);
  return out;
}

/** The counters the charges imply: each standing (not refunded) charge at `at(charge)` on its rule's total, day and wallets. */
function expected(charged: Charged[], at: (c: Charged) => { wei: bigint; usd: bigint } | null) {
  const out = new Map<string, [bigint, bigint]>();
  const add = (k: string, wei: bigint, usd: bigint) => {
    const was = out.get(k) ?? [0n, 0n];
    out.set(k, [was[0] + wei, was[1] + usd]);
  };
  for (const c of charged) {
    const now = at(c);
    for (const i of c.rules) {
      const rule = rules[i]!;
      // A counter that was ever charged exists (at zero once everything on it is given back).
      for (const k of [`total ${rule}`, `today ${rule}`, ...c.wallets.map((w) => `wallet ${rule} ${w.toLowerCase()}`)]) add(k, now?.wei ?? 0n, now?.usd ?? 0n);
    }
  }
  return out;
}

describe('settling, refunding and reviving many sponsorship charges in one status write', () => {
  it('leaves every counter at the sum of the standing charges, and each charge at its settled amount', async () => {
    const charged: Charged[] = [
      { id: id(1), rules: [0], wallets: [A], wei: 1_000_000n, usd: 2_000_000n },
      { id: id(2), rules: [0], wallets: [A], wei: 3_000_000n, usd: 6_000_000n },
      { id: id(3), rules: [0, 1], wallets: [A, B], wei: 5_000_000n, usd: 10_000_000n },
      { id: id(4), rules: [1], wallets: [B], wei: 7_000_000n, usd: 14_000_000n },
      { id: id(5), rules: [0], wallets: [C], wei: 11_000_000n, usd: 22_000_000n },
      { id: id(6), rules: [1], wallets: [B, C], wei: 13_000_000n, usd: 26_000_000n },
    ];
    for (const c of charged) await charge(c);
    expect(await counters()).toEqual(expected(charged, (c) => c));

    const caps = spendCaps(t.db);
    // Gas used × price: each mined one cost less than its estimate (one of them exactly its estimate).
    const mined = new Map<string, { gas: bigint; price: bigint }>([
      [id(1), { gas: 21_000n, price: 20n }],
      [id(2), { gas: 30_000n, price: 100n }],
      [id(3), { gas: 50_000n, price: 100n }],
      [id(4), { gas: 7_000n, price: 1_000n }],
    ]);
    const costOf = (c: Charged) => mined.get(c.id)!.gas * mined.get(c.id)!.price;
    const dropped = new Set([id(5), id(6)]);
    const row = (c: Charged, status: string, g?: { gas: bigint; price: bigint }) => ({
      chain_id: CHAIN,
      id: c.id,
      status,
      sponsored: true,
      gas_used: g?.gas.toString() ?? null,
      gas_price: g?.price.toString() ?? null,
    });
    await t.db.transaction((tx) =>
      caps.onStatus(
        tx,
        charged.map((c) => (dropped.has(c.id) ? row(c, 'DROPPED') : row(c, 'SUCCEEDED', mined.get(c.id)))),
      ),
    );
    // USD scales with the settled wei (the rate of intake): here 2 USD units per wei, exactly.
    const settled = (c: Charged) => (dropped.has(c.id) ? null : { wei: costOf(c), usd: 2n * costOf(c) });
    expect(await counters()).toEqual(expected(charged, settled));
    const rows = await t.db.query<{ meta_txn_id: string; sponsor_id: string; wei: string; usd: string; refunded: boolean }>(
      'SELECT meta_txn_id, sponsor_id, wei::text AS wei, usd::text AS usd, refunded_at IS NOT NULL AS refunded FROM sponsor_charges WHERE chain_id = $1 ORDER BY meta_txn_id, sponsor_id',
      [CHAIN],
    );
    expect(rows.rows.map((r) => [r.meta_txn_id, r.wei, r.usd, r.refunded])).toEqual(
      charged.flatMap((c) => c.rules.map(() => [c.id, (settled(c)?.wei ?? c.wei).toString(), (settled(c)?.usd ?? c.usd).toString(), dropped.has(c.id)])),
    );

    // The same write again changes nothing; a reorg that mines two of them again at other costs, and an
    // earlier broadcast of a dropped one mined after all, move only what changed, in one write.
    await t.db.transaction((tx) =>
      caps.onStatus(
        tx,
        charged.filter((c) => !dropped.has(c.id)).map((c) => row(c, 'SUCCEEDED', mined.get(c.id))),
      ),
    );
    expect(await counters()).toEqual(expected(charged, settled));
    mined.set(id(2), { gas: 29_000n, price: 90n });
    mined.set(id(3), { gas: 50_000n, price: 101n });
    mined.set(id(5), { gas: 40_000n, price: 50n });
    dropped.delete(id(5));
    await t.db.transaction((tx) =>
      caps.onStatus(
        tx,
        [id(2), id(3), id(5)].map((x) => row(charged.find((c) => c.id === x)!, 'FAILED', mined.get(x))),
      ),
    );
    expect(await counters()).toEqual(expected(charged, settled));

    // Every one given back: every counter is at zero, none below.
    await t.db.transaction((tx) =>
      caps.onStatus(
        tx,
        charged.filter((c) => !dropped.has(c.id)).map((c) => row(c, 'DROPPED')),
      ),
    );
    expect(await counters()).toEqual(expected(charged, () => null));
  });
});
