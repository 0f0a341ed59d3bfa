// Sponsorship spend in shards (spend-caps.ts, issue #53), on PostgreSQL with several pools on one
// database as several processes have: a charge of a rule does not wait for another charge of it in
// flight (with one counter row per rule, every intake of every process took turns on it), and a flood
// of charges of one capped rule from several pools at once never charges past its caps, nor leaves
// budget unusable once the flood is over. Judged by the rows: the charge rows, and the counters summed.

import pg from 'pg';
import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spendCaps, type Charge } from '../src/relayer/intake/spend-caps.ts';
import type { Db } from '../src/store/db.ts';
import { openPostgres } from '../src/store/postgres.ts';
import { createTestDb, type TestDb } from './support/db.ts';

const CHAIN = 31337;
const WALLETS = Array.from({ length: 8 }, (_, i) => `0x${(0xa0 + i).toString(16).padStart(40, '0')}` as Address);

let t: TestDb;
let project: string;
const pools: Db[] = [];

beforeAll(async () => {
  t = await createTestDb();
  project = (await t.db.query<{ id: string }>(`INSERT INTO projects (name) VALUES ('spend-shards') RETURNING id`)).rows[0]!.id;
});
afterAll(async () => {
  for (const p of pools) await p.close().catch(() => undefined);
  await t?.drop();
});

/** A pool of its own on the test's database (a process's), of `max` connections. */
async function pool(max: number): Promise<Db> {
  const p = await openPostgres(t.location, { max, maintain: false });
  pools.push(p);
  return p;
}

let made = 0;
async function rule(caps: { dailyWei?: bigint; totalWei?: bigint } = {}): Promise<number> {
  made++;
  const r = await t.db.query<{ id: string }>(`INSERT INTO gas_sponsors (project_id, chain_id, kind, address, daily_cap_wei, total_budget_wei) VALUES ($1, $2, 'ANY', $3, $4, $5) RETURNING id`, [
    project,
    CHAIN,
    `r${made}`,
    caps.dailyWei?.toString() ?? null,
    caps.totalWei?.toString() ?? null,
  ]);
  return Number(r.rows[0]!.id);
}

let metas = 0;
const charge = (ruleId: number, wei: bigint, wallet = WALLETS[0]!): Charge => ({ chainId: CHAIN, metaTxnId: `m${++metas}`, ruleIds: [ruleId], wallets: [wallet], cost: { wei, usd: null } });

/** What the rows say of a rule: its standing charges' sum and count, and its counters summed over shards. */
async function spendOf(ruleId: number) {
  const c = await t.db.query<{ n: string; wei: string | null }>('SELECT count(*)::text AS n, sum(wei)::text AS wei FROM sponsor_charges WHERE sponsor_id = $1 AND refunded_at IS NULL', [ruleId]);
  const s = await t.db.query<{ today: string | null; total: string | null; rows: string }>(
    `SELECT sum(today_wei) FILTER (WHERE day = (now() AT TIME ZONE 'UTC')::date)::text AS today, sum(total_wei)::text AS total, count(*)::text AS rows FROM sponsor_spend_shards WHERE sponsor_id = $1`,
    [ruleId],
  );
  return { charges: Number(c.rows[0]!.n), charged: BigInt(c.rows[0]!.wei ?? 0), today: BigInt(s.rows[0]!.today ?? 0), total: BigInt(s.rows[0]!.total ?? 0), shardRows: Number(s.rows[0]!.rows) };
}

const pidOf = async (db: Db) => Number((await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);

describe('sponsorship spend in shards (PostgreSQL, several pools on one database)', () => {
  it('a charge of a rule goes through while another charge of the same rule is held before its COMMIT', async () => {
    const SHARDS = 256;
    const id = await rule();
    const a = await pool(1);
    let b = await pool(1);
    // Two backends of different shards (pid modulo SHARDS): another pool until they differ.
    while ((await pidOf(b)) % SHARDS === (await pidOf(a)) % SHARDS) b = await pool(1);
    const [capsA, capsB] = [spendCaps(a, { shards: SHARDS }), spendCaps(b, { shards: SHARDS })];
    // Each backend's first charge makes its shard's row (and shares out: no cap, no limit).
    // (Each send of its own wallet, as intake's wallet locks keep two sends of one wallet apart.)
    await a.transaction(async (tx) => capsA.charge(tx, charge(id, 5n, WALLETS[1])));
    await b.transaction(async (tx) => capsB.charge(tx, charge(id, 7n, WALLETS[2])));

    // A's charge is made, then its transaction waits for an advisory lock the test holds, before its COMMIT.
    const holder = await pool(1);
    await holder.query('SELECT pg_advisory_lock(53053)');
    const held = a.transaction(async (tx) => {
      capsA.charge(tx, charge(id, 11n, WALLETS[3]));
      void tx.atCommit('SELECT pg_advisory_xact_lock(53053)');
    });
    for (;;) {
      const w = await t.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE '%53053%'`);
      if (Number(w.rows[0]!.n) > 0) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    // B charges the same rule and commits while A still holds its shard's row (before: B waited on the
    // rule's row until A committed, or until lock_timeout).
    await b.transaction(async (tx) => capsB.charge(tx, charge(id, 13n, WALLETS[4])));
    expect((await spendOf(id)).charged).toBe(5n + 7n + 13n);
    await holder.query('SELECT pg_advisory_unlock(53053)');
    await held;
    const s = await spendOf(id);
    expect(s).toMatchObject({ charges: 4, charged: 36n, today: 36n, total: 36n });
    expect(s.shardRows).toBe(2);
  }, 60_000);

  it("a charge meeting its own shard (by pid) and its rule's row held by another connection goes to a free shard with room, without waiting", async () => {
    const SHARDS = 16;
    const DAILY = 1_600_000n;
    const id = await rule({ dailyWei: DAILY });
    const a = await pool(1);
    let b = await pool(1);
    while ((await pidOf(b)) % SHARDS === (await pidOf(a)) % SHARDS) b = await pool(1);
    const [ka, kb] = [(await pidOf(a)) % SHARDS, (await pidOf(b)) % SHARDS];
    const [capsA, capsB] = [spendCaps(a, { shards: SHARDS }), spendCaps(b, { shards: SHARDS })];
    const shardOf = async (meta: string) => Number((await t.db.query<{ shard: number }>('SELECT shard FROM sponsor_charges WHERE sponsor_id = $1 AND meta_txn_id = $2', [id, meta])).rows[0]!.shard);
    const rows = async () =>
      new Map(
        (
          await t.db.query<{ shard: number; today: string; room: string }>('SELECT shard, today_wei::text AS today, room_day_wei::text AS room FROM sponsor_spend_shards WHERE sponsor_id = $1', [id])
        ).rows.map((x) => [Number(x.shard), { today: BigInt(x.today), room: BigInt(x.room) }]),
      );

    // A's first charge makes A's shard and shares the cap out to it.
    const first = charge(id, 1_000n, WALLETS[5]);
    await a.transaction(async (tx) => capsA.charge(tx, first));
    expect(await shardOf(first.metaTxnId)).toBe(ka);

    // Another connection holds A's shard, as a charge in flight holds it until its COMMIT (a real
    // connection of its own, with no lock or idle-transaction timeout of its own to end the hold).
    const holder = new pg.Client({ connectionString: t.location });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM sponsor_spend_shards WHERE sponsor_id = $1 AND shard = $2 FOR UPDATE', [id, ka]);
      // B charges meanwhile and makes its own shard, with a share of the cap.
      const second = charge(id, 2_000n, WALLETS[6]);
      await b.transaction(async (tx) => capsB.charge(tx, second));
      expect(await shardOf(second.metaTxnId)).toBe(kb);

      // The rule's row held too: the only way through is B's shard, free and with room. Before, A's charge
      // locked the shard of its pid and waited on the holder until lock_timeout failed it.
      await holder.query('SELECT 1 FROM gas_sponsors WHERE id = $1 FOR UPDATE', [id]);
      const before = await rows();
      const third = charge(id, 3_000n, WALLETS[7]);
      await a.transaction(async (tx) => capsA.charge(tx, third));
      expect(await shardOf(third.metaTxnId)).toBe(kb);
      const after = await rows();
      expect(after.get(ka)).toEqual(before.get(ka));
      expect(after.get(kb)!.today).toBe(before.get(kb)!.today + 3_000n);
      expect(after.get(kb)!.room).toBe(before.get(kb)!.room);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
    const s = await spendOf(id);
    expect(s).toMatchObject({ charges: 3, charged: 6_000n, today: 6_000n, total: 6_000n, shardRows: 2 });
    // The rooms shared out never add up to more than the cap.
    const rooms = [...(await rows()).values()].reduce((x, r) => x + r.room, 0n);
    expect(rooms).toBeLessThanOrEqual(DAILY);
  }, 60_000);

  it('a flood of one capped rule from three pools never charges past its caps, and the budget left is spent to the cap once it is over', async () => {
    // Few shards for 12 backends: shards are shared, and charges past a shard's room share out under the rule's lock meanwhile.
    const SHARDS = 4;
    const COST = 1_000n;
    const DAILY = 150_500n;
    const TOTAL = 1_000_000n;
    const id = await rule({ dailyWei: DAILY, totalWei: TOTAL });
    const procs = await Promise.all([pool(4), pool(4), pool(4)]);
    const caps = procs.map((p) => spendCaps(p, { shards: SHARDS }));
    let ok = 0;
    const refusals: string[] = [];
    // 300 sends, 12 at a time: some alone, some in groups of three (an intake group's one statement).
    let next = 0;
    const worker = async (w: number) => {
      while (next < 300) {
        const n = next % 5 === 0 ? 3 : 1;
        next += n;
        const list = Array.from({ length: n }, (_, i) => charge(id, COST, WALLETS[(next + i) % WALLETS.length]));
        try {
          await procs[w % 3]!.transaction(async (tx) => caps[w % 3]!.chargeMany(tx, list));
          ok += n;
        } catch (err) {
          refusals.push(String((err as Error).message));
        }
      }
    };
    await Promise.all(Array.from({ length: 12 }, (_, w) => worker(w)));
    for (const r of refusals) expect(r).toMatch(new RegExp(`metarelay_over_budget:${id}:dailyCap`));
    const flood = await spendOf(id);
    expect(flood.charged).toBeLessThanOrEqual(DAILY);
    expect(flood.charges).toBe(ok);
    expect(flood.charged).toBe(COST * BigInt(ok));
    expect(flood.today).toBe(flood.charged);
    expect(flood.total).toBe(flood.charged);
    expect(refusals.length).toBeGreaterThan(0);
    // Quiet again: what the shards were given and did not spend comes back; one by one, charges go on to the cap.
    for (;;) {
      try {
        await procs[0]!.transaction(async (tx) => caps[0]!.charge(tx, charge(id, COST)));
      } catch (err) {
        expect(String((err as Error).message)).toMatch(/dailyCap/);
        break;
      }
    }
    const end = await spendOf(id);
    expect(end.charged).toBeLessThanOrEqual(DAILY);
    expect(end.charged).toBeGreaterThan(DAILY - COST);
    expect(end.today).toBe(end.charged);
  }, 120_000);
});
