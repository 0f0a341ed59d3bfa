import { formatEther } from 'viem';
import { prepared, type Queryable } from '../store/db.ts';
import { LIVE_IN } from './live.ts';
import { clientNetwork } from '../util/client-net.ts';

/*
 * The loss budgets (docs/relayer-worst-case.md): what fee-paying callers whose fee is not final by
 * construction can cost the relayer. A fee the bundle can undo is not a fee — the bundle can revert when
 * mined and take it back — so each such meta-transaction counts its exposure (the most any attempt of it
 * may be signed for: its fee's worth, engine/cover-ceiling.ts) while it is live, and what it cost without
 * its fee for an hour after it was mined. A new one is admitted only while every budget it counts against
 * (its wallet, its client network, its key's share of that network, its key, and keyless callers
 * together) has room for it, and a caller whose fee never arrived yet has at most one in flight whose
 * fee is not final. A final fee (intake/finality.ts) counts only what comes before the fee transfer.
 *
 * Judged in the transaction that queues the row (after its insert, so the sums include it), under the
 * wallet's and the client network's advisory locks: two intakes of one caller take turns. The key and
 * keyless budgets are summed without a lock of their own (one lock per key would make every intake of a
 * busy dapp wait on one), so concurrent intake transactions of different clients may each see the other's
 * row not yet committed: those two budgets may be passed by what the intake transactions in flight at once
 * carry (two per process on PostgreSQL, one on PGlite).
 */

export interface LossBudgets {
  perWalletGas: bigint;
  perClientGas: bigint;
  perKeyClientGas: bigint;
  perKeyGas: bigint;
  keylessGas: bigint;
  ipv4Prefix: number;
  ipv6Prefix: number;
  keyBarAfterNetworks: number;
}

export function lossBudgets(c: {
  perWalletGas: number;
  perClientGas: number;
  perKeyClientGas: number;
  perKeyGas: number;
  keylessGas: number;
  ipv4Prefix: number;
  ipv6Prefix: number;
  keyBarAfterNetworks: number;
}): LossBudgets {
  return {
    ...c,
    perWalletGas: BigInt(c.perWalletGas),
    perClientGas: BigInt(c.perClientGas),
    perKeyClientGas: BigInt(c.perKeyClientGas),
    perKeyGas: BigInt(c.perKeyGas),
    keylessGas: BigInt(c.keylessGas),
  };
}

/** The client network of a caller's address (util/client-net.ts), by the loss budgets' prefixes. */
export function clientNet(ip: string | null | undefined, b: Pick<LossBudgets, 'ipv4Prefix' | 'ipv6Prefix'>): string | null {
  return clientNetwork(ip, b);
}

/** The advisory lock (namespace, key) of a client network on a chain: intakes of one caller take turns on it. */
export function clientLock(chainId: number, net: string): [number, number] {
  let h = 0;
  for (const ch of `${chainId}:${net}`) h = (Math.imul(h, 31) + ch.charCodeAt(0)) | 0;
  // Wallet locks use the chain id as namespace (store.ts); client networks a namespace of their own.
  return [-1 - (chainId % 1_000_000_000), h];
}

export class LossBudgetFull extends Error {}

/**
 * What a settled meta-transaction cost beyond the fee that arrived (0 when paid): the gas it burnt (and its
 * L1 fee) less the worth of what arrived, or a gas shortfall recorded at settlement.
 */
const LOSS_SQL = `CASE WHEN fee_received IS NOT NULL AND fee_value > 0 AND fee_received < fee_value
   THEN GREATEST(0, COALESCE(gas_used, 0) * COALESCE(gas_price, 0) + COALESCE(l1_fee_wei, 0) - div(COALESCE(cover_wei, 0) * fee_received, fee_value))
   ELSE COALESCE(shortfall_wei, 0) END`;

const SUMS_SQL = prepared(`SELECT
   COALESCE(SUM(x.w) FILTER (WHERE x.fee_payer = $2), 0)::numeric(78, 0)::text AS wallet_wei,
   COALESCE(SUM(x.w) FILTER (WHERE x.client_net = $3), 0)::numeric(78, 0)::text AS client_wei,
   COALESCE(SUM(x.w) FILTER (WHERE x.client_net = $3 AND x.key_id IS NOT DISTINCT FROM $4::bigint), 0)::numeric(78, 0)::text AS key_client_wei,
   COALESCE(SUM(x.w) FILTER (WHERE x.key_id IS NOT DISTINCT FROM $4::bigint), 0)::numeric(78, 0)::text AS key_wei,
   COUNT(*) FILTER (WHERE x.live AND x.fee_final IS NOT TRUE AND x.id <> $5 AND x.client_net = $3 AND x.key_id IS NOT DISTINCT FROM $4::bigint)::int AS others_live,
   EXISTS (SELECT 1 FROM meta_txns p WHERE p.chain_id = $1 AND p.client_net = $3 AND p.key_id IS NOT DISTINCT FROM $4::bigint
     AND p.fee_value > 0 AND p.fee_received >= p.fee_value) AS proven
 FROM (
   SELECT id, fee_payer, client_net, key_id, fee_final, status IN ${LIVE_IN} AS live,
     CASE WHEN status IN ${LIVE_IN} THEN exposure_wei ELSE ${LOSS_SQL} END AS w
   FROM meta_txns
   WHERE chain_id = $1 AND exposure_wei IS NOT NULL
     AND (status IN ${LIVE_IN} OR updated_at > now() - interval '1 hour')
     AND (fee_payer = $2 OR client_net = $3 OR key_id IS NOT DISTINCT FROM $4::bigint)
 ) x`);

export interface Exposed {
  chainId: number;
  id: string;
  feePayer: string | null;
  keyId: number | null;
  clientNet: string | null;
  exposureWei: bigint;
  /** Its fee is final by construction (only what comes before the fee is exposed): not held to one at a time. */
  final: boolean;
  /** The gas price the budgets (in gas) are worth now. */
  gasPrice: bigint;
}

const eth = (wei: bigint) => `${formatEther(wei)} ETH`;

/**
 * Refuses (LossBudgetFull) a meta-transaction whose exposure passes a budget it counts against. `q` is the
 * transaction that queued it (so its own row is counted), or the database for a look before any write
 * (FeeOptions: then `m.id` is not stored and its exposure is added here).
 */
export async function judgeLossBudget(q: Queryable, m: Exposed, b: LossBudgets, stored: boolean): Promise<void> {
  const r = await q.query<{ wallet_wei: string; client_wei: string; key_client_wei: string; key_wei: string; others_live: number; proven: boolean }>(SUMS_SQL, [
    m.chainId,
    m.feePayer?.toLowerCase() ?? null,
    m.clientNet,
    m.keyId,
    m.id,
  ]);
  const s = r.rows[0];
  const add = stored ? 0n : m.exposureWei;
  const who = m.keyId == null ? 'callers without an access key' : 'this access key';
  if (!m.final && !s.proven && s.others_live > 0) {
    throw new LossBudgetFull(
      `client ${m.clientNet ?? 'unknown'} already has a fee-paying meta-transaction in flight whose fee the bundle could undo, and no fee of its has arrived yet: one at a time until one does (or make the fee final: put it first; docs/relayer-worst-case.md)`,
    );
  }
  const g = m.gasPrice > 0n ? m.gasPrice : 1n;
  const checks: Array<[string, bigint, bigint]> = [
    [`wallet ${m.feePayer}`, BigInt(s.wallet_wei) + add, b.perWalletGas * g],
    [`client ${m.clientNet}`, BigInt(s.client_wei) + add, b.perClientGas * g],
    [`client ${m.clientNet} with ${who}`, BigInt(s.key_client_wei) + add, b.perKeyClientGas * g],
    [who, BigInt(s.key_wei) + add, (m.keyId == null ? b.keylessGas : b.perKeyGas) * g],
  ];
  for (const [subject, used, limit] of checks) {
    if (used > limit) {
      throw new LossBudgetFull(
        `the relayer's loss budget for ${subject} is full: fee-paying meta-transactions whose fee is not final (in flight, or mined without their fee in the last hour) stand at ${eth(used)} with this one, over ${eth(limit)} (${limit / g} gas at ${g} wei); wait for those in flight to be mined, or make the fee final (docs/relayer-worst-case.md)`,
      );
    }
  }
}
