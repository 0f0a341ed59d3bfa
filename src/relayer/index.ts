// The relayer's public entry point: what the HTTP layer, the console, the CLI and the wiring use.
import { randomBytes } from 'node:crypto';
import type { ChainClient } from '../chain/client.ts';
import { withRole } from '../chain/client.ts';
import type { Common } from '../common.ts';
import type { Role } from '../store/leadership.ts';
import { AlertWatch, type AlertDeps } from './alerts.ts';
import { projectBalances, type ProjectBalances } from './balances/index.ts';
import { barRepo, type BarRepo } from './bars.ts';
import { ChainRelayer } from './chain-relayer.ts';
import type { BalanceHook } from './engine/balance-level.ts';
import { Dispatcher } from './engine/dispatcher.ts';
import { SenderRefill } from './engine/refill.ts';
import { RelayEvents } from './events.ts';
import { feeModelFor } from './fee-model.ts';
import type { SponsorApprover } from './intake/approval.ts';
import { sponsorRepo, type SponsorRepo } from './intake/sponsors.ts';
import { spendCaps, type Charge, type SpendCaps } from './intake/spend-caps.ts';
import type { StatusHook } from './meta-txn-rows.ts';
import { PreconditionChecker } from './preconditions/checker.ts';
import { waitRepo } from './preconditions/store.ts';
import { ReceiptWaiters } from './receipt-waiters.ts';
import { metaTxnRepo, type MetaTxnRepo } from './store.ts';
import { QUEUED_CHANNEL } from './store/writes.ts';
import type { Db } from '../store/db.ts';

export { ChainRelayer, type RelayerDeps, type SendArgs, type SendResult } from './chain-relayer.ts';
export { Dispatcher } from './engine/dispatcher.ts';
export { RelayError, type RelayErrorKind } from './errors.ts';
export { RelayEvents } from './events.ts';
export { ReceiptWaiters } from './receipt-waiters.ts';
export { relayerHealth, relayerSnapshot, switchSender, type HealthDeps } from './health.ts';
export { barRepo, describeBar, type Bar, type BarKind, type BarRepo } from './bars.ts';
export { metaTxnUsage, type MetaTxnUsage, type MetaTxnUsageRollup } from './usage.ts';
export { metaTxnRepo, FINAL_STATUSES, type MetaTxnRepo, type MetaTxnRow, type StatusCause, type StatusKnown } from './store.ts';
export { crossingKind, type BalanceCrossing, type BalanceHook } from './engine/balance-level.ts';
export type { ApprovalRequest, SponsorApprover } from './intake/approval.ts';
export type { Decision } from './intake/decision.ts';
export type { SimulationMeter } from './intake/pricing.ts';
export { formatUsd } from './intake/policy.ts';
export { PolicyError, PolicyFields, mergePolicy, policyPatch } from './intake/policy-wire.ts';
export { sponsorRepo, SponsorConflict, SponsorKind, sponsorWire, type RuleOwner, type SponsorRepo, type SponsorRule } from './intake/sponsors.ts';
export { spendCaps, type SpendCaps } from './intake/spend-caps.ts';
export { feeTokenWire } from './intake/fees.ts';
export { receiptWire } from './receipts.ts';
export { bareId } from './intake/bundle.ts';
export { inclusionStats } from './engine/attempts.ts';
export { simulateUnsigned } from './intake/simulate.ts';
export { TRANSACTION_TUPLE } from './abi.ts';
export { PRECONDITION_TYPES, type PreconditionInput } from './preconditions/conditions.ts';
export { parseAuthorization, designator, type Authorization } from './intake/authorization.ts';
export { feeModelFor, type FeeModelName } from './fee-model.ts';
export { AlertWatch, currentAlerts, type Alert, type AlertDeps, type AlertOptions } from './alerts.ts';

/** Connections of the dispatchers' own pool (PostgreSQL): a pass runs one transaction per sender at a time. */
const ENGINE_CONNECTIONS = 5;

/** The events the relayer records (events/index.ts): metatxn.status with every status written, the senders' balance levels, and the sponsorship approval client. */
export interface RelayerEventHooks {
  onStatus(metaTxns: () => MetaTxnRepo): StatusHook;
  onSenderBalance: BalanceHook;
  approveSponsorship: SponsorApprover;
}

export interface Relayer {
  /** One relayer per chain configured with `relayer`, by chain id. */
  relayers: ReadonlyMap<number, ChainRelayer>;
  dispatchers: Dispatcher[];
  relayEvents: RelayEvents;
  metaTxns: MetaTxnRepo;
  sponsors: SponsorRepo;
  spendCaps: SpendCaps;
  /** Project balances (gas tanks): their ledger, intake's holds, the debits of mined sponsored meta-transactions. */
  balances: ProjectBalances;
  /** What the alerts read (the console's project alerts; the background check is one of relayerRoles). */
  alerts: AlertDeps;
  /** Wallets, keys and client addresses barred from fee-paid relaying after a fee did not arrive. */
  bars: BarRepo;
  /** GetMetaTxnReceipt's held requests: one reader per meta-transaction, capped per client address. */
  receiptWaiters: ReceiptWaiters;
}

/** What the wiring runs of the relayer besides: the loops one process of the fleet runs (by leadership role), and the connections of its own pool. */
export interface RelayerWiring {
  relayerRoles: Array<[string, Role]>;
  /**
   * The dispatchers as roles (`dispatch:<chainId>`), for a fleet that runs one per chain
   * (relayer.dispatchers `leader`): the wiring adds them to its leadership instead of starting them.
   */
  dispatchRoles: Array<[string, Role]>;
  relayerConnections: number;
}

/** An intake NOTIFYs a chain's dispatching process at most this often, in its transaction (more would only wake a pass under way). */
const NOTIFY_EVERY_MS = 50;

/**
 * Which chains an intake group wakes by NOTIFY (QUEUED_CHANNEL): those this process does not dispatch
 * (another process of the fleet leads them), at most one group per chain per NOTIFY_EVERY_MS. A group
 * held back by that gets a NOTIFY of its own after the window (outside its transaction, one statement)
 * when none followed, so the last intake of a burst does not wait for the dispatcher's poll.
 */
export function queuedNotices(db: Db, dispatchesHere: (chainId: number) => boolean): (chainIds: number[]) => number[] {
  const last = new Map<number, number>();
  const trailing = new Set<number>();
  return (chainIds) => {
    const now = performance.now();
    const out: number[] = [];
    for (const id of chainIds) {
      if (dispatchesHere(id)) continue;
      const at = last.get(id) ?? Number.NEGATIVE_INFINITY;
      if (now - at >= NOTIFY_EVERY_MS) {
        last.set(id, now);
        out.push(id);
      } else if (!trailing.has(id)) {
        trailing.add(id);
        setTimeout(
          () => {
            trailing.delete(id);
            if (last.get(id) !== at) return;
            last.set(id, performance.now());
            void db.query('SELECT pg_notify($1, $2)', [QUEUED_CHANNEL, String(id)]).catch(() => undefined);
          },
          at + 2 * NOTIFY_EVERY_MS - now,
        ).unref();
      }
    }
    return out;
  };
}

export async function createRelayer({ config, db, log, metrics, shutdown }: Common, deps: { chains: ReadonlyMap<number, ChainClient>; events: RelayerEventHooks }): Promise<Relayer & RelayerWiring> {
  const { chains, events } = deps;
  const relayEvents = new RelayEvents();
  // Every status the relayer writes records a metatxn.status event on the same transaction; a sponsored
  // one's project balance is debited (or reversed, or its hold released) and a DROPPED one's sponsorship
  // charges are given back there too.
  const balances = projectBalances(db, chains, config.chains);
  const sponsors = sponsorRepo(db);
  const caps = spendCaps(db, { shards: config.relayer.sponsorSpendShards });
  const relayed = config.chains.filter((c) => c.relayer);
  // Sponsorship caps and project balances near their limits: one check a minute, logged as each begins and ends.
  const alerts: AlertDeps = { sponsors, tanks: balances.tanks, chains: new Map(relayed.map((c) => [c.chainId, c.name])) };
  // One process checks the alerts, so each begins and ends once in the fleet's log.
  const relayerRoles: Array<[string, Role]> = alerts.chains.size > 0 ? [['alerts', new AlertWatch(alerts, config.console.alerts, log, metrics)]] : [];
  const statusEvents = events.onStatus(() => metaTxns);
  const metaTxnHooks: Parameters<typeof metaTxnRepo>[1] = {
    onStatus: async (q, rows, cause, known) => {
      await balances.onStatus(q, rows, known);
      await statusEvents(q, rows, cause, known);
      await caps.onStatus(q, rows);
    },
    chargeAtCommit: (tx, charges) => caps.chargeMany(tx, charges as Charge[]),
    // One process of a fleet dispatches each chain (relayer.dispatchers `leader`): the others' intakes wake it.
    notifyQueued: db.lockSession && config.relayer.dispatchers === 'leader' ? queuedNotices(db, (chainId) => dispatchers.some((d) => d.chainId === chainId && d.running)) : undefined,
  };
  const metaTxns: MetaTxnRepo = metaTxnRepo(db, metaTxnHooks);
  const bars = barRepo(db);
  const waits = waitRepo(db);
  // The dispatchers' own connections (PostgreSQL): with every pooled connection busy with intake and
  // reads, a pass's statements queued behind hundreds of requests and nothing was sent while intake
  // ran (bench/relayer-sustained.ts: SENT 0 for a minute at 100 SendMetaTxn/s).
  const engineDb = relayed.length ? ((await db.dedicated?.(ENGINE_CONNECTIONS)) ?? db) : db;
  if (engineDb !== db) shutdown.add(() => engineDb.close());
  const engineMetaTxns: MetaTxnRepo = engineDb === db ? metaTxns : metaTxnRepo(engineDb, metaTxnHooks);
  const engineBars = engineDb === db ? bars : barRepo(engineDb);
  const receiptWaiters = new ReceiptWaiters(relayEvents, (chainId, id) => metaTxns.find(chainId, id), {
    max: config.relayer.maxReceiptWaiters,
    perAddress: config.relayer.maxReceiptWaitersPerAddress,
  });
  const relayers = new Map<number, ChainRelayer>();
  const dispatchers: Dispatcher[] = [];
  const dispatchRoles: Array<[string, Role]> = [];
  let quoteSecret = config.relayer.quoteSecret;
  if (relayed.length && !quoteSecret) {
    // Quotes then only verify in this process: fine for one process, wrong for a fleet.
    quoteSecret = randomBytes(32).toString('hex');
    log.warn('relayer.quoteSecret is not set (METARELAY_QUOTE_SECRET): fee quotes are valid only in this process');
  }
  for (const c of relayed) {
    const rc = c.relayer!;
    // Intake's node calls batch only with other intake calls (the preconditions' reads too); the dispatcher has the engine's client.
    const intakeChain = withRole(chains.get(c.chainId)!, 'intake');
    const engineChain = withRole(chains.get(c.chainId)!, 'engine');
    const relayer: ChainRelayer = new ChainRelayer({
      chain: intakeChain,
      config: rc,
      feeModel: feeModelFor(c.chainId, c.feeModel),
      quoteSecret: quoteSecret!,
      metaTxns,
      sponsors,
      spendCaps: caps,
      balances: balances.holds,
      bars,
      log,
      metrics,
      onQueued: () => {
        preconditions.poke();
        dispatcher.nudge();
      },
      approveSponsorship: events.approveSponsorship,
      waits,
    });
    const preconditions = new PreconditionChecker(relayer, { chain: intakeChain, maxPending: rc.maxPendingPreconditions, quoteSecret: quoteSecret!, db, metaTxns, waits, events: relayEvents, log });
    const refill = rc.refill ? new SenderRefill(engineChain, engineDb, { ...rc.refill, minSenderBalance: rc.minSenderBalance }, log, metrics) : undefined;
    const dispatcher = new Dispatcher(relayer, {
      chain: engineChain,
      config: rc,
      db: engineDb,
      metaTxns: engineMetaTxns,
      bars: engineBars,
      events: relayEvents,
      log,
      metrics,
      onHead: (head) => preconditions.check(head),
      refill,
      onSenderBalance: events.onSenderBalance,
    });
    relayers.set(c.chainId, relayer);
    dispatchers.push(dispatcher);
    dispatchRoles.push([
      `dispatch:${c.chainId}`,
      {
        start: () => dispatcher.start(),
        stop: () => dispatcher.stop(),
        channel: QUEUED_CHANNEL,
        wake: (payload) => {
          if (payload !== String(c.chainId)) return;
          preconditions.poke();
          dispatcher.nudge();
        },
      },
    ]);
  }
  return {
    relayers,
    dispatchers,
    relayEvents,
    metaTxns,
    sponsors,
    spendCaps: caps,
    balances,
    alerts,
    bars,
    receiptWaiters,
    relayerRoles,
    dispatchRoles,
    relayerConnections: engineDb === db ? 0 : (engineDb.connections ?? 0),
  };
}
