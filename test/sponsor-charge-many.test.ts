// Charges made together (spend-caps.ts chargeMany: an intake group's, in one statement) leave every
// counter and charge row as the same charges made one by one, and fail where one of them would have,
// writing nothing. Judged by the rows, on both databases.

import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spendCaps, type Charge } from '../src/relayer/intake/spend-caps.ts';
import { createTestDb, type TestDb } from './support/db.ts';

const CHAIN = 31337;
const A = '0x00000000000000000000000000000000000000a1' as Address;
const B = '0x00000000000000000000000000000000000000b2' as Address;
const C = '0x00000000000000000000000000000000000000c3' as Address;

let t: TestDb;
let project: string;

beforeAll(async () => {
  t = await createTestDb();
  project = (await t.db.query<{ id: string }>(`INSERT INTO projects (name) VALUES ('charge-many-${Date.now()}') RETURNING id`)).rows[0]!.id;
});
afterAll(async () => {
  await t?.drop();
});

/** Two new rules; `budget`: the first's total budget in wei. */
let made = 0;
async function twoRules(budget: bigint | null = null): Promise<[number, number]> {
  made++;
  const r = await t.db.query<{ id: string }>(
    `INSERT INTO gas_sponsors (project_id, chain_id, kind, address, total_budget_wei) VALUES ($1, $2, 'ANY', $4, $3), ($1, $2, 'ANY', $5, NULL) RETURNING id`,
    [project, CHAIN, budget?.toString() ?? null, `x${made}`, `y${made}`],
  );
  const ids = r.rows.map((x) => Number(x.id)).sort((a, b) => a - b);
  return [ids[0]!, ids[1]!];
}

/** The charges, on rules given by index, with their meta-transaction ids made unique per call. */
const charges = (rules: [number, number], tag: string): Charge[] => [
  { chainId: CHAIN, metaTxnId: `${tag}1`, ruleIds: [rules[0]], wallets: [A], cost: { wei: 1_000n, usd: 2_000n } },
  { chainId: CHAIN, metaTxnId: `${tag}2`, ruleIds: [rules[1], rules[0]], wallets: [B, A, B], cost: { wei: 30_000n, usd: null } },
  { chainId: CHAIN, metaTxnId: `${tag}3`, ruleIds: [rules[1]], wallets: [C], cost: { wei: 500_000n, usd: 7_000_000n } },
  { chainId: CHAIN, metaTxnId: `${tag}4`, ruleIds: [rules[0]], wallets: [C, A], cost: { wei: 7n, usd: 11n } },
];

/** Every counter and charge row of these rules, with the rules named by position (so two pairs compare). */
async function state(rules: [number, number], tag: string) {
  const pos = (id: string) => rules.indexOf(Number(id));
  const q = async (sql: string) => (await t.db.query<Record<string, unknown>>(sql, [rules])).rows.map((r) => ({ ...r, id: pos(String(r.id)) }));
  return {
    // A rule's spend is the sum of its shards' (spend-caps.ts).
    totals: await q(
      'SELECT sponsor_id AS id, sum(total_wei)::text AS wei, sum(total_usd)::text AS usd FROM sponsor_spend_shards WHERE sponsor_id = ANY($1::bigint[]) GROUP BY sponsor_id ORDER BY sponsor_id',
    ),
    today: await q(
      `SELECT sponsor_id AS id, sum(today_wei)::text AS wei, sum(today_usd)::text AS usd FROM sponsor_spend_shards WHERE sponsor_id = ANY($1::bigint[]) AND day = (now() AT TIME ZONE 'UTC')::date GROUP BY sponsor_id ORDER BY sponsor_id`,
    ),
    wallets: await q('SELECT sponsor_id AS id, wallet, spent_wei::text AS wei, spent_usd::text AS usd FROM sponsor_wallet_spend WHERE sponsor_id = ANY($1::bigint[]) ORDER BY sponsor_id, wallet'),
    charges: (
      await q(
        `SELECT sponsor_id AS id, replace(meta_txn_id, '${tag}', '') AS meta, wallets, wei::text AS wei, usd::text AS usd FROM sponsor_charges WHERE sponsor_id = ANY($1::bigint[]) ORDER BY meta_txn_id, sponsor_id`,
      )
    ).map((r) => ({ ...r, wallets: String((r as Record<string, unknown>).wallets) })),
  };
}

describe('charges made together', () => {
  it('leave every counter and charge row as the same charges made one by one', async () => {
    const one = await twoRules();
    const caps = spendCaps(t.db);
    for (const c of charges(one, 'one')) await t.db.transaction(async (tx) => caps.charge(tx, c));
    const many = await twoRules();
    await t.db.transaction(async (tx) => caps.chargeMany(tx, charges(many, 'many')));
    const [byOne, together] = [await state(one, 'one'), await state(many, 'many')];
    expect(together).toEqual(byOne);
    // Figures computed from the charges: rule 0 took charges 1, 2, 4; rule 1 took 2 and 3.
    expect(together.totals).toEqual([
      { id: 0, wei: '31007', usd: '2011' },
      { id: 1, wei: '530000', usd: '7000000' },
    ]);
    expect(together.wallets.filter((w) => w.id === 0)).toEqual([
      { id: 0, wallet: A.toLowerCase(), wei: '31007', usd: '2011' },
      { id: 0, wallet: B.toLowerCase(), wei: '30000', usd: '0' },
      { id: 0, wallet: C.toLowerCase(), wei: '7', usd: '11' },
    ]);
    expect(together.charges).toHaveLength(5);
  });

  it('fail where one of them would have, and write nothing of any', async () => {
    // Rule 0 has 31 006 wei of budget: the four charges spend 31 007 on it, the first three 31 000.
    const rules = await twoRules(31_006n);
    const caps = spendCaps(t.db);
    const before = await state(rules, 'over');
    await expect(t.db.transaction(async (tx) => caps.chargeMany(tx, charges(rules, 'over')))).rejects.toThrow(`metarelay_over_budget:${rules[0]}:totalBudget`);
    expect(await state(rules, 'over')).toEqual(before);
    // One by one, the first three pass and the fourth is refused, as the group's second run does.
    const list = charges(rules, 'over');
    for (const c of list.slice(0, 3)) await t.db.transaction(async (tx) => caps.charge(tx, c));
    await expect(t.db.transaction(async (tx) => caps.charge(tx, list[3]!))).rejects.toThrow('totalBudget');
    expect((await state(rules, 'over')).totals[0]).toEqual({ id: 0, wei: '31000', usd: '2000' });
  });
});
