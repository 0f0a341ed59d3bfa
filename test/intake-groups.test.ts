// Concurrent intakes share one transaction (relayer/store.ts insertGroupIn, util/key-groups.ts): each
// must still get what it alone would have got, and what serialized intakes of one wallet (its advisory
// lock) must stay serialized. Judged by the rows stored, their events and the transactions that wrote
// them (xmin), on both databases.

import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metaTxnStatusEvents } from '../src/events/metatxn-events.ts';
import { EventBell } from '../src/events/outbox.ts';
import { metaTxnRepo, NonceTaken, QueueFull, type MetaTxnRepo, type NewMetaTxn } from '../src/relayer/store.ts';
import type { Tx } from '../src/store/db.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { queueRow } from './support/meta-rows.ts';

const CHAIN = 31337;
const LIMITS = { perWallet: 1, perKey: 1000, perAddress: 1000 };
let t: TestDb;
let repo: MetaTxnRepo;
const chargeCalls: string[][] = [];
const commitOrder: string[] = [];

beforeAll(async () => {
  t = await createTestDb();
  // One group at a time: the first call of a test runs alone, those made with it wait and go together.
  repo = metaTxnRepo(t.db, {
    onStatus: metaTxnStatusEvents(() => repo, new EventBell()),
    chargeAtCommit: (tx, charges) => {
      chargeCalls.push(charges.map((c) => (c as { metaTxnId: string }).metaTxnId));
      commitOrder.push('charges');
      void tx.atCommit('SELECT 1');
    },
    groups: { size: 32, running: 1 },
  });
});
afterAll(async () => {
  await t?.drop();
});

let n = 0;
/** A fresh id and wallet of its own. */
const fresh = () => {
  n++;
  const hex = n.toString(16).padStart(8, '0');
  return { id: `${hex}${'c'.repeat(56)}`, wallet: `0x${hex}${'d'.repeat(32)}` as Address };
};
const send = (x: { id: string; wallet: Address; nonce?: bigint }, beforeCommit?: (tx: Tx) => Promise<void>) =>
  queueRow(repo, CHAIN, { id: x.id, wallet: x.wallet, nonce: x.nonce ?? 0n }, LIMITS, beforeCommit);

/** A meta-transaction of one bundle of `x`'s wallet, as intake writes it; `bundle`: its bundle's own id. */
const metaTxn = (x: { id: string; wallet: Address }, extra: Partial<NewMetaTxn> = {}, bundle = x.id): NewMetaTxn => ({
  chainId: CHAIN,
  id: x.id,
  projectId: null,
  wallet: x.wallet,
  entrypoint: x.wallet,
  input: '0x',
  gasLimit: 100_000n,
  gasEstimated: 50_000n,
  sponsored: false,
  sponsorId: null,
  feeToken: null,
  feeValue: null,
  feePayer: null,
  keyId: null,
  clientIp: null,
  bundles: [{ id: bundle, wallet: x.wallet, space: 0n, nonce: 0n }],
  ...extra,
});

const rowsOf = async (ids: string[]) =>
  (
    await t.db.query<{ id: string; xmin: string; events: string }>(
      `SELECT m.id, m.xmin::text AS xmin, (SELECT count(*)::text FROM events e WHERE e.subject = 'metatxn:' || m.chain_id || ':' || m.id) AS events
       FROM meta_txns m WHERE m.chain_id = $1 AND m.id = ANY($2)`,
      [CHAIN, ids],
    )
  ).rows;

describe('intakes in groups', () => {
  it('intakes of different wallets sent together are written by one transaction, each with its row, bundle and event', async () => {
    const before = repo.groupCounts();
    const first = fresh();
    const others = Array.from({ length: 8 }, fresh);
    const results = await Promise.all([send(first), ...others.map((x) => send(x))]);
    expect(results.map((r) => r.created)).toEqual(Array(9).fill(true));
    const after = repo.groupCounts();
    expect(after.grouped - before.grouped).toBe(8);
    expect(after.fallbacks).toBe(before.fallbacks);
    const rows = await rowsOf(others.map((x) => x.id));
    expect(rows).toHaveLength(8);
    expect(new Set(rows.map((r) => r.xmin)).size).toBe(1);
    expect(rows.every((r) => r.events === '1')).toBe(true);
    const bundles = await t.db.query<{ n: string }>('SELECT count(*)::text AS n FROM meta_txn_bundles WHERE chain_id = $1 AND meta_txn_id = ANY($2) AND live', [CHAIN, others.map((x) => x.id)]);
    expect(bundles.rows[0].n).toBe('8');
  });

  it("each intake of a group gets its own answer: known, a nonce taken, its wallet's share full, or written", async () => {
    const known = fresh();
    const holder = fresh();
    const busy = fresh();
    await send(known);
    await send(holder);
    await send(busy);
    const before = repo.groupCounts();
    const taken = { id: fresh().id, wallet: holder.wallet, nonce: 0n };
    const full = { id: fresh().id, wallet: busy.wallet, nonce: 1n };
    const ok = [fresh(), fresh()];
    const outcomes = await Promise.allSettled([send(fresh()), send(known), send(taken), send(full), send(ok[0]), send(ok[1])]);
    expect(repo.groupCounts().grouped - before.grouped).toBe(5);
    expect(repo.groupCounts().fallbacks).toBe(before.fallbacks);
    const [, again, takenOut, fullOut, ok0, ok1] = outcomes;
    expect(again.status === 'fulfilled' && again.value.created === false && again.value.row.id === known.id).toBe(true);
    expect(takenOut.status === 'rejected' && takenOut.reason instanceof NonceTaken && takenOut.reason.by === holder.id).toBe(true);
    expect(fullOut.status === 'rejected' && fullOut.reason instanceof QueueFull).toBe(true);
    expect(ok0.status === 'fulfilled' && ok0.value.created && ok1.status === 'fulfilled' && ok1.value.created).toBe(true);
    const rows = await rowsOf([known.id, taken.id, full.id, ok[0].id, ok[1].id]);
    expect(rows.map((r) => r.id).sort()).toEqual([known.id, ok[0].id, ok[1].id].sort());
    expect(rows.every((r) => r.events === '1')).toBe(true);
  });

  it("an access key's share of the queue counts the members of its group admitted before", async () => {
    const keyed = (x: { id: string; wallet: Address }) => queueRow(repo, CHAIN, { ...x, nonce: 0n, keyId: 42 }, { ...LIMITS, perKey: 3 });
    const before = repo.groupCounts();
    await keyed(fresh());
    const members = [fresh(), fresh(), fresh(), fresh()];
    const outcomes = await Promise.allSettled([send(fresh()), ...members.map(keyed)]);
    expect(repo.groupCounts().grouped - before.grouped).toBe(4);
    expect(outcomes.slice(1).map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'rejected']);
    expect(String((outcomes[3] as PromiseRejectedResult).reason)).toMatch('this access key already has 3');
    const live = await t.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM meta_txns WHERE chain_id = $1 AND key_id = 42`, [CHAIN]);
    expect(live.rows[0].n).toBe('3');
  });

  it('a group whose COMMIT fails is run again one intake at a time: only the failing one is refused, the others are written once', async () => {
    const before = repo.groupCounts();
    const good = [fresh(), fresh(), fresh()];
    const bad = fresh();
    const overBudget = async (tx: Tx) => {
      void tx.atCommit(`SELECT metarelay_over_budget($1, 'totalBudget')`, [7]);
    };
    const outcomes = await Promise.allSettled([send(fresh()), send(good[0]), send(bad, overBudget), send(good[1]), send(good[2])]);
    expect(repo.groupCounts().fallbacks - before.fallbacks).toBe(1);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect(String((outcomes[2] as PromiseRejectedResult).reason)).toMatch('metarelay_over_budget:7:totalBudget');
    const rows = await rowsOf([...good, bad].map((x) => x.id));
    expect(rows.map((r) => r.id).sort()).toEqual(good.map((x) => x.id).sort());
    // Written alone after the group rolled back: one transaction each, one event each.
    expect(new Set(rows.map((r) => r.xmin)).size).toBe(3);
    expect(rows.every((r) => r.events === '1')).toBe(true);
  });

  it('two intakes of one wallet never share a group: they are written by different transactions, in the order sent', async () => {
    const one = fresh();
    const next = { id: fresh().id, wallet: one.wallet, nonce: 1n };
    const other = fresh();
    const wide = { ...LIMITS, perWallet: 2 };
    const outcomes = await Promise.all([send(fresh()), queueRow(repo, CHAIN, { ...one, nonce: 0n }, wide), queueRow(repo, CHAIN, next, wide), queueRow(repo, CHAIN, { ...other, nonce: 0n }, wide)]);
    expect(outcomes.every((o) => o.created)).toBe(true);
    const rows = new Map((await rowsOf([one.id, next.id, other.id])).map((r) => [r.id, BigInt(r.xmin)]));
    expect(rows.get(one.id)).toBe(rows.get(other.id));
    expect(rows.get(next.id)! > rows.get(one.id)!).toBe(true);
  });

  it("makes its members' charges in one call, after every member's own statements, with the COMMIT", async () => {
    chargeCalls.length = 0;
    commitOrder.length = 0;
    const before = async () => {
      commitOrder.push('before commit');
    };
    const [a, b, c] = [fresh(), fresh(), fresh()];
    const charged = (x: { id: string; wallet: Address }) => repo.insert(metaTxn(x, { sponsored: true, sponsorId: 1, charge: { metaTxnId: x.id } }), LIMITS, before);
    const filler = fresh();
    await Promise.all([charged(filler), charged(a), send(fresh()), charged(b), charged(c)]);
    expect(chargeCalls).toEqual([[filler.id], [a.id, b.id, c.id]]);
    expect(commitOrder).toEqual(['before commit', 'charges', 'before commit', 'before commit', 'before commit', 'charges']);
  });

  it('answers look-ups made together as each alone: by its own id, by a bundle inside it, or none', async () => {
    const x = fresh();
    const bundle = fresh().id;
    await repo.insert(metaTxn(x, {}, bundle));
    const asked = [x.id, bundle, 'f'.repeat(64), bundle, x.id, 'e'.repeat(64)];
    const together = await Promise.all(asked.map((id) => repo.find(CHAIN, id)));
    expect(together.map((r) => r?.id)).toEqual([x.id, x.id, undefined, x.id, x.id, undefined]);
    expect(await repo.find(CHAIN + 1, x.id)).toBeUndefined();
  });

  it('refuses a charged meta-transaction when it has no way to make the charge, and writes nothing', async () => {
    const bare = metaTxnRepo(t.db);
    const x = fresh();
    await expect(bare.insert(metaTxn(x, { sponsored: true, sponsorId: 1, charge: { metaTxnId: x.id } }))).rejects.toThrow('no chargeAtCommit');
    expect(await rowsOf([x.id])).toEqual([]);
  });
});
