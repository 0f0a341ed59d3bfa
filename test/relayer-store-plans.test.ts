// The intake's queue-limit counts read the live rows only, whatever the history of the chain: their plan
// uses the partial indexes over live statuses (migration 0027). Before it, PENDING_PRECONDITION had made
// those indexes unusable and every SendMetaTxn counted its key's rows by reading the whole table.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Address } from 'viem';
import { MOVE_SPEND } from '../src/relayer/intake/spend-caps.ts';
import { FIND_MANY_SQL, GROUP_KNOWN_SQL, metaTxnRepo } from '../src/relayer/store.ts';
import { GROUP_LIMITS_SQL, readLimitsMany } from '../src/relayer/queue-limits.ts';
import { queueRow } from './support/meta-rows.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';

const CHAIN = 7;
const WALLET = '0x00000000000000000000000000000000000000aa';
const PAYER = '0x00000000000000000000000000000000000000bb';
const IP = '203.0.113.9';
const KEY = 42;

let t: TestDb;

interface Scan {
  relation: string;
  index?: string;
  type: string;
  cond?: string;
}

/** The scans of an EXPLAIN (FORMAT JSON) plan, with the index condition each looked up by. */
function scansOf(plan: unknown): Scan[] {
  const scans: Scan[] = [];
  const walk = (node: Record<string, unknown>) => {
    if (node['Relation Name'])
      scans.push({ relation: String(node['Relation Name']), index: node['Index Name'] as string | undefined, type: String(node['Node Type']), cond: node['Index Cond'] as string | undefined });
    for (const child of (node.Plans as Array<Record<string, unknown>> | undefined) ?? []) walk(child);
  };
  walk((plan as Array<{ Plan: Record<string, unknown> }>)[0].Plan);
  return scans;
}

/**
 * The plan PostgreSQL keeps for a named statement once it settles on one plan for every run (a generic
 * plan: made for no values in particular; what both engines use for named statements, postgres.ts and
 * pglite-worker.mjs).
 */
async function genericScans(sql: string, nParams: number): Promise<Scan[]> {
  return t.db.transaction(async (tx) => {
    await tx.exec('SET LOCAL plan_cache_mode = force_generic_plan');
    await tx.exec(`PREPARE generic_probe AS ${sql}`);
    try {
      const r = await tx.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) EXECUTE generic_probe(${Array(nParams).fill('NULL').join(', ')})`);
      return scansOf(r.rows[0]['QUERY PLAN']);
    } finally {
      await tx.exec('DEALLOCATE generic_probe');
    }
  });
}
beforeAll(async () => {
  // Fresh: a reused database's tables and indexes still hold earlier tests' deleted rows, which move the planner.
  t = await createTestDb({ fresh: true });
  // 3 000 finished meta-transactions of the same key, address, payer and wallet, then three live ones.
  await t.db.query(
    `INSERT INTO meta_txns (chain_id, id, wallet, entrypoint, input, status, gas_limit, gas_estimated, key_id, client_ip, fee_payer)
     SELECT $1, 'old' || g, $2, $2, '0x', 'SUCCEEDED', 1, 1, $3, $4, $5 FROM generate_series(1, 3000) g`,
    [CHAIN, WALLET, KEY, IP, PAYER],
  );
  // And 3 000 of many other keys, addresses and payers, as a relayer's history has: a plan made for no
  // values in particular then expects one key's or one address's rows to be few.
  await t.db.query(
    `INSERT INTO meta_txns (chain_id, id, wallet, entrypoint, input, status, gas_limit, gas_estimated, key_id, client_ip, fee_payer)
     SELECT $1, 'other' || g, $2, $2, '0x', 'SUCCEEDED', 1, 1, 1000 + g % 300, '198.18.' || (g / 250) || '.' || (g % 250), '0x' || lpad(to_hex(g), 40, '0')
       FROM generate_series(1, 3000) g`,
    [CHAIN, WALLET],
  );
  await t.db.query(
    `INSERT INTO meta_txns (chain_id, id, wallet, entrypoint, input, status, gas_limit, gas_estimated, key_id, client_ip, fee_payer)
     SELECT $1, 'live' || g, $2, $2, '0x', (ARRAY['QUEUED', 'SENT', 'PENDING_PRECONDITION'])[g], 1, 1, $3, $4, $5 FROM generate_series(1, 3) g`,
    [CHAIN, WALLET, KEY, IP, PAYER],
  );
  await t.db.query(
    `INSERT INTO meta_txn_bundles (chain_id, bundle_id, meta_txn_id, wallet, nonce_space, nonce, live)
     SELECT $1, m.id, m.id, $2, 0, row_number() OVER (ORDER BY m.id), m.status IN ('QUEUED', 'SENT', 'PENDING_PRECONDITION') FROM meta_txns m WHERE m.chain_id = $1`,
    [CHAIN, WALLET],
  );
  await t.db.exec('ANALYZE meta_txns; ANALYZE meta_txn_bundles');
}, 120_000);
afterAll(() => t?.drop());

describe(`intake queue limits (${TEST_DB})`, () => {
  const member = (payer: string | null, wallets: string[], keyId: number | null, clientIp: string | null) => ({
    chainId: CHAIN,
    feePayer: payer as `0x${string}` | null,
    bundles: wallets.map((w) => ({ wallet: w as `0x${string}` })),
    keyId,
    clientIp,
  });
  // Keyed: its address's share does not apply (null); the key's does.
  const one = member(PAYER, [WALLET], KEY, IP);
  const keyless = member(null, [WALLET], null, IP);
  // GROUP_LIMITS_SQL's parameters for these members, as readLimitsMany sends them.
  const paramsOf = (ms: ReturnType<typeof member>[]) => {
    const wallets = ms.flatMap((m, i) => m.bundles.map((b) => [i, b.wallet] as const));
    return [
      ms.map((_, i) => i),
      ms.map((m) => m.chainId),
      ms.map((m) => m.feePayer),
      ms.map((m) => m.keyId),
      ms.map((m) => (m.keyId == null ? m.clientIp : null)),
      wallets.map((w) => w[0]),
      wallets.map((w) => w[1]),
    ];
  };

  it('count the live meta-transactions of a payer, a wallet, a key and an address, not the finished ones', async () => {
    const [x, y] = await readLimitsMany(t.db, [one, keyless]);
    expect(x.payer_busy).toMatch(/^live[123]$/);
    // The payer runs no bundle of its own here, and the wallet pays no fee: neither moves a live fee's balance.
    expect(x.payer_moved).toBeNull();
    expect(x.wallet_paying).toBeNull();
    expect(x.per_wallet).toEqual([{ wallet: WALLET, n: 3 }]);
    expect(Number(x.by_key)).toBe(3);
    expect(Number(y.by_ip)).toBe(3);
  });

  it('read them from the partial indexes over live rows: no scan reads the 3 000 finished ones', async () => {
    const r = await t.db.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${GROUP_LIMITS_SQL}`, paramsOf([one, keyless]));
    const scans = scansOf(r.rows[0]['QUERY PLAN']).filter((x) => x.relation === 'meta_txns' || x.relation === 'meta_txn_bundles');
    // The payer, the payer's own bundles, the wallets' fee-paying rows, the wallet's bundles, the key and
    // the address: six scans, each of a live-rows index.
    expect(scans).toHaveLength(6);
    for (const scan of scans) expect(scan.index, JSON.stringify(scans)).toMatch(/^meta_txns_live_|^meta_txn_bundles_live_/);
  });

  it('give each member of an intake group the counts it alone gets', async () => {
    const members = [one, member(null, [`0x${'5'.repeat(40)}`, WALLET], null, IP), member(PAYER, [], 1001, null), keyless];
    const alone = await Promise.all(members.map(async (m) => (await readLimitsMany(t.db, [m]))[0]));
    expect(await readLimitsMany(t.db, members)).toEqual(alone);
    expect(alone.map((x) => x.by_ip)).toEqual(['0', '3', '0', '3']);
  });

  it('keep reading them from the live-rows indexes under a generic plan, each by its payer, wallet, key or address', async () => {
    const scans = (await genericScans(GROUP_LIMITS_SQL, 7)).filter((x) => x.relation === 'meta_txns' || x.relation === 'meta_txn_bundles');
    expect(scans).toHaveLength(6);
    for (const scan of scans) {
      expect(scan.index, JSON.stringify(scans)).toMatch(/^meta_txns_live_|^meta_txn_bundles_live_/);
      // Not by chain alone: that reads every live meta-transaction of the chain on every SendMetaTxn.
      expect(scan.cond, JSON.stringify(scans)).toMatch(/\b(fee_payer|wallet|key_id|client_ip) = /);
    }
  });
});

// What a new meta-transaction already is (its ids known, its nonces held) is asked on every SendMetaTxn.
// A generic plan of it once started from the chain's live meta-transactions and read every one of them
// (26 Nov); it must look each id and each nonce up by key, whatever plan is kept.
describe(`the "already known" look-up (${TEST_DB})`, () => {
  it('looks up each id and each nonce by key under a generic plan, whatever the statistics say of live rows: no scan by chain alone', async () => {
    const byKey = (s: Scan) => (s.relation === 'meta_txns' ? /\bid = /.test(s.cond ?? '') : /\bbundle_id = |\bwallet = .*\bnonce = /.test(s.cond ?? ''));
    const check = async () => {
      // One meta-transaction's look-up, and an intake group's.
      // Its ids in meta_txns, its ids in meta_txn_bundles and their rows, its nonces' holders and their
      // rows; for the look-ups of many callers (FIND_MANY_SQL), the first three.
      for (const [sql, n, scanned] of [
        [GROUP_KNOWN_SQL, 8, 5],
        [FIND_MANY_SQL, 3, 3],
      ] as const) {
        const scans = (await genericScans(sql, n)).filter((x) => x.relation === 'meta_txns' || x.relation === 'meta_txn_bundles');
        for (const scan of scans) expect(byKey(scan), JSON.stringify(scans)).toBe(true);
        expect(scans).toHaveLength(scanned);
      }
    };
    await check();
    // Statistics taken when nothing was live (a relayer at rest) make a live-rows index look empty, and
    // so free to walk: the plan must not start there either.
    await t.db.exec(`UPDATE meta_txns SET status = 'SUCCEEDED' WHERE chain_id = ${CHAIN} AND id LIKE 'live%'; ANALYZE meta_txns; ANALYZE meta_txn_bundles`);
    try {
      await check();
    } finally {
      await t.db.exec(
        `UPDATE meta_txns SET status = (ARRAY['QUEUED', 'SENT', 'PENDING_PRECONDITION'])[substr(id, 5)::int] WHERE chain_id = ${CHAIN} AND id LIKE 'live%'; ANALYZE meta_txns; ANALYZE meta_txn_bundles`,
      );
    }
  });

  it("finds each intake group member's live nonce holder and known rows, and tags them with the member", async () => {
    const r = await t.db.query<{ why: string; i: number; id: string }>(GROUP_KNOWN_SQL, [
      [0, 1, 1],
      [CHAIN, CHAIN, CHAIN],
      ['old7', 'nothing', 'old9'],
      [1, 2],
      [CHAIN, CHAIN],
      [WALLET, WALLET],
      ['0', '0'],
      ['1', '2'],
    ]);
    expect(r.rows.map((x) => [x.why, Number(x.i), x.id]).sort()).toEqual([
      ['held', 1, 'live1'],
      ['held', 2, 'live2'],
      ['known', 0, 'old7'],
      ['known', 1, 'old9'],
    ]);
  });
});

// Issue 29: a keyed backend relaying for many users from one address was refused past the 200-per-address
// share (68 of a burst of 300 got 409). The per-address share is for keyless callers; a key has its own.
describe(`intake queue shares per address and per key (${TEST_DB})`, () => {
  const SHARES = { perWallet: 16, perKey: 5, perAddress: 2 };
  const BACKEND = '198.51.100.7';
  const live = async (where: string, arg: unknown) =>
    Number((await t.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM meta_txns WHERE chain_id = 8 AND status = 'QUEUED' AND ${where}`, [arg])).rows[0].n);
  let n = 0;
  const put = (who: { keyId?: number; clientIp: string }) => {
    n++;
    return queueRow(metaTxnRepo(t.db), 8, { id: `share${n}`, wallet: `0x${n.toString(16).padStart(40, '0')}` as Address, nonce: 0n, ...who }, SHARES);
  };

  it("bounds a keyed caller by its key's share, not by its address's; keyless callers of an address share its", async () => {
    for (let i = 0; i < 5; i++) await put({ keyId: 7, clientIp: BACKEND });
    await expect(put({ keyId: 7, clientIp: BACKEND })).rejects.toThrow(/this access key already has 5 meta-transactions queued/);
    // Another key of the same backend address has its own share.
    for (let i = 0; i < 3; i++) await put({ keyId: 8, clientIp: BACKEND });
    expect(await live('client_ip = $1', BACKEND)).toBe(8);

    const PHONE = '192.0.2.44';
    await put({ clientIp: PHONE });
    await put({ clientIp: PHONE });
    await expect(put({ clientIp: PHONE })).rejects.toThrow(/client address 192\.0\.2\.44 already has 2 meta-transactions queued/);
    expect(await live('client_ip = $1', PHONE)).toBe(2);
  });
});

// A mined sponsored meta-transaction moves its charge on a shard of its rule (by key: an upsert) and on each of its wallets'
// counters of the day, many charges in one statement (spend-caps.ts MOVE_SPEND). The wallet counters' key
// is (rule, wallet, day): a plan that looks them up by rule and day reads every wallet the rule ever paid
// for (as one made with the statistics of a few rows did: 265 buffers each after 1 000 sends, 30 Nov;
// store-statistics.test.ts).
describe(`a mined charge's counters (${TEST_DB})`, () => {
  it('are each looked up by their key under a generic plan', async () => {
    await t.db.exec(`INSERT INTO sponsor_wallet_spend (sponsor_id, wallet, day, spent_wei, spent_usd)
      SELECT 1 + g % 3, '0x' || lpad(to_hex(g % 1000), 40, '0'), DATE '2026-11-01' + g % 30, 1, 1 FROM generate_series(1, 30000) g ON CONFLICT DO NOTHING;
      INSERT INTO sponsor_spend_shards (sponsor_id, shard, day, total_wei) SELECT 1 + g % 2000, g / 2000, DATE '2026-11-01', 1 FROM generate_series(1, 30000) g ON CONFLICT DO NOTHING;
      INSERT INTO sponsor_charges (chain_id, meta_txn_id, sponsor_id, wallets, day, wei, usd)
        SELECT 7, '0x' || lpad(to_hex(g), 64, '0'), 1 + g % 3, ARRAY['0x' || lpad(to_hex(g % 1000), 40, '0')], DATE '2026-11-01' + g % 30, 1, 1 FROM generate_series(1, 30000) g;
      ANALYZE sponsor_wallet_spend; ANALYZE sponsor_spend_shards; ANALYZE sponsor_charges`);
    const scans = (await genericScans(MOVE_SPEND, 13)).filter((s) => s.type !== 'ModifyTable' && s.type !== 'Function Scan' && s.type !== 'CTE Scan');
    const of = (relation: string) => scans.filter((s) => s.relation === relation);
    expect(of('sponsor_wallet_spend').length, JSON.stringify(scans)).toBeGreaterThan(0);
    expect(of('sponsor_charges').length, JSON.stringify(scans)).toBeGreaterThan(0);
    for (const s of of('sponsor_wallet_spend')) expect(s.cond, JSON.stringify(scans)).toMatch(/\bwallet = .*\bday = |\bday = .*\bwallet = /);
    // The rules are few (a scan of them is fine); a charge is one of every sponsored meta-transaction's.
    for (const s of of('sponsor_charges')) expect(s.cond, JSON.stringify(scans)).toMatch(/\bid = /);
  });
});
