import { formatEther, type Address } from 'viem';
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

interface LedgerRead {
  next_nonce: number | null;
  leased: boolean;
  stalled: string | null;
  stoppedAt: string | null;
  in_flight: number;
  /** The sweep's last read of the node (recordSenderRead): kept through an outage as the last known state. */
  balance: bigint | null;
  latest: number | null;
  pending: number | null;
  readAt: string | null;
}

/** The engine's own view of each sender: ledger, lease, open slots, a stalled replacement, its last read from the node. */
async function senderLedger(db: Db, chainId: number): Promise<Map<string, LedgerRead>> {
  const q = await db.query<{
    address: string;
    next_nonce: string | null;
    leased: boolean;
    stalled: string | null;
    stopped_at: Date | null;
    in_flight: string;
    balance: string | null;
    chain_latest: string | null;
    chain_pending: string | null;
    read_at: Date | null;
  }>(
    `SELECT rs.address, rs.next_nonce::text AS next_nonce, (rs.owner IS NOT NULL AND rs.lease_until > now()) AS leased, rs.stalled, rs.stopped_at,
            rs.balance::text AS balance, rs.chain_latest::text AS chain_latest, rs.chain_pending::text AS chain_pending, rs.read_at,
            (SELECT count(DISTINCT t.nonce) FROM relay_txs t WHERE t.chain_id = rs.chain_id AND t.sender = rs.address AND t.status = 'PENDING')::text AS in_flight
     FROM relay_senders rs WHERE rs.chain_id = $1`,
    [chainId],
  );
  const num = (v: string | null) => (v == null ? null : Number(v));
  return new Map(
    q.rows.map((x) => [
      x.address,
      {
        next_nonce: num(x.next_nonce),
        leased: x.leased,
        stalled: x.stalled,
        stoppedAt: x.stopped_at ? new Date(x.stopped_at).toISOString() : null,
        in_flight: Number(x.in_flight),
        balance: x.balance == null ? null : BigInt(x.balance),
        latest: num(x.chain_latest),
        pending: num(x.chain_pending),
        readAt: x.read_at ? new Date(x.read_at).toISOString() : null,
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
  if (!address) throw new RelayError('invalidArgument', `no sender ${index}: ${r.network} has senders 0 to ${r.senders.length - 1}`);
  await setSenderStopped(db, r.chainId, address, !run);
  if (run) r.wake(); // a local dispatcher looks at its queue now, not at its next poll
}

/** A relayer's senders, queue, inclusion share, unpaid fees and fee-token prices, as RuntimeStatus and the console's Health page show them. */
export async function relayerHealth(d: HealthDeps, r: ChainRelayer) {
  const [senders, queue, waiting, inclusion, unpaid, prices, refills] = await Promise.all([
    senderStatuses(d.db, r),
    d.metaTxns.depth(r.chainId),
    waitingCount(d.db, r.chainId),
    inclusionStats(d.db, r.chainId),
    unpaidFees(d, r),
    // A token with ok=false is withdrawn from FeeOptions (docs/fee-prices.md).
    r.priceStatus().catch((err: Error) => r.feeTokens.map((t) => ({ symbol: t.symbol, ok: false as const, reason: `the price read failed: ${err.message.split('\n')[0]}` }))),
    // The treasury that tops senders up, and its latest transfers (null when no refill is configured).
    refillStatus(d.db, { chainId: r.chainId, public: r.client }, r.treasury),
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

/** A sender's balance and nonces: from the node while it answers, else the sweep's last read (live: false, readAt its time). */
async function senderRead(r: ChainRelayer, address: Address, l: LedgerRead | undefined) {
  // While the chain is down, asking would only wait out the transport's retries for each sender.
  if (r.nodeUp) {
    try {
      const [balance, latest, pending] = await Promise.all([
        r.client.getBalance({ address }),
        r.client.getTransactionCount({ address, blockTag: 'latest' }),
        r.client.getTransactionCount({ address, blockTag: 'pending' }),
      ]);
      return { balance, latest, pending, live: true, readAt: new Date().toISOString() };
    } catch {
      // The node failed now: its health has the cause; show what was last known.
    }
  }
  return { balance: l?.balance ?? null, latest: l?.latest ?? null, pending: l?.pending ?? null, live: false, readAt: l?.readAt ?? null };
}

/** Each sender as RuntimeStatus (and the console's health page) shows it: the chain's view plus the engine's (ledger, lease, floor, stalled). */
async function senderStatuses(db: Db, r: ChainRelayer) {
  const minBalance = r.minSenderBalance;
  const ledger = await senderLedger(db, r.chainId);
  return Promise.all(
    r.senders.map(async (address, index) => {
      const l = ledger.get(address.toLowerCase());
      const read = await senderRead(r, address, l);
      const belowFloor = read.balance != null && minBalance > 0n && read.balance < minBalance;
      return {
        index,
        address,
        etherBalance: read.balance == null ? null : Number(formatEther(read.balance)),
        // The exact figure, for a reader that rounds it itself (the console shows it as it shows amounts).
        balanceWei: read.balance?.toString() ?? null,
        // enabled: may take new work (not stopped, above the balance floor); active: leased by a running dispatcher right now.
        enabled: !belowFloor && !l?.stoppedAt,
        active: !!l?.leased,
        nonce: { chain: read.latest, mempool: read.pending },
        // live: read from the node just now; otherwise the last read (readAt), kept through an outage.
        live: read.live,
        readAt: read.readAt,
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

/**
 * What /ready shows of a relayer chain, from the database alone (no node call, so it holds through an
 * outage): the queue, and each sender's last known balance (with when it was read) and its pending
 * transactions.
 */
export async function relayerSnapshot(d: Pick<HealthDeps, 'db' | 'metaTxns'>, r: Pick<ChainRelayer, 'chainId' | 'senders'>) {
  const [queue, waiting, ledger] = await Promise.all([d.metaTxns.depth(r.chainId), waitingCount(d.db, r.chainId), senderLedger(d.db, r.chainId)]);
  return {
    queue: { ...queue, waiting },
    senders: r.senders.map((address) => {
      const l = ledger.get(address.toLowerCase());
      return {
        address,
        balance: l?.balance == null ? null : formatEther(l.balance),
        balanceAt: l?.readAt ?? null,
        pending: l?.in_flight ?? 0,
        stopped: !!l?.stoppedAt,
      };
    }),
  };
}
