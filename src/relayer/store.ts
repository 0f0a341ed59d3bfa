import type { Address } from 'viem';
import { prepared, type Db, type Queryable, type Tx } from '../store/db.ts';
import { KeyGroups, type Outcome } from '../util/key-groups.ts';
import { LIVE_IN } from './live.ts';
import { clientLock, judgeLossBudget, type Exposed, type LossBudgets } from './loss-budget.ts';
import { judgeLimits, readLimitsMany, sharesOf, type QueueLimits } from './queue-limits.ts';
import { NonceTaken, normalise, type BundleRow, type MetaTxnRow, type NewMetaTxn, type SentMeta, type SettledMeta, type StatusCause, type StatusHook } from './meta-txn-rows.ts';

export { LIVE_IN, LIVE_STATUSES } from './live.ts';
export { QueueFull, type QueueLimits } from './queue-limits.ts';

export * from './meta-txn-rows.ts';

/** Not claimed by another process than the one in parameter $3 (or its claim ran out). */
const CLAIMABLE_BY_3 = '(claimed_until IS NULL OR claimed_until < now() OR claimed_by = $3)';

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

/** The rows and bundles of an intake group in one statement (insertGroupIn). */
const GROUP_INSERT_SQL = prepared(`WITH mt AS (
   INSERT INTO meta_txns (chain_id, id, project_id, wallet, entrypoint, input, status, gas_limit, gas_estimated, sponsored, sponsor_id, fee_token, fee_value,
     fee_payer, key_id, client_ip, "authorization", gas_price_priced, cover_wei, exposure_wei, client_net, fee_final)
   SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::bigint[], $10::boolean[],
     $11::bigint[], $12::text[], $13::numeric[], $14::text[], $15::bigint[], $16::text[], $17::text[], $18::numeric[], $19::numeric[], $26::numeric[], $27::text[], $28::boolean[])
   RETURNING *),
 b AS (
   INSERT INTO meta_txn_bundles (chain_id, bundle_id, meta_txn_id, wallet, nonce_space, nonce)
   SELECT * FROM unnest($20::bigint[], $21::text[], $22::text[], $23::text[], $24::numeric[], $25::numeric[])
   ON CONFLICT (chain_id, bundle_id) DO UPDATE SET meta_txn_id = EXCLUDED.meta_txn_id, wallet = EXCLUDED.wallet,
     nonce_space = EXCLUDED.nonce_space, nonce = EXCLUDED.nonce, live = TRUE)
 SELECT * FROM mt`);

/** One intake waiting for its group: what insert was given. */
interface PendingIntake {
  m: NewMetaTxn;
  limits?: QueueLimits;
  beforeCommit?: (tx: Tx, row: MetaTxnRow) => Promise<void>;
}

/** One bundle id once (a call may carry the same bundle twice; one upsert cannot touch a row twice). */
const distinctBundles = (m: NewMetaTxn) => [...new Map(m.bundles.map((b) => [b.id, b])).values()];

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

/** The row each asked id is ($3, of chain $2, asked as $1), by its own id or the id of a bundle inside it: at most one each. */
export const FIND_MANY_SQL = prepared(`SELECT u.i AS asked, m.* FROM unnest($1::int[], $2::bigint[], $3::text[]) AS u(i, chain, id)
   CROSS JOIN LATERAL (
     SELECT * FROM meta_txns y WHERE y.chain_id = u.chain AND y.id = u.id
     UNION ALL
     SELECT z.* FROM meta_txn_bundles b JOIN meta_txns z ON z.chain_id = b.chain_id AND z.id = b.meta_txn_id
      WHERE b.chain_id = u.chain AND b.bundle_id = u.id AND b.meta_txn_id <> u.id
     LIMIT 1) m`);

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

export function metaTxnRepo(
  db: Db,
  opts: {
    onStatus?: StatusHook;
    /** Makes the charges (NewMetaTxn.charge) of the meta-transactions a transaction writes, with its COMMIT. */
    chargeAtCommit?: (tx: Tx, charges: unknown[]) => void;
    groups?: { size: number; running: number; more?: number };
  } = {},
) {
  const onStatus = opts.onStatus;
  const chargeAtCommit = (tx: Tx, charges: unknown[]) => {
    if (charges.length === 0) return;
    // A charge never goes unmade: a repository without the hook refuses a charged meta-transaction.
    if (!opts.chargeAtCommit) throw new Error('a sponsored meta-transaction with a charge, and no chargeAtCommit to make it');
    opts.chargeAtCommit(tx, charges);
  };
  /** The row each (chain, id) is, by its own id or a bundle's, in one statement, one asked or many. */
  const findMany = async (asked: ReadonlyArray<{ chainId: number; id: string }>): Promise<Array<MetaTxnRow | undefined>> => {
    const r = await db.query<Record<string, unknown> & { asked: number }>(FIND_MANY_SQL, [asked.map((_, i) => i), asked.map((x) => x.chainId), asked.map((x) => x.id)]);
    const out: Array<MetaTxnRow | undefined> = asked.map(() => undefined);
    for (const { asked: i, ...row } of r.rows) out[Number(i)] = normalise(row);
    return out;
  };
  // Look-ups of many callers at once (every SendMetaTxn asks first, and every GetMetaTxnReceipt poll): one
  // runs at once when none is under way, those asked meanwhile go together in the next statement. Each
  // is answered by a read begun after it was asked.
  const finds = new KeyGroups<{ chainId: number; id: string }, MetaTxnRow | undefined, never>({
    keys: () => [],
    one: async (x) => (await findMany([x]))[0],
    many: async (asked) => (await findMany(asked)).map((value) => ({ ok: true, value })),
    size: 64,
    running: db.kind === 'pglite' ? 1 : 2,
  });

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
        if (verdict.dropped) {
          await tx.query('DELETE FROM meta_txn_bundles WHERE chain_id = $1 AND meta_txn_id = $2', [x.m.chainId, x.m.id]);
          await tx.query('DELETE FROM meta_txns WHERE chain_id = $1 AND id = $2', [x.m.chainId, x.m.id]);
        }
        fresh.push({ i, x });
      }
      if (fresh.length > 0) {
        const ms = fresh.map(({ x }) => x.m);
        const col = <V>(f: (m: NewMetaTxn) => V) => ms.map(f);
        const bundles = ms.flatMap((m) => distinctBundles(m).map((b) => ({ m, b })));
        const r = await tx.query<Record<string, unknown>>(GROUP_INSERT_SQL, [
          col((m) => m.chainId),
          col((m) => m.id),
          col((m) => m.projectId),
          col((m) => m.wallet),
          col((m) => m.entrypoint),
          col((m) => m.input),
          col((m) => m.status ?? 'QUEUED'),
          col((m) => m.gasLimit.toString()),
          col((m) => m.gasEstimated.toString()),
          col((m) => m.sponsored),
          col((m) => m.sponsorId),
          col((m) => m.feeToken),
          col((m) => m.feeValue?.toString() ?? null),
          col((m) => m.feePayer?.toLowerCase() ?? null),
          col((m) => m.keyId),
          col((m) => m.clientIp),
          col((m) => (m.authorization ? JSON.stringify(m.authorization) : null)),
          col((m) => m.gasPricePriced?.toString() ?? null),
          col((m) => m.coverWei?.toString() ?? null),
          bundles.map(({ m }) => m.chainId),
          bundles.map(({ b }) => b.id),
          bundles.map(({ m }) => m.id),
          bundles.map(({ b }) => b.wallet),
          bundles.map(({ b }) => b.space.toString()),
          bundles.map(({ b }) => b.nonce.toString()),
          col((m) => m.exposureWei?.toString() ?? null),
          col((m) => m.clientNet ?? null),
          col((m) => m.feeFinal ?? null),
        ]);
        const byId = new Map(r.rows.map((x) => [`${x.chain_id}:${x.id}`, normalise(x)]));
        const rows = ms.map((m) => byId.get(`${m.chainId}:${m.id}`)!);
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

  /** The bundles of many meta-transactions at once, by meta-transaction id. */
  const bundlesOfMany = async (chainId: number, ids: string[], q: Queryable = db): Promise<Map<string, BundleRow[]>> => {
    const out = new Map<string, BundleRow[]>(ids.map((id) => [id, []]));
    if (ids.length === 0) return out;
    const r = await q.query<BundleRow>(
      prepared('SELECT bundle_id, meta_txn_id, wallet, nonce_space::text AS nonce_space, nonce::text AS nonce FROM meta_txn_bundles WHERE chain_id = $1 AND meta_txn_id = ANY($2) ORDER BY bundle_id'),
      [chainId, ids],
    );
    for (const b of r.rows) out.get(b.meta_txn_id)?.push(b);
    return out;
  };

  return {
    /** A fee-paying one's loss budgets (loss-budget.ts), judged on `q` (its queuing transaction) or, before any write, on the database. */
    judgeLossBudget: (m: Exposed, b: LossBudgets, q?: Queryable) => judgeLossBudget(q ?? db, m, b, q !== undefined),

    /** By its own id or the id of any wallet bundle inside it. */
    find: (chainId: number, id: string) => finds.run({ chainId, id }),

    bundlesOfMany,

    async bundlesOf(chainId: number, metaTxnId: string): Promise<BundleRow[]> {
      return (await bundlesOfMany(chainId, [metaTxnId])).get(metaTxnId)!;
    },

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

    /** Nonces of live meta-transactions for one wallet and space at or above `from`, ascending. */
    async liveNonces(chainId: number, wallet: Address, space: bigint, from: bigint): Promise<bigint[]> {
      const r = await db.query<{ nonce: string }>(
        `SELECT b.nonce::text AS nonce FROM meta_txn_bundles b JOIN meta_txns m ON m.chain_id = b.chain_id AND m.id = b.meta_txn_id
         WHERE b.chain_id = $1 AND b.wallet = $2 AND b.nonce_space = $3 AND b.nonce >= $4 AND m.status IN ${LIVE_IN}
         ORDER BY b.nonce`,
        [chainId, wallet.toLowerCase(), space.toString(), from.toString()],
      );
      return r.rows.map((x) => BigInt(x.nonce));
    },

    /** Live holders of many (wallet, space, nonce) at once, keyed `wallet:space:nonce`. */
    async holdersOf(chainId: number, keys: { wallet: string; space: string; nonce: string }[]): Promise<Map<string, MetaTxnRow>> {
      const out = new Map<string, MetaTxnRow>();
      if (keys.length === 0) return out;
      const r = await db.query<Record<string, unknown> & { k: string }>(
        `SELECT b.wallet || ':' || b.nonce_space::text || ':' || b.nonce::text AS k, m.*
         FROM unnest($2::text[], $3::numeric[], $4::numeric[]) AS q(wallet, space, nonce)
         JOIN meta_txn_bundles b ON b.chain_id = $1 AND b.wallet = q.wallet AND b.nonce_space = q.space AND b.nonce = q.nonce
         JOIN meta_txns m ON m.chain_id = b.chain_id AND m.id = b.meta_txn_id
         WHERE m.status IN ${LIVE_IN}`,
        [chainId, keys.map((k) => k.wallet), keys.map((k) => k.space), keys.map((k) => k.nonce)],
      );
      for (const row of r.rows) {
        const { k, ...rest } = row;
        out.set(k, normalise(rest));
      }
      return out;
    },

    /** Meta-transactions carried by the given sender slots (several per slot when batched). */
    /** The meta-transactions of these slots are final (past the confirmation depth). */
    async confirmAtSlots(q: Queryable, chainId: number, slots: { sender: string; nonce: number }[]) {
      await q.query(
        `UPDATE meta_txns m SET confirmed = true, updated_at = now() FROM unnest($2::text[], $3::bigint[]) AS u(sender, nonce)
         WHERE m.chain_id = $1 AND m.sender = u.sender AND m.txn_nonce = u.nonce`,
        [chainId, slots.map((x) => x.sender), slots.map((x) => x.nonce)],
      );
    },

    /** The covers of the meta-transactions a slot carries (engine/cover-ceiling.ts bounds its replacements by them). */
    async coversAtSlot(chainId: number, sender: string, nonce: number): Promise<Pick<MetaTxnRow, 'cover_wei' | 'exposure_wei' | 'fee_final'>[]> {
      const q = prepared(
        `SELECT cover_wei::text AS cover_wei, exposure_wei::text AS exposure_wei, fee_final FROM meta_txns WHERE chain_id = $1 AND sender = $2 AND txn_nonce = $3 AND status = 'SENT'`,
      );
      return (await db.query<{ cover_wei: string | null; exposure_wei: string | null; fee_final: boolean | null }>(q, [chainId, sender, nonce])).rows;
    },

    /** Why the meta-transactions of a slot cannot be replaced now (the fee cap), as RuntimeStatus shows them. */
    async setStalledAtSlot(chainId: number, sender: string, nonce: number, reason: string) {
      await db.query('UPDATE meta_txns SET stalled = $4, updated_at = now() WHERE chain_id = $1 AND sender = $2 AND txn_nonce = $3 AND stalled IS DISTINCT FROM $4', [chainId, sender, nonce, reason]);
    },

    /**
     * Locks these meta-transactions for signing; the ids of those still QUEUED. One another transaction
     * holds is skipped, not waited for (SKIP LOCKED): it is being signed or written elsewhere, and if
     * not, the next pass takes it; a frozen holder (a process stopped mid-transaction) would otherwise
     * stall every dispatcher that planned it until lock_timeout, pass after pass (issue #53).
     */
    async lockQueued(tx: Tx, chainId: number, ids: string[]): Promise<Set<string>> {
      const r = await tx.query<{ id: string }>(`SELECT id FROM meta_txns WHERE chain_id = $1 AND id = ANY($2) AND status = 'QUEUED' ORDER BY id FOR UPDATE SKIP LOCKED`, [chainId, ids]);
      return new Set(r.rows.map((x) => x.id));
    },

    async atSlots(q: Queryable, chainId: number, slots: { sender: string; nonce: number }[]): Promise<MetaTxnRow[]> {
      if (slots.length === 0) return [];
      const r = await q.query<Record<string, unknown>>(
        `SELECT m.* FROM meta_txns m JOIN unnest($2::text[], $3::bigint[]) AS u(sender, nonce) ON m.sender = u.sender AND m.txn_nonce = u.nonce
         WHERE m.chain_id = $1 AND m.status <> 'QUEUED' ORDER BY m.batch_index NULLS FIRST, m.id`,
        [chainId, slots.map((x) => x.sender), slots.map((x) => x.nonce)],
      );
      return r.rows.map(normalise);
    },

    /** Sets many meta-transactions from their receipts in one statement. */
    async settleMany(q: Queryable, chainId: number, items: SettledMeta[]) {
      if (items.length === 0) return;
      const col = <K extends keyof SettledMeta>(k: K) => items.map((x) => x[k]);
      const r = await q.query<Record<string, unknown>>(
        `UPDATE meta_txns m SET status = u.status, revert_reason = u.reason, txn_hash = u.hash, block_number = u.block, gas_used = u.gas_used,
           gas_price = u.gas_price, receipt = u.receipt, confirmed = u.confirmed, fee_received = u.fee_received, shortfall_wei = u.shortfall_wei,
           l1_fee_wei = u.l1_fee_wei, mined_at = now(), stalled = NULL, updated_at = now()
         FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::numeric[], $8::numeric[], $9::text[], $10::boolean[], $11::numeric[], $12::numeric[], $13::numeric[])
           AS u(id, status, reason, hash, block, gas_used, gas_price, receipt, confirmed, fee_received, shortfall_wei, l1_fee_wei)
         WHERE m.chain_id = $1 AND m.id = u.id RETURNING m.*`,
        [
          chainId,
          col('id'),
          col('status'),
          col('reason'),
          col('hash'),
          col('block'),
          col('gasUsed'),
          col('gasPrice'),
          col('receipt'),
          col('confirmed'),
          col('feeReceived'),
          col('shortfallWei'),
          col('l1FeeWei'),
        ],
      );
      await onStatus?.(q, r.rows.map(normalise));
    },

    /** Meta-transactions waiting to be sent and sent but not mined (the queue gauge, RuntimeStatus, the console). */
    async depth(chainId: number): Promise<{ queued: number; sent: number }> {
      const r = await db.query<{ status: string; n: string }>(`SELECT status, count(*)::text AS n FROM meta_txns WHERE chain_id = $1 AND status IN ('QUEUED', 'SENT') GROUP BY status`, [chainId]);
      const n = (status: string) => Number(r.rows.find((x) => x.status === status)?.n ?? 0);
      return { queued: n('QUEUED'), sent: n('SENT') };
    },

    /** Queued meta-transactions due now, leaving out those another process has claimed. */
    async queued(chainId: number, limit: number, owner = ''): Promise<MetaTxnRow[]> {
      const r = await db.query<Record<string, unknown>>(
        `SELECT * FROM meta_txns WHERE chain_id = $1 AND status = 'QUEUED' AND next_attempt_at <= now() AND ${CLAIMABLE_BY_3}
         ORDER BY queued_at, id LIMIT $2`,
        [chainId, limit, owner],
      );
      return r.rows.map(normalise);
    },

    /** Puts queued meta-transactions out of the dispatcher's reads for `ms` (they wait on a predecessor). */
    async defer(chainId: number, ids: string[], ms: number) {
      if (ids.length === 0) return;
      await db.query(`UPDATE meta_txns SET next_attempt_at = now() + make_interval(secs => $3) WHERE chain_id = $1 AND id = ANY($2) AND status = 'QUEUED'`, [chainId, ids, ms / 1000]);
    },

    /** Claims queued meta-transactions for `owner` for `seconds`; returns the ids it got. */
    async claim(chainId: number, ids: string[], owner: string, seconds: number): Promise<Set<string>> {
      if (ids.length === 0) return new Set();
      const r = await db.query<{ id: string }>(
        `UPDATE meta_txns SET claimed_by = $3, claimed_until = now() + make_interval(secs => $4)
         WHERE chain_id = $1 AND id = ANY($2) AND status = 'QUEUED' AND ${CLAIMABLE_BY_3}
         RETURNING id`,
        [chainId, ids, owner, seconds],
      );
      return new Set(r.rows.map((x) => x.id));
    },

    /** A project's meta-transactions, newest first; `sponsoredOnly`: those a sponsorship paid for. */
    async byProject(projectId: number, chainId: number, offset: number, limit: number, statuses?: string[], sponsoredOnly = false): Promise<MetaTxnRow[]> {
      const r = await db.query<Record<string, unknown>>(
        `SELECT * FROM meta_txns WHERE project_id = $1 AND chain_id = $2 AND ($5::text[] IS NULL OR status = ANY($5)) AND (NOT $6::boolean OR sponsored)
         ORDER BY queued_at DESC, id OFFSET $3 LIMIT $4`,
        [projectId, chainId, offset, limit, statuses ?? null, sponsoredOnly],
      );
      return r.rows.map(normalise);
    },

    /**
     * The meta-transaction each of these chain transactions carried (the indexer's Transaction.metaTxnID):
     * a batch carries several, and names the first queued. Hashes as the chain gives them (lower case).
     */
    async idsByTxnHash(chainId: number, hashes: string[]): Promise<Map<string, string>> {
      if (!hashes.length) return new Map();
      const r = await db.query<{ txn_hash: string; id: string }>(
        `SELECT DISTINCT ON (txn_hash) txn_hash, id FROM meta_txns WHERE chain_id = $1 AND txn_hash = ANY($2::text[]) ORDER BY txn_hash, queued_at, id`,
        [chainId, hashes],
      );
      return new Map(r.rows.map((x) => [x.txn_hash, x.id]));
    },

    /** The chain transactions that carried these meta-transactions (ids or bundle ids, bare), where one was sent. */
    async txnHashesOf(chainId: number, ids: string[]): Promise<string[]> {
      const r = await db.query<{ txn_hash: string }>(
        `SELECT DISTINCT txn_hash FROM meta_txns WHERE chain_id = $1 AND txn_hash IS NOT NULL
            AND (id = ANY($2::text[]) OR id IN (SELECT meta_txn_id FROM meta_txn_bundles WHERE chain_id = $1 AND bundle_id = ANY($2::text[])))`,
        [chainId, ids],
      );
      return r.rows.map((x) => x.txn_hash);
    },

    /** Patches one meta-transaction; with `from`, only while its status is still that. Says whether it changed. */
    async setStatus(
      q: Queryable,
      chainId: number,
      id: string,
      patch: Partial<Pick<MetaTxnRow, 'status' | 'revert_reason'>> & Record<string, unknown>,
      from?: string,
      cause?: StatusCause,
    ): Promise<boolean> {
      const hook = patch.status !== undefined ? onStatus : undefined;
      // Called on the database itself: the change and its event still go in one transaction.
      if (hook && 'transaction' in q) return db.transaction((tx) => this.setStatus(tx, chainId, id, patch, from, cause));
      const keys = Object.keys(patch);
      const sets = keys.map((k, i) => `${k} = $${i + 4}`).join(', ');
      const r = await q.query<Record<string, unknown>>(`UPDATE meta_txns SET ${sets}, updated_at = now() WHERE chain_id = $1 AND id = $2 AND ($3::text IS NULL OR status = $3) RETURNING *`, [
        chainId,
        id,
        from ?? null,
        ...keys.map((k) => patch[k]),
      ]);
      if (hook && r.rows.length) await hook(q, r.rows.map(normalise), cause);
      return r.rows.length > 0;
    },

    /**
     * QUEUED meta-transactions signed into their senders' slots, marked SENT in one statement on the
     * caller's transaction (which holds their row locks: lockQueued), and announced in one hook call.
     */
    async markSent(q: Queryable, chainId: number, sent: readonly SentMeta[], at: Date): Promise<void> {
      if (sent.length === 0) return;
      const r = await q.query<Record<string, unknown>>(
        prepared(`UPDATE meta_txns m SET status = 'SENT', sender = u.sender, txn_nonce = u.nonce, txn_hash = u.hash, batch_index = u.batch_index,
           gas_limit = u.gas_limit, sent_at = $8, stalled = NULL, updated_at = now()
         FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::int[], $7::bigint[]) AS u(id, sender, nonce, hash, batch_index, gas_limit)
         WHERE m.chain_id = $1 AND m.id = u.id RETURNING m.*`),
        [chainId, sent.map((x) => x.id), sent.map((x) => x.sender), sent.map((x) => x.nonce), sent.map((x) => x.hash), sent.map((x) => x.batchIndex), sent.map((x) => x.gasLimit), at],
      );
      // Every one is this transaction's to mark (locked QUEUED): one missing rolls the signing back.
      if (r.rows.length !== sent.length) throw new Error(`markSent: ${sent.length - r.rows.length} of ${sent.length} meta-transactions not found`);
      // In the order they were signed (slot, then place in the batch): their events are written in it.
      const order = new Map(sent.map((x, i) => [x.id, i]));
      const rows = r.rows.map(normalise).sort((a, b) => order.get(a.id)! - order.get(b.id)!);
      if (onStatus && rows.length) await onStatus(q, rows, undefined, { before: 'QUEUED' });
    },

    /** Points the meta-transactions of a sender's slot at another attempt's hash (a replacement, or back after one was refused), announcing it. */
    async setSlotHash(q: Queryable, chainId: number, sender: string, nonce: number, hash: string, cause: StatusCause, clearStalled = false): Promise<void> {
      const r = await q.query<Record<string, unknown>>(
        `UPDATE meta_txns SET txn_hash = $4, stalled = CASE WHEN $5 THEN NULL ELSE stalled END, updated_at = now()
         WHERE chain_id = $1 AND sender = $2 AND txn_nonce = $3 AND status = 'SENT' AND txn_hash IS DISTINCT FROM $4 RETURNING *`,
        [chainId, sender, nonce, hash, clearStalled],
      );
      if (onStatus && r.rows.length) await onStatus(q, r.rows.map(normalise), cause);
    },
  };
}
export type MetaTxnRepo = ReturnType<typeof metaTxnRepo>;

/**
 * The meta-transactions a prune may delete (relayer/prune.ts), as a subquery of (chain_id, id, sender,
 * txn_nonce) with the cutoff in $1: final, last changed before the cutoff, confirmed when mined (a reorg
 * within the confirmations may still reopen it), no attempt still open at its slot, and every
 * meta-transaction queued in the same project and UTC hour prunable too (the usage roll-up recounts an
 * hour whole from meta_txns when one of its rows changes: relayer/usage.ts).
 */
export const PRUNABLE_META_SQL = `SELECT m.chain_id, m.id, m.sender, m.txn_nonce, m.updated_at FROM meta_txns m
  WHERE m.status IN ('SUCCEEDED', 'PARTIALLY_FAILED', 'FAILED', 'DROPPED') AND m.updated_at < $1 AND (m.confirmed OR m.block_number IS NULL)
    AND NOT EXISTS (SELECT 1 FROM relay_txs t WHERE t.chain_id = m.chain_id AND t.sender = m.sender AND t.nonce = m.txn_nonce AND t.status IN ('PENDING', 'MINED'))
    AND NOT EXISTS (SELECT 1 FROM meta_txns o WHERE o.project_id = m.project_id AND o.chain_id = m.chain_id
      AND o.queued_at >= to_timestamp(floor(extract(epoch FROM m.queued_at) / 3600) * 3600) AND o.queued_at < to_timestamp(floor(extract(epoch FROM m.queued_at) / 3600) * 3600 + 3600)
      AND (o.status NOT IN ('SUCCEEDED', 'PARTIALLY_FAILED', 'FAILED', 'DROPPED') OR o.updated_at >= $1))`;

/** Up to `limit` prunable meta-transactions, oldest change first, locked for the caller's transaction (rows another holds are passed over). */
export async function claimPrunable(tx: Queryable, cutoff: Date, limit: number): Promise<Array<{ chain_id: number; id: string }>> {
  const r = await tx.query<{ chain_id: number | string; id: string }>(
    `SELECT chain_id, id FROM meta_txns WHERE (chain_id, id) IN (SELECT p.chain_id, p.id FROM (${PRUNABLE_META_SQL}) p ORDER BY p.updated_at LIMIT $2)
      FOR UPDATE SKIP LOCKED`,
    [cutoff, limit],
  );
  return r.rows.map((x) => ({ chain_id: Number(x.chain_id), id: x.id }));
}

/** Deletes these meta-transactions and their bundles (a prune's batch, whose other rows went first). */
export async function deleteMetaTxns(tx: Queryable, chainIds: number[], ids: string[]): Promise<{ metaTxns: number; bundles: number }> {
  const pairs = 'SELECT * FROM unnest($1::bigint[], $2::text[]) AS u(chain_id, id)';
  const b = await tx.query(`DELETE FROM meta_txn_bundles WHERE (chain_id, meta_txn_id) IN (${pairs})`, [chainIds, ids]);
  const m = await tx.query(`DELETE FROM meta_txns WHERE (chain_id, id) IN (${pairs})`, [chainIds, ids]);
  return { metaTxns: m.rowCount, bundles: b.rowCount };
}

/** How many meta-transactions and bundles a prune at `cutoff` would delete (--dry-run). */
export async function countPrunable(q: Queryable, cutoff: Date): Promise<{ metaTxns: number; bundles: number }> {
  const r = await q.query<{ m: string; b: string }>(
    `WITH p AS (${PRUNABLE_META_SQL})
     SELECT (SELECT count(*) FROM p)::text AS m, (SELECT count(*) FROM meta_txn_bundles b JOIN p ON b.chain_id = p.chain_id AND b.meta_txn_id = p.id)::text AS b`,
    [cutoff],
  );
  return { metaTxns: Number(r.rows[0]!.m), bundles: Number(r.rows[0]!.b) };
}
