import { prepared, type Queryable } from '../store/db.ts';
import type { Address } from 'viem';
import { LIVE_IN } from './live.ts';

/*
 * The caller's share of the queue, checked inside the intake transaction (store.ts insert): one
 * fee-paying meta-transaction per paying wallet, nothing else of that wallet meanwhile, and bounded
 * shares per wallet, key and address. Reads only; meta_txns is written by store.ts.
 */

/** What of a new meta-transaction its share of the queue depends on (store.ts NewMetaTxn has it). */
export interface LimitedMetaTxn {
  chainId: number;
  feePayer: Address | null;
  bundles: { wallet: Address }[];
  keyId: number | null;
  clientIp: string | null;
}

/** How much of the queue one caller may hold (live = queued or sent, not mined yet). */
export interface QueueLimits {
  perWallet: number;
  perKey: number;
  perAddress: number;
}

/** The caller already holds as much of the queue as it may. */
export class QueueFull extends Error {}

/**
 * The queue limits' counts of every member of an intake group (or of one) in one statement
 * (readLimitsMany), a row per member in its order: its chain, payer, key and address by member ($1..$5),
 * its wallets as (member, wallet) pairs ($6, $7). Exported so a test can read its plan, which must use the
 * partial indexes over live rows whatever the table's history (migration 0027).
 * - The wallets are looked up one by one (LATERAL): as `= ANY(...)`, a plan made for no values in
 *   particular (what PGlite keeps) read every live row of the chain.
 * - A key's and an address's live rows are counted once per group (kn, an: MATERIALIZED, else inlined
 *   into each member's sub-select), not once per member: a backend's sends share one key, whose count
 *   walks its whole backlog (3.5 members a group, 1 000 queued: 0.59 ms of PostgreSQL per send).
 */
export const GROUP_LIMITS_SQL = prepared(`WITH u AS (
    SELECT * FROM unnest($1::int[], $2::bigint[], $3::text[], $4::bigint[], $5::text[]) AS u(i, chain, payer, key, ip)),
  kn AS MATERIALIZED (
    SELECT k.chain, k.key, (SELECT count(*) FROM meta_txns WHERE chain_id = k.chain AND key_id = k.key AND status IN ${LIVE_IN}) AS n
    FROM (SELECT DISTINCT chain, key FROM u WHERE key IS NOT NULL) k),
  an AS MATERIALIZED (
    SELECT a.chain, a.ip, (SELECT count(*) FROM meta_txns WHERE chain_id = a.chain AND client_ip = a.ip AND status IN ${LIVE_IN}) AS n
    FROM (SELECT DISTINCT chain, ip FROM u WHERE ip IS NOT NULL) a)
  SELECT
    (SELECT id FROM meta_txns WHERE chain_id = u.chain AND u.payer IS NOT NULL AND fee_payer = u.payer AND status IN ${LIVE_IN} LIMIT 1) AS payer_busy,
    (SELECT b.meta_txn_id FROM meta_txn_bundles b WHERE b.chain_id = u.chain AND u.payer IS NOT NULL AND b.wallet = u.payer AND b.live LIMIT 1) AS payer_moved,
    (SELECT m.fee_payer || ' ' || m.id FROM (SELECT x.wallet FROM unnest($6::int[], $7::text[]) AS x(i, wallet) WHERE x.i = u.i) AS w
       CROSS JOIN LATERAL (SELECT fee_payer, id FROM meta_txns WHERE chain_id = u.chain AND fee_payer = w.wallet AND status IN ${LIVE_IN} OFFSET 0) m LIMIT 1) AS wallet_paying,
    (SELECT json_agg(json_build_object('wallet', w.wallet, 'n', t.n)) FROM (SELECT x.wallet FROM unnest($6::int[], $7::text[]) AS x(i, wallet) WHERE x.i = u.i) AS w
       CROSS JOIN LATERAL (SELECT count(DISTINCT b.meta_txn_id) AS n FROM meta_txn_bundles b WHERE b.chain_id = u.chain AND b.wallet = w.wallet AND b.live) t
       WHERE t.n > 0) AS per_wallet,
    COALESCE((SELECT kn.n FROM kn WHERE kn.chain = u.chain AND kn.key = u.key), 0)::text AS by_key,
    COALESCE((SELECT an.n FROM an WHERE an.chain = u.chain AND an.ip = u.ip), 0)::text AS by_ip
  FROM u ORDER BY u.i`);

/** What a meta-transaction's share of the queue is judged on (judgeLimits), as GROUP_LIMITS_SQL counts it. */
export interface LimitCounts {
  payer_busy: string | null;
  payer_moved: string | null;
  wallet_paying: string | null;
  per_wallet: Array<{ wallet: string; n: number }> | null;
  by_key: string;
  by_ip: string;
}

/** The per-address share bounds callers without a key; a keyed backend relaying for many users from one address is bounded by its key's share instead. */
const addressOf = (m: LimitedMetaTxn) => (m.keyId == null ? m.clientIp : null);

/**
 * The counts of many meta-transactions' shares in one statement (an intake group, store.ts), in their
 * order. A wallet's share counts its live bundles (meta_txn_bundles.live follows the status, migration
 * 0020) from their partial index: joined to meta_txns by status, the planner walked every live row of the
 * chain once per bundle of the wallet's history.
 */
export async function readLimitsMany(q: Queryable, ms: readonly LimitedMetaTxn[]): Promise<LimitCounts[]> {
  const wallets = ms.flatMap((m, i) => [...new Set(m.bundles.map((b) => b.wallet.toLowerCase()))].map((w) => [i, w] as const));
  const r = await q.query<LimitCounts>(GROUP_LIMITS_SQL, [
    ms.map((_, i) => i),
    ms.map((m) => m.chainId),
    ms.map((m) => m.feePayer?.toLowerCase() ?? null),
    ms.map((m) => m.keyId),
    ms.map((m) => addressOf(m)),
    wallets.map((w) => w[0]),
    wallets.map((w) => w[1]),
  ]);
  return r.rows;
}

/**
 * Limits checked inside the intake transaction, which holds the advisory lock of every wallet the
 * meta-transaction touches, so concurrent sends of one wallet cannot all pass them: one fee-paying
 * meta-transaction per paying wallet at a time (each is simulated against the chain as it is, so two
 * would both count one balance) and a bounded share of the queue per wallet, exactly. The shares per
 * access key and per client address are counted without a lock (a key's sends would otherwise be serial
 * again): concurrent sends of one key may pass the count together, by at most the number of intake
 * transactions in flight (an intake group counts its own members: `alsoAdmitted`).
 *
 * Throws QueueFull when the counts leave no room, refused in the order below. `alsoAdmitted`: meta-
 * transactions of the same key and address admitted since the counts were read, which they cannot see
 * (an intake group's earlier members, store.ts).
 */
export function judgeLimits(m: LimitedMetaTxn, x: LimitCounts, limits: QueueLimits, alsoAdmitted = { byKey: 0, byAddress: 0 }) {
  const perAddressIp = addressOf(m);
  if (x.payer_busy) {
    throw new QueueFull(`wallet ${m.feePayer} already has a fee-paying meta-transaction in flight (${x.payer_busy}); one balance pays one fee at a time: send the next once it is mined`);
  }
  // The fee of a live fee-paying meta-transaction was judged on its wallet's balance as it was: any other
  // bundle of that wallet (sponsored, another nonce space, a successor) could move that balance before it
  // runs, and the relayer would pay for a bundle whose fee no longer arrives. Both orders are refused.
  if (x.payer_moved) {
    throw new QueueFull(
      `wallet ${m.feePayer} has another meta-transaction in flight (${x.payer_moved}) that runs a bundle of it; a fee-paying meta-transaction waits until it is mined, so nothing can move the balance its fee was judged on`,
    );
  }
  if (x.wallet_paying) {
    const [payer, id] = x.wallet_paying.split(' ');
    throw new QueueFull(`wallet ${payer} has a fee-paying meta-transaction in flight (${id}); one balance pays one fee at a time, and no other bundle of the wallet is relayed until it is mined`);
  }
  const full = (x.per_wallet ?? []).find((w) => Number(w.n) >= limits.perWallet);
  if (full) throw new QueueFull(`wallet ${full.wallet} already has ${full.n} meta-transactions queued or in flight (the limit is ${limits.perWallet})`);
  if (m.keyId != null && Number(x.by_key) + alsoAdmitted.byKey >= limits.perKey) {
    throw new QueueFull(`this access key already has ${limits.perKey} meta-transactions queued or in flight`);
  }
  if (perAddressIp != null && Number(x.by_ip) + alsoAdmitted.byAddress >= limits.perAddress) {
    throw new QueueFull(`client address ${m.clientIp} already has ${limits.perAddress} meta-transactions queued or in flight`);
  }
}

/** The key and the address whose shares judgeLimits counts for `m` (null: that share does not apply). */
export function sharesOf(m: LimitedMetaTxn): { key: number | null; address: string | null } {
  return { key: m.keyId, address: addressOf(m) };
}
