import { prepared, type Db, type Queryable, type Tx } from '../../store/db.ts';
import { KeyGroups, type Outcome } from '../../util/key-groups.ts';
import { LIVE_IN } from '../live.ts';
import { clientLock, judgeLossBudget, type Exposed, type LossBudgets } from '../loss-budget.ts';
import { NonceTaken, normalise, type BundleRow, type MetaTxnRow, type NewMetaTxn, type StatusHook } from '../meta-txn-rows.ts';
import { judgeLimits, readLimitsMany, sharesOf, type QueueLimits } from '../queue-limits.ts';
import { deleteDropped, distinctBundles, insertRows } from './writes.ts';

/*
 * Intake's writes of new meta-transactions, in groups: concurrent intakes of different wallets share one
 * transaction and one COMMIT (docs/performance-log.md, "Intakes in groups"), each judged as it alone would be
 * (known already, a nonce another holds, its share of the queue, its loss budget). Its own file because
 * the grouping (locks, look-ups, judging, falling back one by one) is a job of its own beside the
 * statements; the rows are written by store/writes.ts, the tables' one writer.
 */

/** Advisory-lock keys of the wallets a meta-transaction touches, ascending (its bundles' wallets and its fee payer). */
function walletLockKeys(m: NewMetaTxn): number[] {
  const wallets = new Set([...m.bundles.map((b) => b.wallet.toLowerCase()), ...(m.feePayer ? [m.feePayer.toLowerCase()] : [])]);
  return [...new Set([...wallets].map((w) => Number.parseInt(w.slice(2, 10), 16) | 0))].sort((a, b) => a - b);
}

/** The advisory locks of a meta-transaction as (chain, key) pairs, and as the keys that keep two of them out of one intake group. */
const lockPairs = (m: NewMetaTxn): Array<[number, number]> => [
  ...walletLockKeys(m).map((k): [number, number] => [m.chainId % 2_000_000_000, k]),
  // A fee-paying one whose fee is not final also takes its client network's: its loss budget is judged under it.
  ...(m.exposureWei != null && m.clientNet ? [clientLock(m.chainId, m.clientNet)] : []),
];
const groupKeys = (m: NewMetaTxn): string[] => lockPairs(m).map(([c, k]) => `${c}:${k}`);

/** The wallets' advisory locks of a whole intake group, taken in one order (chain, then key), as each intake takes its own. */
const GROUP_LOCKS_SQL = prepared('SELECT pg_advisory_xact_lock(u.c, u.k) FROM (SELECT c, k FROM unnest($1::int[], $2::int[]) AS u(c, k) ORDER BY c, k) u');

/** One intake waiting for its group: what insert was given. */
interface PendingIntake {
  m: NewMetaTxn;
  limits?: QueueLimits;
  beforeCommit?: (tx: Tx, row: MetaTxnRow) => Promise<void>;
}

/** The bundles as written, for the status hook (StatusKnown.bundles). */
const writtenBundles = (m: NewMetaTxn): BundleRow[] =>
  distinctBundles(m)
    .map((b) => ({ bundle_id: b.id, meta_txn_id: m.id, wallet: b.wallet, nonce_space: b.space.toString(), nonce: b.nonce.toString() }))
    .sort((a, b) => (a.bundle_id < b.bundle_id ? -1 : a.bundle_id > b.bundle_id ? 1 : 0));

/**
 * What new meta-transactions (an intake group's members, or one) already are, in one statement, each
 * row tagged with its member (i): the rows known by any of its ids ((member, chain, id): $1..$3,
 * 'known'), and a live holder of one of its nonces ((member, chain, wallet, space, nonce): $4..$8,
 * 'held', at most one per member), which counts only when none is known. Each id, each nonce, then its
 * meta-transaction, is looked up by key (a LATERAL subquery with OFFSET 0 is not flattened into a join),
 * and the status is checked after the look-up, not in it (a status condition lets the planner walk a
 * live-rows index instead, which statistics taken when nothing was live make look free): whatever plan
 * PostgreSQL keeps, it cannot start from the chain's live rows, as a plan made for no values in
 * particular did (it read every live meta-transaction, 26 Nov).
 */
export const GROUP_KNOWN_SQL = prepared(`SELECT 'known' AS why, u.i, NULL AS held_wallet, NULL AS held_space, NULL AS held_nonce, m.*
   FROM unnest($1::int[], $2::bigint[], $3::text[]) AS u(i, chain, id)
   CROSS JOIN LATERAL (SELECT * FROM meta_txns y WHERE y.chain_id = u.chain AND y.id = u.id OFFSET 0) m
   UNION ALL
   SELECT 'known', u.i, NULL, NULL, NULL, m.*
   FROM unnest($1::int[], $2::bigint[], $3::text[]) AS u(i, chain, id)
   CROSS JOIN LATERAL (SELECT x.meta_txn_id FROM meta_txn_bundles x WHERE x.chain_id = u.chain AND x.bundle_id = u.id AND x.meta_txn_id <> x.bundle_id OFFSET 0) b
   CROSS JOIN LATERAL (SELECT * FROM meta_txns y WHERE y.chain_id = u.chain AND y.id = b.meta_txn_id OFFSET 0) m
   UNION ALL
   (SELECT DISTINCT ON (u.i) 'held', u.i, b.wallet, b.nonce_space::text, b.nonce::text, m.*
     FROM unnest($4::int[], $5::bigint[], $6::text[], $7::numeric[], $8::numeric[]) AS u(i, chain, wallet, space, nonce)
     CROSS JOIN LATERAL (SELECT * FROM meta_txn_bundles x WHERE x.chain_id = u.chain AND x.wallet = u.wallet AND x.nonce_space = u.space AND x.nonce = u.nonce OFFSET 0) b
     CROSS JOIN LATERAL (SELECT * FROM meta_txns y WHERE y.chain_id = u.chain AND y.id = b.meta_txn_id OFFSET 0) m
     WHERE m.status IN ${LIVE_IN} ORDER BY u.i)`);

/** A row of GROUP_KNOWN_SQL. */
type KnownRow = Record<string, unknown> & { why: 'known' | 'held'; held_wallet: string | null; held_space: string | null; held_nonce: string | null };

/**
 * What the look-up's rows say of a new meta-transaction: the live one it already is, or NonceTaken when
 * another holds one of its nonces; `dropped`: a DROPPED meta-transaction has its id (it is sent again).
 */
function judgeKnown(m: NewMetaTxn, found: KnownRow[]): { known?: MetaTxnRow; dropped: boolean } {
  const rows = found.filter((x) => x.why === 'known').map(({ why: _w, held_wallet: _a, held_space: _b, held_nonce: _c, i: _i, ...x }) => normalise(x));
  const known = rows.find((x) => x.id === m.id && x.status !== 'DROPPED') ?? rows.find((x) => x.status !== 'DROPPED');
  if (known) return { known, dropped: false };
  const held = found.find((x) => x.why === 'held');
  if (held) throw new NonceTaken(String(held.held_wallet), BigInt(String(held.held_space)), BigInt(String(held.held_nonce)), String(held.id));
  return { dropped: rows.some((x) => x.id === m.id) };
}

/** How the relayer admits new meta-transactions (MetaTxnRepo's intake). */
export interface MetaTxnIntake {
  /** A fee-paying one's loss budgets (loss-budget.ts), judged on `q` (its queuing transaction) or, before any write, on the database. */
  judgeLossBudget(m: Exposed, b: LossBudgets, q?: Queryable): Promise<void>;
  /**
   * Inserts the meta-transaction and its bundles atomically. Returns the existing row instead when any
   * of its ids is already known (the same bundle sent twice is one meta-transaction); throws
   * NonceTaken when another live meta-transaction holds one of its nonces. `beforeCommit` runs on the
   * same transaction once the row is written.
   */
  insert(m: NewMetaTxn, limits?: QueueLimits, beforeCommit?: (tx: Tx, row: MetaTxnRow) => Promise<void>): Promise<{ row: MetaTxnRow; created: boolean }>;
  /** How many intakes ran in groups, and how many groups were run again one by one. */
  groupCounts(): { groups: number; grouped: number; fallbacks: number };
}

export interface IntakeGroupOptions {
  onStatus?: StatusHook;
  /** Makes the charges (NewMetaTxn.charge) of the meta-transactions a transaction writes, with its COMMIT. */
  chargeAtCommit?: (tx: Tx, charges: unknown[]) => void;
  groups?: { size: number; running: number; more?: number };
  /**
   * Of the chains a group queues on, those whose dispatcher it wakes by NOTIFY with its COMMIT (the
   * fleet's dispatching process, when it is another: relayer/index.ts); none when not given.
   */
  notifyQueued?: (chainIds: number[]) => number[];
}

export function intakeGroups(db: Db, opts: IntakeGroupOptions = {}): MetaTxnIntake {
  const onStatus = opts.onStatus;
  const chargeAtCommit = (tx: Tx, charges: unknown[]) => {
    if (charges.length === 0) return;
    // A charge never goes unmade: a repository without the hook refuses a charged meta-transaction.
    if (!opts.chargeAtCommit) throw new Error('a sponsored meta-transaction with a charge, and no chargeAtCommit to make it');
    opts.chargeAtCommit(tx, charges);
  };

  /** GROUP_KNOWN_SQL: the look-up's rows of each member, in the members' order. */
  const knownOfMany = async (q: Queryable, ms: readonly NewMetaTxn[]): Promise<KnownRow[][]> => {
    const ids = ms.flatMap((m, i) => [m.id, ...m.bundles.map((b) => b.id)].map((id) => ({ i, chain: m.chainId, id })));
    const nonces = ms.flatMap((m, i) => m.bundles.map((b) => ({ i, chain: m.chainId, b })));
    const r = await q.query<KnownRow & { i: number }>(GROUP_KNOWN_SQL, [
      ids.map((x) => x.i),
      ids.map((x) => x.chain),
      ids.map((x) => x.id),
      nonces.map((x) => x.i),
      nonces.map((x) => x.chain),
      nonces.map((x) => x.b.wallet),
      nonces.map((x) => x.b.space.toString()),
      nonces.map((x) => x.b.nonce.toString()),
    ]);
    const out: KnownRow[][] = ms.map(() => []);
    for (const row of r.rows) out[Number(row.i)].push(row);
    return out;
  };

  /**
   * Several intakes of different wallets in one transaction (KeyGroups: no two share a wallet lock), as
   * each would run alone: the locks of all their wallets first (one statement, in one order), then for
   * each what it already is and its share of the queue (sent at once), the new rows and bundles in one
   * statement, their events, and their charges with the one COMMIT. What decides one intake alone (known,
   * a nonce taken, its share of the queue full) is its outcome and leaves the others be; anything that
   * fails the transaction throws, and KeyGroups runs each again alone. The shares of the queue are
   * judged in the members' order, each counting the members admitted before it: a wallet is in one
   * member of a group at most, and a key's or an address's share counts the group's earlier members.
   */
  const insertGroupIn = (group: PendingIntake[]): Promise<Outcome<{ row: MetaTxnRow; created: boolean }>[]> =>
    db.transaction(async (tx) => {
      // Sends of the same wallets take turns on their advisory locks (in one order, so two transactions
      // cannot deadlock), here and in every other process; unrelated wallets do not wait on each other. A
      // live nonce is also unique by constraint (meta_txn_bundles_live_nonce_uq). The locks, what the
      // members already are and their shares of the queue are asked at once: a connection runs them in
      // this order, the locks first, and answers them together (one round trip while the transaction
      // holds the connection, PGlite's only one).
      const pairs = group.flatMap((x) => lockPairs(x.m));
      const locking = tx.query(GROUP_LOCKS_SQL, [pairs.map((p) => p[0]), pairs.map((p) => p[1])]);
      const knowing = knownOfMany(
        tx,
        group.map((x) => x.m),
      );
      const limited = group.filter((x) => x.limits);
      const counting = limited.length
        ? readLimitsMany(
            tx,
            limited.map((x) => x.m),
          )
        : Promise.resolve([]);
      void Promise.allSettled([locking, knowing, counting]);
      await locking;
      const found = await knowing;
      const counts = new Map((await counting).map((c, k) => [limited[k], c]));
      const outcomes: Array<Outcome<{ row: MetaTxnRow; created: boolean }> | undefined> = [];
      const fresh: Array<{ i: number; x: PendingIntake }> = [];
      // The members admitted so far per key and per address: each counts against the next one's share.
      const admitted = new Map<string, number>();
      const judge = (x: PendingIntake) => {
        const c = counts.get(x);
        if (!c || !x.limits) return;
        const { key, address } = sharesOf(x.m);
        const [k, a] = [`${x.m.chainId}:key:${key}`, `${x.m.chainId}:address:${address}`];
        judgeLimits(x.m, c, x.limits, { byKey: admitted.get(k) ?? 0, byAddress: admitted.get(a) ?? 0 });
        if (key != null) admitted.set(k, (admitted.get(k) ?? 0) + 1);
        if (address != null) admitted.set(a, (admitted.get(a) ?? 0) + 1);
      };
      // Each member as it alone would be judged, in order: known first (whatever its share of the queue
      // says now), then its share. A refusal is that member's outcome; the others go on.
      for (const [i, x] of group.entries()) {
        let verdict: { known?: MetaTxnRow; dropped: boolean };
        try {
          verdict = judgeKnown(x.m, found[i]);
          if (!verdict.known) judge(x);
        } catch (error) {
          outcomes[i] = { ok: false, error };
          continue;
        }
        if (verdict.known) {
          outcomes[i] = { ok: true, value: { row: verdict.known, created: false } };
          continue;
        }
        // A DROPPED meta-transaction sent again starts over under the same id.
        if (verdict.dropped) await deleteDropped(tx, x.m.chainId, x.m.id);
        fresh.push({ i, x });
      }
      if (fresh.length > 0) {
        const ms = fresh.map(({ x }) => x.m);
        const rows = await insertRows(tx, ms, opts.notifyQueued?.([...new Set(ms.map((m) => m.chainId))]) ?? []);
        for (const m of ms) await m.also?.(tx);
        await onStatus?.(tx, rows, undefined, { created: true, bundles: new Map(ms.map((m) => [m.id, writtenBundles(m)])) });
        for (const [k, { i, x }] of fresh.entries()) {
          await x.beforeCommit?.(tx, rows[k]);
          outcomes[i] = { ok: true, value: { row: rows[k], created: true } };
        }
        // Every charge of the group in one statement, the last with the COMMIT: it locks all their rules
        // at once, in id order, as one charge locks its own.
        chargeAtCommit(
          tx,
          ms.flatMap((m) => (m.charge ? [m.charge] : [])),
        );
      }
      return outcomes as Outcome<{ row: MetaTxnRow; created: boolean }>[];
    });

  /** One intake alone (a group of one), or again alone when another process accepted the same bundle meanwhile. */
  const insertOne = async (x: PendingIntake): Promise<{ row: MetaTxnRow; created: boolean }> => {
    try {
      const [o] = await insertGroupIn([x]);
      if (o.ok) return o.value;
      throw o.error;
    } catch (err) {
      if ((err as { code?: string }).code !== '23505') throw err;
      // The same bundle accepted by a concurrent send (of other wallets, or in another process): one
      // meta-transaction. Otherwise a nonce that a concurrent send holds now.
      const { known } = judgeKnown(x.m, (await knownOfMany(db, [x.m]))[0]);
      if (known) return { row: known, created: false };
      throw err;
    }
  };

  // Concurrent intakes share a transaction (docs/performance-log.md, "Intakes in groups"): PGlite runs one
  // transaction at a time anyway; on PostgreSQL two run at once, so one group waiting on a lock another
  // process holds does not hold up every intake of this one. Not four: at 32 sends in flight a group then
  // held 3.5 of them, and each group's six round trips cost both sides a write and a wake-up (one `serve`:
  // 2.3 ms of PostgreSQL per intake at four, 1.5-1.8 at two; docs/performance-log.md, "Round trips and
  // signatures"). The second starts once four wait: a process with a share of a fleet's traffic (a third
  // of 32 in flight) otherwise ran groups of two (docs/performance-log.md, "A fleet's CPU").
  const groups = new KeyGroups<PendingIntake, { row: MetaTxnRow; created: boolean }>({
    keys: (x) => groupKeys(x.m),
    one: insertOne,
    many: insertGroupIn,
    ...(opts.groups ?? { size: 32, running: db.kind === 'pglite' ? 1 : 2, more: 4 }),
  });

  return {
    /** A fee-paying one's loss budgets (loss-budget.ts), judged on `q` (its queuing transaction) or, before any write, on the database. */
    judgeLossBudget: (m: Exposed, b: LossBudgets, q?: Queryable) => judgeLossBudget(q ?? db, m, b, q !== undefined),

    /**
     * Inserts the meta-transaction and its bundles atomically. Returns the existing row instead when any
     * of its ids is already known (the same bundle sent twice is one meta-transaction); throws
     * NonceTaken when another live meta-transaction holds one of its nonces. `beforeCommit` runs on the
     * same transaction once the row is written.
     */
    insert(m: NewMetaTxn, limits?: QueueLimits, beforeCommit?: (tx: Tx, row: MetaTxnRow) => Promise<void>): Promise<{ row: MetaTxnRow; created: boolean }> {
      return groups.run({ m, limits, beforeCommit });
    },

    /** How many intakes ran in groups, and how many groups were run again one by one. */
    groupCounts: () => ({ ...groups.counts }),
  };
}
