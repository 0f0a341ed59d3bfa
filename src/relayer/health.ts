import { formatEther, parseEther, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { refillStatus } from './engine/refill.ts';
import type { Db } from '../store/db.ts';
import { inclusionStats } from './engine/attempts.ts';
import type { BarRepo } from './bars.ts';
import { RelayError } from './errors.ts';
import { setSenderStopped } from './engine/sender-pool.ts';
import type { ChainRelayer } from './chain-relayer.ts';
import type { MetaTxnRepo } from './store.ts';
import { waitingCount } from './preconditions/store.ts';

export interface HealthDeps {
  db: Db;
  metaTxns: MetaTxnRepo;
  bars: BarRepo;
}

/** The engine's own view of each sender: ledger, lease, open slots, a stalled replacement. */
async function senderLedger(db: Db, r: ChainRelayer) {
  const q = await db.query<{ address: string; next_nonce: string | null; leased: boolean; stalled: string | null; stopped_at: Date | null; in_flight: string }>(
    `SELECT rs.address, rs.next_nonce::text AS next_nonce, (rs.owner IS NOT NULL AND rs.lease_until > now()) AS leased, rs.stalled, rs.stopped_at,
            (SELECT count(DISTINCT t.nonce) FROM relay_txs t WHERE t.chain_id = rs.chain_id AND t.sender = rs.address AND t.status = 'PENDING')::text AS in_flight
     FROM relay_senders rs WHERE rs.chain_id = $1`,
    [r.chainId],
  );
  return new Map(
    q.rows.map((x) => [
      x.address,
      {
        next_nonce: x.next_nonce == null ? null : Number(x.next_nonce),
        leased: x.leased,
        stalled: x.stalled,
        stoppedAt: x.stopped_at ? new Date(x.stopped_at).toISOString() : null,
        in_flight: Number(x.in_flight),
      },
    ]),
  );
}

/**
 * StartSender / StopSender (the relayer's admin RPC and the console): a stopped sender settles what it
 * has open and takes no new work, from its holder's next pass.
 */
export async function switchSender(db: Db, r: ChainRelayer, index: number, run: boolean) {
  const address = r.senders[index];
  if (!address) throw new RelayError('invalidArgument', `no sender ${index}: ${r.deps.chain.name} has senders 0 to ${r.senders.length - 1}`);
  await setSenderStopped(db, r.chainId, address, !run);
  if (run) r.deps.onQueued?.(); // a local dispatcher looks at its queue now, not at its next poll
}

/** A relayer's senders, queue, inclusion share, unpaid fees and fee-token prices, as RuntimeStatus and the console's Health page show them. */
export async function relayerHealth(d: HealthDeps, r: ChainRelayer) {
  const treasury = r.deps.config.refill ? privateKeyToAccount(r.deps.config.refill.treasuryKey as Hex).address : null;
  const [senders, queue, waiting, inclusion, unpaid, prices, refills] = await Promise.all([
    senderStatuses(d.db, r),
    d.metaTxns.depth(r.chainId),
    waitingCount(d.db, r.chainId),
    inclusionStats(d.db, r.chainId),
    unpaidFees(d, r),
    // A token with ok=false is withdrawn from FeeOptions (docs/fee-prices.md).
    r.priceStatus().catch((err: Error) => r.feeTokens.map((t) => ({ symbol: t.symbol, ok: false as const, reason: `the price read failed: ${err.message.split('\n')[0]}` }))),
    // The treasury that tops senders up, and its latest transfers (null when no refill is configured).
    refillStatus(d.db, r.deps.chain, treasury),
  ]);
  // waiting: meta-transactions in PENDING_PRECONDITION (docs/relayer-preconditions.md), beside the queue's QUEUED and SENT.
  return { senders, queue, waiting, inclusion, unpaid, prices, refills };
}

/** Fee-paying meta-transactions mined without their fee, and who is barred for it. */
async function unpaidFees(d: HealthDeps, r: ChainRelayer) {
  const [count, costs, bars] = await Promise.all([
    d.db.query<{ n: string }>('SELECT count(*)::text AS n FROM meta_txns WHERE chain_id = $1 AND fee_received < fee_value', [r.chainId]),
    // What mined meta-transactions cost beyond their fee's worth or their sponsor's hold (docs/relayer-worst-case.md).
    d.db.query<{ n: string; wei: string }>('SELECT count(*)::text AS n, COALESCE(sum(shortfall_wei), 0)::text AS wei FROM meta_txns WHERE chain_id = $1 AND shortfall_wei > 0', [r.chainId]),
    d.bars.list(50),
  ]);
  return {
    shortfalls: Number(count.rows[0].n),
    costShortfalls: { count: Number(costs.rows[0].n), wei: costs.rows[0].wei },
    bars: bars.filter((b) => b.chainId === r.chainId).map((b) => ({ ...b, createdAt: b.createdAt.toISOString() })),
  };
}

/** Each sender as RuntimeStatus (and the console's health page) shows it: the chain's view plus the engine's (ledger, lease, floor, stalled). */
async function senderStatuses(db: Db, r: ChainRelayer) {
  const minBalance = parseEther(r.deps.config.minSenderBalance);
  const ledger = await senderLedger(db, r);
  return Promise.all(
    r.senders.map(async (address, index) => {
      const [balance, latest, pending] = await Promise.all([
        r.client.getBalance({ address }),
        r.client.getTransactionCount({ address, blockTag: 'latest' }),
        r.client.getTransactionCount({ address, blockTag: 'pending' }),
      ]);
      const l = ledger.get(address.toLowerCase());
      const belowFloor = minBalance > 0n && balance < minBalance;
      return {
        index,
        address,
        etherBalance: Number(formatEther(balance)),
        // enabled: may take new work (not stopped, above the balance floor); active: leased by a running dispatcher right now.
        enabled: !belowFloor && !l?.stoppedAt,
        active: !!l?.leased,
        nonce: { chain: latest, mempool: pending },
        // metarelay extras: the durable ledger, open slots, why a sender takes no work, what is stuck.
        ledgerNonce: l?.next_nonce ?? null,
        inFlight: l?.in_flight ?? 0,
        belowFloor,
        stoppedAt: l?.stoppedAt ?? null,
        stalled: l?.stalled ?? null,
      };
    }),
  );
}
