import type { Address, Hex } from 'viem';
import type { Db, Queryable } from '../../store/db.ts';
import { broadcast, failAttempt, insertAttempts, markBroadcast, sign, type BroadcastResult, type NewAttempt } from './attempts.ts';
import { crashPoint } from './crash-points.ts';
import { marketFees, type FeePolicy, type Market } from './gas-price.ts';
import { pricedUnits, unitsFor, type Plan, type Priced } from './units.ts';
import { errorText } from '../../util/error.ts';
import { claimSenders, lockNextNonce, releaseSenders, setNextNonce } from './ledger.ts';
import { newOwner, senderAccounts, type SenderAccount } from './sender-pool.ts';
import type { ChainRelayer } from '../chain-relayer.ts';
import type { NonceOverride } from '../intake/simulate.ts';
import type { MetaTxnRepo, MetaTxnRow, SentMeta } from '../store.ts';
import type { Logger } from '../../telemetry/logger.ts';
import type { Metrics } from '../../telemetry/metrics.ts';
import type { BarRepo } from '../bars.ts';
import type { BalanceHook } from './balance-level.ts';
import { Sweeper } from './sweep.ts';
import { assignSenders, usableSenders } from './dispatch/assign.ts';
import { resizeAfterRefusal, resizeWithinCover } from './l2-gas.ts';
import { UNSURE_PASSES, judgeStillGood } from './still-good.ts';
import { PollLoop } from '../../util/poll-loop.ts';
import { FailureStreak } from '../../util/failure-streak.ts';
import type { DispatcherDeps, EngineContext, SenderState } from './context.ts';

export type { DispatcherDeps, SenderState } from './context.ts';
import { WalletReads, authorizationToCarry } from './wallet-reads.ts';
import type { Authorization } from '../intake/authorization.ts';

const MAX_ATTEMPTS = 5;
const QUEUE_READ = 256;
const SIMULATE_AT_ONCE = 32;
/** How long a claim on queued meta-transactions keeps other processes off them: one pass, with room. */
const CLAIM_SEC = 15;
const IDLE_SWEEP_MS = 3_000;
/**
 * How often an idle dispatcher (nothing in flight, nothing to reconcile) looks at the head: the shared
 * head reader's (chain/head.ts) when it polls for the watcher or the indexer, else read this often.
 */
const IDLE_POLL_MS = 2_000;
/** A queued meta-transaction waiting on a predecessor is not read again for this long, so it cannot crowd out ready ones. */
const UNREADY_DEFER_MS = 1_000;

export class LostLease extends Error {}

/**
 * The dispatch engine of one chain: a loop that (1) keeps this process's sender leases, (2) once per new
 * head reconciles every in-flight transaction against the chain (the Sweeper: receipts, replacements
 * after N blocks, re-broadcasts, gap fills, reorgs), and (3) signs ready meta-transactions across the
 * senders. Every signed transaction is in the database before it is broadcast.
 */
export class Dispatcher implements EngineContext {
  readonly owner = newOwner();
  readonly accounts: Map<Address, SenderAccount>;
  readonly policy: FeePolicy;
  readonly sweeper: Sweeper;
  held: Address[] = [];
  /** Held senders an operator stopped: swept as usual, given no new work. */
  stopped = new Set<Address>();
  readonly senders = new Map<Address, SenderState>();
  head = -1;
  private headHash?: string;
  private readonly walletReads: WalletReads;
  private sweptAt = 0;
  /** Queued meta-transactions judged unsure at consecutive passes (still-good.ts), by id. */
  private readonly unsure = new Map<string, number>();
  private feeMemo?: { head: number; fees: Promise<Market> };
  /** Nothing in flight and nothing to reconcile at the last tick: the next one may wait IDLE_POLL_MS. */
  private idle = false;
  /** Set when something changed that the sweep must look at before the next block (a refused broadcast). */
  dirty = true;
  private readonly loop: PollLoop;
  // What the engine's stages are given besides (EngineContext): the wiring's stores, log and hooks.
  readonly db: Db;
  readonly metaTxns: MetaTxnRepo;
  readonly bars: BarRepo | undefined;
  readonly log: Logger;
  readonly metrics: Metrics | undefined;
  readonly refill: DispatcherDeps['refill'];
  readonly onSenderBalance: BalanceHook | undefined;

  constructor(
    readonly relayer: ChainRelayer,
    private readonly deps: DispatcherDeps,
  ) {
    this.db = deps.db;
    this.metaTxns = deps.metaTxns;
    this.bars = deps.bars;
    this.log = deps.log;
    this.metrics = deps.metrics;
    this.refill = deps.refill;
    this.onSenderBalance = deps.onSenderBalance;
    this.loop = new PollLoop(
      () => this.tick(),
      // Nothing in flight: the head is read every IDLE_POLL_MS, not every pollMs (intake's nudge still wakes it at once).
      () => (this.idle ? Math.max(this.config.pollMs, IDLE_POLL_MS) : this.config.pollMs),
      // While the node is down the outage is logged as a warning once, by the chain's health. What a failed
      // tick counted in memory may not have been committed (a connection lost at the COMMIT): the next
      // tick reads every sender again.
      this.failures(new FailureStreak(this.log, 'relayer dispatch tick', { chainId: this.chainId }, () => !this.deps.chain.health.ok)),
    );
    const c = deps.config;
    this.accounts = new Map(senderAccounts(c).map((a) => [a.address.toLowerCase() as Address, a]));
    this.policy = relayer.feePolicy;
    this.sweeper = new Sweeper(this);
    this.walletReads = new WalletReads(() => this.client, relayer.context, relayer.wallets);
  }

  private failures(streak: FailureStreak): Pick<FailureStreak, 'failed' | 'succeeded'> {
    return {
      failed: (err) => {
        this.dirty = true;
        streak.failed(err);
      },
      succeeded: () => streak.succeeded(),
    };
  }

  get chainId() {
    return this.relayer.chainId;
  }
  get chainName() {
    return this.deps.chain.name;
  }
  /** The engine's own client: its reads and broadcasts never share a JSON-RPC batch with intake's simulations. */
  get client() {
    return this.deps.chain.forRole('engine');
  }
  get chainHead() {
    return this.deps.chain.head;
  }
  get config() {
    return this.deps.config;
  }

  start() {
    this.loop.start();
  }

  /** Started and not stopped: this process dispatches the chain (intake's nudge reaches it). */
  get running(): boolean {
    return this.loop.active;
  }

  nudge() {
    this.loop.wake();
  }

  async stop() {
    await this.loop.stop();
    // Hand the senders back at once so another process can take over without waiting out the lease.
    await releaseSenders(this.db, this.chainId, this.owner).catch(() => undefined);
  }

  async tick() {
    const rows = await claimSenders(this.db, this.chainId, this.owner, [...this.accounts.keys()]);
    const before = new Set(this.held);
    this.held = rows.map((r) => r.address);
    this.stopped = new Set(rows.filter((r) => r.stopped).map((r) => r.address));
    for (const a of [...this.senders.keys()]) if (!this.held.includes(a)) this.senders.delete(a);
    if (this.held.length === 0) return;
    // A sender newly taken over is reconciled before anything is signed with it.
    if (this.held.some((a) => !before.has(a)) || rows.some((r) => r.next_nonce == null)) this.dirty = true;
    // Number and hash: a reorg to a chain of the same height is a new head too. Busy, read every
    // pollMs (a receipt may be one block away); idle, the process's shared head will do.
    const block = this.idle ? await this.chainHead.latest(IDLE_POLL_MS) : await this.chainHead.read(this.config.pollMs);
    const head = Number(block.number);
    // Also now and then without a new block: on a chain that mines only when a transaction arrives
    // (a dev node, some L2s), a node that lost its pool would otherwise never be sent anything again.
    const idle = Date.now() - this.sweptAt > IDLE_SWEEP_MS;
    if (head !== this.head || block.hash !== this.headHash || this.dirty || idle) {
      // Something changed outside a new block (a refusal, a sender taken over): every sender is read again.
      const full = this.dirty;
      this.dirty = false;
      this.sweptAt = Date.now();
      // Before the sweep settles anything: a client that sees its receipt and sends again at once must
      // meet this block's wallet slots and gas price, not the last block's.
      this.relayer.observeBlock(head);
      const swept = await this.sweeper.sweep(head, this.held, this.stopped, full);
      for (const [address, state] of swept.senders) this.senders.set(address, state);
      // The sweep read the market at this head (something is in flight): signing uses the same read.
      if (swept.market) this.feeMemo = { head, fees: Promise.resolve(swept.market) };
      if (swept.again) this.dirty = true;
      this.head = head;
      this.headHash = block.hash;
    }
    // Its failure must not stop dispatching: it is tried again at the next tick.
    const waits = await this.deps.onHead?.(head).catch((err) => this.log.warn({ err: errorText(err), chainId: this.chainId }, 'relayer head hook failed'));
    await this.sendReady();
    // Meta-transactions waiting on preconditions are judged every head: not idle then.
    this.idle = waits !== true && !this.dirty && [...this.senders.values()].every((s) => s.open === 0) && this.sweeper.quiet;
  }

  /** First-attempt fees from the fee history, read once per head, not once per pass. */
  marketFeesNow(): Promise<Market> {
    if (this.feeMemo?.head === this.head) return this.feeMemo.fees;
    const memo = { head: this.head, fees: marketFees(this.client, this.policy) };
    memo.fees.catch(() => {
      if (this.feeMemo === memo) this.feeMemo = undefined;
    });
    this.feeMemo = memo;
    return memo.fees;
  }

  emit(id: string) {
    this.deps.events.emit(this.chainId, id);
  }

  async requeueOrDrop(q: Queryable, row: MetaTxnRow, why: string, also: Record<string, unknown> = {}) {
    const attempts = row.attempts + 1;
    if (attempts >= MAX_ATTEMPTS) {
      await this.metaTxns.setStatus(q, this.chainId, row.id, { status: 'DROPPED', revert_reason: `not sent after ${attempts} attempts: ${why.slice(0, 300)}`, attempts });
    } else {
      await this.metaTxns.setStatus(q, this.chainId, row.id, {
        status: 'QUEUED',
        attempts,
        txn_hash: null,
        sender: null,
        txn_nonce: null,
        batch_index: null,
        stalled: null,
        claimed_until: null,
        next_attempt_at: new Date(Date.now() + 500 * 2 ** attempts),
        ...also,
      });
    }
  }

  /** A queued meta-transaction's limit raised to `estimate` (with the margin) if its cover pays for it, else dropped. */
  private async resize(row: MetaTxnRow, estimate: bigint): Promise<boolean> {
    const r = resizeWithinCover(row, estimate, this.config.gasMargin, this.config.maxGasLimit);
    if (!r.ok) {
      await this.drop(row, r.reason);
      return false;
    }
    if (!(await this.metaTxns.setStatus(this.db, this.chainId, row.id, { gas_limit: r.gasLimit.toString() }, 'QUEUED'))) return false;
    row.gas_limit = Number(r.gasLimit);
    return true;
  }

  private async drop(row: MetaTxnRow, reason: string) {
    // Only while still queued: another process may have sent it since this one read the queue (and its
    // simulation then fails because the nonce is used).
    if (!(await this.metaTxns.setStatus(this.db, this.chainId, row.id, { status: 'DROPPED', revert_reason: reason }, 'QUEUED'))) return;
    this.log.info({ chainId: this.chainId, id: row.id, reason }, 'meta-transaction dropped');
    this.emit(row.id);
  }

  /** Which queued meta-transactions can go now, and on which sender (a successor rides with its predecessor). */
  private async plan(rows: MetaTxnRow[]): Promise<Plan[]> {
    const bundles = await this.metaTxns.bundlesOfMany(
      this.chainId,
      rows.map((r) => r.id),
    );
    const flat = rows.flatMap((r) => bundles.get(r.id)!.map((b) => ({ wallet: b.wallet as Address, space: BigInt(b.nonce_space), nonce: BigInt(b.nonce) })));
    const current = await this.walletReads.noncesAt(this.head, flat);
    const want = flat.filter((b, i) => b.nonce > current[i]).map((b) => ({ wallet: b.wallet, space: b.space.toString(), nonce: (b.nonce - 1n).toString() }));
    const holders = await this.metaTxns.holdersOf(this.chainId, want);
    let k = 0;
    const plans: Plan[] = [];
    const unready: string[] = [];
    for (const row of rows) {
      let sender: Address | undefined;
      let ready = true;
      let dropped: string | undefined;
      const overrides: NonceOverride[] = [];
      for (const b of bundles.get(row.id)!) {
        const at = current[k++];
        const n = BigInt(b.nonce);
        if (n < at) dropped ??= `nonce ${n} of space ${b.nonce_space} was used by another transaction (wallet ${b.wallet} is at ${at})`;
        if (n <= at) continue;
        const pred = holders.get(`${b.wallet}:${b.nonce_space}:${n - 1n}`);
        if (pred?.status === 'SENT' && pred.sender && (!sender || sender === pred.sender)) {
          sender = pred.sender as Address;
          overrides.push({ wallet: b.wallet as Address, space: BigInt(b.nonce_space), nonce: n });
        } else ready = false;
      }
      if (dropped) await this.drop(row, dropped);
      else if (ready) plans.push({ row, sender, overrides, wallets: bundles.get(row.id)!.map((b) => b.wallet as Address) });
      else if (this.queuedTooLong(row)) await this.drop(row, `its nonce did not come up within ${this.config.queueTimeoutSec} s`);
      else unready.push(row.id);
    }
    await this.metaTxns.defer(this.chainId, unready, UNREADY_DEFER_MS);
    return plans;
  }

  private async sendReady() {
    const load = usableSenders(this);
    if (load.size === 0) return;
    const rows = await this.metaTxns.queued(this.chainId, QUEUE_READ, this.owner);
    if (rows.length === 0) return;
    const plans = await this.plan(rows);
    if (plans.length === 0) return;

    const market = await this.marketFeesNow();
    const { assigned, forReserve } = assignSenders(this, plans, load, market);

    await this.metaTxns.defer(this.chainId, forReserve, UNREADY_DEFER_MS);
    // Claimed first, so another process reading the same queue leaves these to this one.
    const mine = await this.metaTxns.claim(
      this.chainId,
      [...assigned.values()].flat().map((p) => p.row.id),
      this.owner,
      CLAIM_SEC,
    );
    for (const [sender, ps] of assigned) {
      const kept = ps.filter((p) => mine.has(p.row.id));
      if (kept.length) assigned.set(sender, kept);
      else assigned.delete(sender);
    }
    // The state may have moved since intake: never sign what would now revert or no longer pay.
    const checked = await this.simulateAll([...assigned].flatMap(([sender, ps]) => ps.map((p) => ({ sender, p }))));
    const sent: { sender: Address; units: Priced[] }[] = [];
    await Promise.all(
      [...assigned].map(async ([sender, ps]) => {
        const passed = ps.filter((p) => checked.get(p.row.id));
        if (passed.length)
          sent.push({
            sender,
            units: await pricedUnits(
              await unitsFor(this.relayer, sender, passed, this.config.batchSize),
              market,
              (u) => this.relayer.l1FeeBound(u.data, !!u.authorization),
              (row, why) => this.waitForBaseFee(row, why),
            ),
          });
      }),
    );
    const signed = (await Promise.all(sent.map(({ sender, units }) => this.persist(sender, units)))).flat();
    crashPoint('after-persist', signed.length);
    const results = await Promise.all(signed.map((s) => broadcast(this.client, s.raw)));
    crashPoint('after-broadcast', signed.length);
    await markBroadcast(
      this.db,
      this.chainHead,
      this.chainId,
      signed.filter((_, i) => results[i].ok).map((s) => s.hash),
    );
    for (const [i, s] of signed.entries()) await this.afterBroadcast(s, results[i]);
  }

  /**
   * Whether a meta-transaction that brought an EIP-7702 authorization still needs it, read from the chain
   * now, right before it is simulated and signed: not when the EOA is already delegated to that
   * implementation; and when it is not, the authorization must still be for the EOA's next account nonce
   * (pending included). An EOA that sent a transaction since voided it: on chain the authorization would
   * be skipped and the call would reach a plain account, so it is dropped and nothing is paid.
   */
  private async simulateAll(items: { sender: Address; p: Plan }[]): Promise<Map<string, boolean>> {
    const out = new Map<string, boolean>();
    // A wallet may have switched to other code since intake (its owner can call it directly): then its
    // bundles no longer have to honour signatures, nonces or fees, and are not sent.
    const kinds = await this.walletReads.kindsAt(
      this.head,
      items.flatMap(({ p }) => p.wallets),
    );
    for (let i = 0; i < items.length; i += SIMULATE_AT_ONCE) {
      await Promise.all(
        items.slice(i, i + SIMULATE_AT_ONCE).map(async ({ sender, p }) => {
          const d = await authorizationToCarry(this.client, p.row, () => this.relayer.seen);
          if (d.behind) {
            this.log.debug({ chainId: this.chainId, id: p.row.id, reason: d.behind }, 'meta-transaction left queued: its EOA was not read at the head seen');
            out.set(p.row.id, false);
            return;
          }
          if (d.void) {
            await this.drop(p.row, d.void);
            out.set(p.row.id, false);
            return;
          }
          p.carry = d.carry;
          // A wallet whose code no node answered for at the head (wallet-reads.ts): left queued, judged next pass.
          if (p.wallets.some((w) => !kinds.has(w.toLowerCase() as Address))) {
            out.set(p.row.id, false);
            return;
          }
          // An EOA whose authorization is carried gets its code from it, whatever it has now.
          const changed = p.wallets.find((w) => kinds.get(w) === 'other' && !(p.carry && w === p.row.wallet));
          if (changed) {
            await this.drop(p.row, `wallet ${changed} no longer runs a Sequence main module this relayer knows`);
            out.set(p.row.id, false);
            return;
          }
          out.set(p.row.id, await this.stillGood(sender, p.row, p.overrides, p.wallets, p.carry));
        }),
      );
    }
    return out;
  }

  /** Re-simulates one meta-transaction from its sender; drops it when it no longer executes or pays. */
  private async stillGood(sender: Address, row: MetaTxnRow, overrides: NonceOverride[], wallets: Address[], carry?: Authorization): Promise<boolean> {
    const v = await judgeStillGood(this.relayer, this.client, sender, row, overrides, wallets, carry);
    // Not judged at all (every run came from a node behind the head): nothing signed, nothing counted.
    if (v.kind === 'behind') {
      this.log.debug({ chainId: this.chainId, id: row.id, reason: v.reason }, 'meta-transaction left queued: no node simulated it on the head seen');
      return false;
    }
    const unsure = v.kind === 'unsure' ? (this.unsure.get(row.id) ?? 0) + 1 : 0;
    if (unsure > 0 && unsure < UNSURE_PASSES) this.unsure.set(row.id, unsure);
    else this.unsure.delete(row.id);
    if (v.kind === 'resize') return this.resize(row, v.estimate);
    if (v.kind === 'drop' || unsure >= UNSURE_PASSES) await this.drop(row, v.kind === 'good' ? '' : v.reason);
    return v.kind === 'good';
  }

  /** Queued for longer than queueTimeoutSec: whatever it waits on (a predecessor, the base fee), it is dropped. */
  private queuedTooLong(row: MetaTxnRow) {
    return Date.now() - row.queued_at.getTime() > this.config.queueTimeoutSec * 1000;
  }

  private async waitForBaseFee(row: MetaTxnRow, why: string) {
    if (this.queuedTooLong(row)) {
      await this.drop(row, `not sent within ${this.config.queueTimeoutSec} s: ${why}; send it again to have it priced anew`);
      return;
    }
    // Shown by GetMetaTxnReceipt and the console while it waits; looked at again next block.
    if (row.stalled !== why) await this.metaTxns.setStatus(this.db, this.chainId, row.id, { stalled: why }, 'QUEUED');
    await this.metaTxns.defer(this.chainId, [row.id], UNREADY_DEFER_MS);
  }

  /** Signs the units with consecutive nonces of one sender and records them, all in one transaction. */
  private async persist(sender: Address, units: Priced[]) {
    const account = this.accounts.get(sender)!;
    try {
      return await this.db.transaction(async (tx) => {
        const next = await lockNextNonce(tx, this.chainId, sender, this.owner);
        if (next == null) throw new LostLease();
        // Another process may have planned the same meta-transactions from the same queue: lock them
        // (those another transaction holds are skipped) and sign only units whose every one is still queued.
        const ids = [...new Set(units.flatMap((u) => u.metas.map((m) => m.id)))].sort();
        const free = await this.metaTxns.lockQueued(tx, this.chainId, ids);
        let nonce = next;
        const out: { sender: Address; unit: Priced; nonce: number; raw: Hex; hash: Hex }[] = [];
        const sent: SentMeta[] = [];
        const attempts: NewAttempt[] = [];
        for (const unit of units.filter((u) => u.metas.every((m) => free.has(m.id)))) {
          const u = { nonce, to: unit.to, data: unit.data, value: 0n, gas: unit.gas, fees: unit.fees, authorization: unit.authorization };
          const { raw, hash } = await sign(account, this.chainId, u);
          attempts.push({ ...u, sender, kind: unit.kind, metaTxnId: unit.kind === 'meta' ? unit.metas[0].id : null, hash, raw, head: this.head });
          for (const [i, m] of unit.metas.entries()) {
            sent.push({ id: m.id, sender, nonce, hash, batchIndex: unit.kind === 'batch' ? i : null, gasLimit: unit.kind === 'meta' ? unit.gas.toString() : String(m.gas_limit) });
          }
          out.push({ sender, unit, nonce, raw, hash });
          nonce++;
        }
        // Every attempt in one statement, recorded before any is broadcast (after this transaction commits).
        await insertAttempts(tx, this.chainId, attempts);
        // Every one in one statement: they are locked QUEUED (lockQueued), so each is marked.
        await this.metaTxns.markSent(tx, this.chainId, sent, new Date());
        await setNextNonce(tx, this.chainId, sender, nonce);
        const s = this.senders.get(sender);
        if (s) s.open += out.length;
        return out;
      });
    } catch (err) {
      if (err instanceof LostLease) return [];
      throw err;
    }
  }

  private async afterBroadcast(s: { sender: Address; unit: Priced; nonce: number; raw: Hex; hash: Hex }, res: BroadcastResult) {
    if (res.ok) {
      this.metrics?.relayBroadcasts.inc({ chain: this.chainName, kind: s.unit.kind === 'batch' ? 'batch' : 'first' });
      if (res.uncertain === 'transport') this.log.warn({ chainId: this.chainId, hash: s.hash }, 'broadcast uncertain (no answer); the block sweep will look the slot up');
      for (const m of s.unit.metas) this.emit(m.id);
      return;
    }
    // The node refused it: this transaction does not exist. Its meta-transactions go back to the queue and
    // the nonce becomes a hole the next sweep fills or rewinds.
    this.metrics?.relayRefused.inc({ chain: this.chainName, reason: res.kind });
    this.log.warn({ chainId: this.chainId, sender: s.sender, nonce: s.nonce, hash: s.hash, kind: res.kind, err: res.message }, 'broadcast refused');
    // Gas too low for the node (Arbitrum's L1 component rose): sized again from its estimate, not re-sent as it was.
    const resized = res.kind === 'intrinsicGasTooLow' && s.unit.kind === 'meta' ? await resizeAfterRefusal(this.client, s.sender, s.unit, this.config) : null;
    await this.db.transaction(async (tx) => {
      await failAttempt(tx, this.chainId, s.hash, res.message);
      for (const m of s.unit.metas) {
        if (resized?.ok === false) await this.metaTxns.setStatus(tx, this.chainId, m.id, { status: 'DROPPED', revert_reason: resized.reason });
        else await this.requeueOrDrop(tx, m, `${res.kind}: ${res.message}`, resized?.ok ? { gas_limit: resized.gasLimit.toString() } : {});
      }
    });
    if (res.kind === 'insufficientFunds') {
      const st = this.senders.get(s.sender);
      if (st) st.belowFloor = true;
    }
    this.dirty = true;
    for (const m of s.unit.metas) this.emit(m.id);
  }
}
