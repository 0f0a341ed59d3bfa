import { getAddress, type Address, type Hex } from 'viem';
import type { Queryable, Tx } from '../../store/db.ts';
import type { IntakeDeps, RelayerChain } from '../chain-view.ts';
import { LOST_DELEGATION, describeBar } from '../bars.ts';
import { RelayError } from '../errors.ts';
import { checkWaitingFee } from '../preconditions/fee-floor.ts';
import { WaitShareFull } from '../preconditions/store.ts';
import { AUTHORIZATION_GAS, designator, readNonceAt, type Authorization } from './authorization.ts';
import { askOnce } from './approval.ts';
import { bareId, type DecodedCall } from './bundle.ts';
import { ceilMul, structuralFees } from './fees.ts';
import type { Stop } from './policy.ts';
import { OverBudget } from './spend-caps.ts';
import type { SponsorRule } from './sponsors.ts';
import { intrinsicGas, type NonceOverride } from './simulate.ts';
import { describeKind, slotKind } from './wallets.ts';
import { checkPreconditions, type Precondition } from '../preconditions/conditions.ts';
import { NonceTaken, QueueFull, type NewMetaTxn } from '../store.ts';
import { FEE_TRANSFER_ALLOWANCE, type Admission, type Checked, type Funding, type Pricing, type Sized } from './pricing.ts';
import type { SendArgs, SendResult } from './request.ts';

export type { SendArgs, SendResult } from './request.ts';

/*
 * Intake: a SendMetaTxn from request to queued row, in stages — precheck (no node call), check (wallets,
 * nonces, the exact simulation), size (the gas limit that will be signed), fund (pricing.ts), enqueue
 * within the caller's share of the queue. Nothing is signed here.
 */

export class Intake {
  /** The structural decode send() made of a request, so the checks that follow do not decode it again. */
  private readonly decoded = new WeakMap<SendArgs, DecodedCall>();

  /**
   * Accepts a meta-transaction, in four stages: check it (decode, a fee or a sponsorship present at all,
   * bars — all before any node call; then wallets by their code, nonces, and the exact simulation), size
   * its gas, fund it (a sponsorship within its caps, or a fee read from the calldata that covers the
   * price), and enqueue it within the caller's share of the queue. Nothing is signed here.
   */
  async send(args: SendArgs): Promise<SendResult> {
    const c = this.deps.config;
    const conditions = args.preconditions?.length ? checkPreconditions(args.preconditions, this.chain.chainId, c.maxPreconditions) : null;
    const first = this.chain.decode(args.walletAddress, args.contract, args.input);
    this.decoded.set(args, first);
    const known = await this.deps.metaTxns.find(this.chain.chainId, bareId(first.id));
    if (known && known.status !== 'DROPPED') return { id: known.id, created: false, row: known };
    // A waiting meta-transaction is admitted later from its stored call; an authorization could not
    // outlive the wait anyway (any transaction of the EOA voids it).
    if (conditions && args.authorization) throw new RelayError('invalidArgument', 'authorization: not accepted together with preconditions; delegate first, then send bundles that wait');
    if (args.authorization) {
      await this.chain.checkDelegationShape(args.authorization, args.walletAddress, first);
      // A signer whose delegated call already failed on chain is not relayed another, sponsored or not.
      const bar = await this.deps.bars?.find({ wallet: args.walletAddress, keyId: null, clientIp: null });
      if (bar?.feeToken === LOST_DELEGATION) throw new RelayError('barred', describeBar(bar));
    }
    const rules = await this.pricing.rulesOf(args.projectId);
    await this.precheck(args, first, rules);
    if (conditions) return this.acceptWaiting(args, conditions, rules);
    return this.admit(args, rules, ({ call, sized, funded }) => this.enqueue(args, call, sized, funded));
  }

  /**
   * What a meta-transaction must pass to be queued: checked (wallets, nonces, the exact simulation), sized
   * and funded (a sponsorship charged to its caps, or a fee that covers the price). Run at intake, and again
   * when a meta-transaction's preconditions hold: it then gets nothing it would not get if sent now.
   * `commit` writes it (charging the sponsorship on its transaction); a budget another intake spent in the
   * meantime (OverBudget) is decided again without that rule.
   */
  async admit<T>(args: SendArgs, rules: SponsorRule[] | undefined, commit: (a: Admission) => Promise<T>): Promise<T> {
    rules ??= await this.pricing.rulesOf(args.projectId);
    const checked = await this.check(args);
    const sized = this.size(args, checked);
    // Each webhook is asked once per send, even when the bundle is decided again below.
    const approve = askOnce(this.deps.approveSponsorship);
    const stopped: Stop[] = [];
    for (;;) {
      const funded = await this.pricing.fund(args, rules, checked, sized, approve, stopped);
      try {
        return await commit({ call: checked.call, sized: funded.gasLimit ? { ...sized, gasLimit: funded.gasLimit } : sized, funded });
      } catch (caught) {
        await funded.refund();
        const err = caught instanceof OverBudget ? caught : await this.overBudget(caught, funded);
        // Another intake spent the budget since the decision: decide again without that rule.
        if (err instanceof OverBudget && !stopped.some((s) => s.ruleId === err.stop.ruleId)) {
          stopped.push(err.stop);
          continue;
        }
        throw err;
      }
    }
  }

  /** A failed charge as OverBudget (spend-caps.ts), or the error itself. */
  private async overBudget(err: unknown, f: Funding): Promise<unknown> {
    if (!f.charge || !this.deps.spendCaps) return err;
    return (await this.deps.spendCaps.overBudget(err, { chainId: this.chain.chainId, metaTxnId: '', ...f.charge })) ?? err;
  }

  /**
   * Charges a sponsored admission to its rules' budgets as the last statement of the caller's
   * transaction (the transaction throws what admit turns into OverBudget when another intake spent them first).
   */
  async charge(tx: Tx, metaTxnId: string, f: Funding, args: Pick<SendArgs, 'keyId' | 'clientIp'>): Promise<void> {
    await this.judgeBudget(tx, metaTxnId, args, f);
    if (f.charge && this.deps.spendCaps) this.deps.spendCaps.charge(tx, { chainId: this.chain.chainId, metaTxnId, ...f.charge });
  }

  /** The loss budgets of a fee-paying admission, judged on the transaction that queues it (its row included). */
  private async judgeBudget(q: Queryable, id: string, args: Pick<SendArgs, 'keyId' | 'clientIp'>, f: Funding) {
    if (f.exposureWei == null) return;
    await this.pricing.judgeBudget(
      { id, feePayer: f.feePayer, keyId: args.keyId ?? null, clientIp: args.clientIp ?? null, exposureWei: f.exposureWei, final: f.feeFinal === true, gasPrice: f.gasPricePriced ?? 0n },
      q,
    );
  }

  /** The client network the loss budgets count a caller under. */
  clientNetOf(args: Pick<SendArgs, 'clientIp'>) {
    return this.pricing.clientNetOf(args.clientIp);
  }

  /**
   * Accepts a meta-transaction that waits for preconditions (PENDING_PRECONDITION). Its bundle usually
   * cannot run yet, so it is sized and funded only when they hold (admit); now it passes what does not
   * depend on them: the structure, bars, wallets, nonces, and a signature that verifies. It holds its
   * nonces and counts against its callers' share of the queue from now on.
   */
  private async acceptWaiting(args: SendArgs, conditions: Precondition[], rules: SponsorRule[]): Promise<SendResult> {
    const waits = this.deps.waits;
    if (!waits) throw new RelayError('invalidArgument', 'preconditions: not supported by this relayer');
    const pre = await this.checkCall(args);
    const sim = await this.simulateCall(pre);
    if (!sim.ok && /InvalidSignature|BadNonce/.test(sim.reason ?? '')) throw new RelayError('simulationFailed', sim.reason!);
    const payers = [...new Set(structuralFees(pre.call, this.chain.payee(), this.chain.feeTokens).map((p) => p.wallet))];
    if (payers.length > 1) throw new RelayError('insufficientFee', `fees are paid by ${payers.length} wallets (${payers.join(', ')}); one wallet pays the fee of a meta-transaction`);
    // Unless a sponsorship may cover it, a place in the pool takes a real fee its payer holds now.
    if (this.chain.isFeeRequired && payers[0] && rules.length === 0) {
      const fees = structuralFees(pre.call, this.chain.payee(), this.chain.feeTokens);
      const deps = { client: this.chain.client, prices: this.chain.prices, chainId: this.chain.chainId, feeTokens: this.chain.feeTokens, feeMarkup: this.deps.config.feeMarkup };
      await checkWaitingFee(deps, payers[0], fees, intrinsicGas(args.input as Hex) + FEE_TRANSFER_ALLOWANCE, pre.gasPrice);
    }
    // The paying wallet is recorded now, so its one fee-paying meta-transaction at a time includes this one.
    const funding: Funding = { sponsored: false, sponsorId: null, feeToken: null, feeValue: null, feePayer: payers[0] ?? null, charge: null, refund: async () => {} };
    const id = bareId(pre.call.id);
    return this.enqueue(args, pre.call, { used: 0n, gasLimit: 0n }, funding, {
      status: 'PENDING_PRECONDITION',
      also: (q) => {
        const c = this.deps.config;
        const keyless = args.projectId == null;
        // A sponsored row (it pays no fee) of wallets that have never run a transaction (the call deploys
        // them) costs its sender nothing: it holds its place in the pool for a shorter time.
        const deploys = new Set(pre.call.deploys.map((a) => a.toLowerCase()));
        const fresh = payers.length === 0 && pre.call.bundles.every((b) => deploys.has(b.wallet.toLowerCase()));
        const waitSec = Math.min(
          c.preconditionTimeoutSec,
          keyless ? c.anonymousPreconditionTimeoutSec : Number.POSITIVE_INFINITY,
          fresh ? c.newWalletSponsoredPreconditionTimeoutSec : Number.POSITIVE_INFINITY,
        );
        const anonymous = Math.ceil((c.maxPendingPreconditions * c.anonymousPendingPreconditionsPercent) / 100);
        const share = keyless ? anonymous : c.maxPendingPreconditionsPerProject;
        const part = (percent: number) => Math.max(1, Math.ceil((share * percent) / 100));
        const caps = {
          max: c.maxPendingPreconditions,
          projectId: args.projectId ?? null,
          perProject: c.maxPendingPreconditionsPerProject,
          anonymous,
          clientNet: this.clientNetOf(args),
          perClient: part(c.pendingPreconditionsPerClientPercent),
          wallet: pre.call.kind === 'wallet' ? pre.call.entrypoint : pre.call.bundles[0].wallet,
          perWallet: part(c.pendingPreconditionsPerWalletPercent),
        };
        return waits.insert(q, this.chain.chainId, id, { conditions, deadline: new Date(Date.now() + waitSec * 1000), quote: args.quote ?? null }, caps);
      },
    });
  }

  /** An authorization a simulation placed by override held at the block it ran on: the EOA's account nonce there is the one signed. */
  private async authorizationHeld(auth: Authorization, wallet: Address, block: bigint) {
    const nonce = await readNonceAt(this.chain.client, wallet, block);
    if (nonce === null)
      throw new RelayError('unavailable', `the chain's node is behind: no node answered the account nonce of ${getAddress(wallet)} at block ${block}, which the call was simulated on; try again`);
    if (nonce !== auth.nonce) {
      throw new RelayError(
        'invalidArgument',
        `authorization.nonce: ${auth.nonce} is not the account nonce of ${getAddress(wallet)} (${nonce} at block ${block}); sign the authorization for its next nonce`,
      );
    }
  }

  /** What costs no node call: a fee or a sponsorship must be there at all, and a caller who did not pay before gets no credit. */
  private async precheck(args: SendArgs, call: DecodedCall, rules: SponsorRule[]) {
    if (!this.chain.isFeeRequired) return;
    const payments = structuralFees(call, this.chain.payee(), this.chain.feeTokens);
    if (payments.length === 0 && rules.length === 0) {
      const why = args.projectId == null ? 'no access key: only bundles that pay their own fee are relayed' : 'neither the project nor its ecosystem has an active sponsorship on this network';
      throw new RelayError(
        'insufficientFee',
        `the bundle pays no fee to ${this.chain.paymentAddress} in an accepted fee token (a top-level transfer of its wallet, revertOnError=true; not sponsored: ${why})`,
      );
    }
    if (payments.length > 0 && rules.length === 0) {
      await this.pricing.refuseBarred(args, payments[0].wallet);
      await this.pricing.refuseBarredContracts(call, payments);
    }
  }

  /**
   * Wallets by their code, nonces within the window, then the exact call simulated from a sender. Most
   * bundles are at their wallet's next nonce, so one probe both reads the nonces and runs the bundle;
   * only a bundle ahead of the chain is run again, with its predecessors' nonces set by override.
   */
  private async check(args: SendArgs) {
    const pre = await this.checkCall(args);
    const sim = await this.simulateCall(pre);
    if (!sim.ok) throw new RelayError('simulationFailed', sim.reason ?? 'the bundle reverts');
    return { call: pre.call, sim, gasPrice: pre.gasPrice, anonymous: pre.anonymous };
  }

  /**
   * Wallets by their code and nonces within the window, and the first simulation. A known wallet proxy's
   * implementation slot is read by that simulation's own eth_call (slotReads) rather than in a call
   * before it, and checked before anything else is: nothing is accepted for a proxy whose
   * implementation is not a known main module, judged on the state the bundle was simulated on.
   */
  private async checkCall(args: SendArgs) {
    const anonymous = args.projectId == null;
    const [{ call, unverified }, gasPrice] = await Promise.all([
      this.chain.recognise(args.walletAddress, args.contract, args.input, true, args.authorization, this.decoded.get(args), true),
      this.chain.isFeeRequired ? this.chain.gasPriceNow() : Promise.resolve(0n),
    ]);
    const deployed = new Set(call.deploys);
    // Simulated with the delegation applied, as the type-4 transaction will have it when its call runs.
    const codes = args.authorization ? [{ address: call.entrypoint, code: designator(args.authorization.implementation) }] : undefined;
    const job = { sender: this.chain.senders[0], entrypoint: call.entrypoint, input: args.input as Hex, gasCap: this.chain.gasCap(anonymous), codes, wallets: call.bundles.map((b) => b.wallet) };
    // The slot reads make this run's gas a few gas per call into the wallet dearer (probe-proxy.ts):
    // conservative. The dispatcher simulates again without them before signing.
    const sim = await this.chain.probe({ ...job, nonces: [], reads: call.bundles.map((b) => ({ wallet: b.wallet, space: b.space })), slotReads: unverified });
    // The delegation is placed by override, so the run passes whether or not the authorization holds at its block.
    if (args.authorization) await this.authorizationHeld(args.authorization, call.entrypoint, sim.block);
    for (const [i, w] of unverified.entries()) {
      // Remembered for this block either way: other sends of the wallet need no read.
      this.chain.wallets.learn(w, sim.slots[i], sim.block);
      // A proxy seen with code whose slot is zero at the block simulated: that block predates its deployment.
      if (BigInt(sim.slots[i]) === 0n) throw new RelayError('unavailable', `the chain's node is behind: wallet ${getAddress(w)} was simulated at block ${sim.block}, before its deployment; try again`);
      if (slotKind(this.chain.context, sim.slots[i]) !== 'wallet') throw new RelayError('simulationFailed', describeKind(w, 'other'));
    }
    const chainNonces = sim.chainNonces;
    const window = BigInt(this.deps.config.maxNonceAhead);
    for (const [i, b] of call.bundles.entries()) {
      if (b.nonce < chainNonces[i]) {
        throw new RelayError('simulationFailed', `BadNonce: nonce ${b.nonce} of space ${b.space} is already used (wallet ${b.wallet} is at ${chainNonces[i]})`);
      }
      if (b.nonce - chainNonces[i] > window) {
        const next = await this.chain.nextAfterQueued(b.wallet, b.space, chainNonces[i]);
        if (b.nonce > next + window) {
          throw new RelayError(
            'invalidArgument',
            `nonce ${b.nonce} of space ${b.space} is too far ahead: wallet ${b.wallet} is at ${next} counting queued meta-transactions, and at most ${window} ahead is accepted`,
          );
        }
      }
    }
    const overrides: NonceOverride[] = call.bundles.filter((b, i) => b.nonce > chainNonces[i] && !deployed.has(b.wallet)).map((b) => ({ wallet: b.wallet, space: b.space, nonce: b.nonce }));
    return { call, gasPrice, anonymous, job, first: sim, overrides };
  }

  /** The exact call simulated from a sender: the first probe's run, or again with predecessors' nonces set when it is ahead of the chain. */
  private async simulateCall(pre: Awaited<ReturnType<Intake['checkCall']>>) {
    return pre.overrides.length > 0 ? this.chain.probe({ ...pre.job, nonces: pre.overrides }) : pre.first;
  }

  private size(args: SendArgs, { sim, anonymous }: Checked) {
    // The limit rests on the node's estimate (simulate.ts says when: the trial did not prove the measured
    // gas, or the chain charges a part only the estimate counts) and the node gave none: a limit from the
    // measured gas would fail on chain at the relayer's expense, so nothing is accepted; the estimate
    // usually comes back on a retry.
    if (sim.estimateNeeded && sim.estimate === undefined) {
      throw new RelayError(
        'unavailable',
        'the node gave no eth_estimateGas for a bundle whose gas limit needs one (a call of it asks for more gas than it burns, or the chain charges a part only the estimate counts); try again',
      );
    }
    const intrinsic = intrinsicGas(args.input as Hex) + (args.authorization ? AUTHORIZATION_GAS : 0n);
    const used = intrinsic + sim.gasUsed;
    // The probe ran the bundle again with gasUsed × gasMargin and saw it execute, so the limit below
    // (which leaves the entrypoint at least that) is proven enough; only when that trial failed does the
    // node's eth_estimateGas (sim.estimate) have a say.
    const needed = [sim.estimate ?? 0n, intrinsic + (sim.gasUsed * 64n) / 63n + 1n].reduce((a, b) => (a > b ? a : b));
    const gasLimit = ceilMul(needed, this.deps.config.gasMargin);
    const cap = this.chain.gasCap(anonymous);
    if (gasLimit > cap) {
      throw new RelayError('simulationFailed', `the bundle needs ${gasLimit} gas, over this relayer's limit of ${cap}${anonymous ? ' for calls without an access key' : ''}`);
    }
    return { used, gasLimit };
  }

  private async enqueue(args: SendArgs, call: DecodedCall, { used, gasLimit }: Sized, f: Funding, extra: Pick<NewMetaTxn, 'status' | 'also'> = {}): Promise<SendResult> {
    const c = this.deps.config;
    try {
      const { row, created } = await this.deps.metaTxns.insert(
        {
          chainId: this.chain.chainId,
          id: bareId(call.id),
          projectId: args.projectId,
          wallet: (call.kind === 'wallet' ? call.entrypoint : call.bundles[0].wallet) as Address,
          entrypoint: call.entrypoint,
          input: (args.input as string).toLowerCase() as Hex,
          gasLimit,
          gasEstimated: used,
          sponsored: f.sponsored,
          sponsorId: f.sponsorId,
          feeToken: f.feeToken,
          feeValue: f.feeValue,
          feePayer: f.feePayer,
          gasPricePriced: f.gasPricePriced ?? null,
          coverWei: f.coverWei ?? null,
          keyId: args.keyId ?? null,
          clientIp: args.clientIp ?? null,
          bundles: call.bundles.map((b) => ({ id: bareId(b.id), wallet: b.wallet, space: b.space, nonce: b.nonce })),
          authorization: args.authorization ?? null,
          exposureWei: f.exposureWei ?? null,
          feeFinal: f.feeFinal ?? null,
          clientNet: this.clientNetOf(args),
          // The sponsorship is charged in the transaction that queues the meta-transaction: both or neither.
          charge: f.charge && this.deps.spendCaps ? { chainId: this.chain.chainId, metaTxnId: bareId(call.id), ...f.charge } : undefined,
          ...extra,
          // Its loss budgets are judged after its row is written, in the same transaction (its own row counted).
          also: async (q) => {
            await extra.also?.(q);
            await this.judgeBudget(q, bareId(call.id), args, f);
          },
        },
        { perWallet: c.maxQueuedPerWallet, perKey: c.maxQueuedPerKey, perAddress: c.maxQueuedPerAddress },
      );
      if (created) this.deps.onQueued?.();
      // Already there (sent twice): what this send held of a project balance goes back.
      else await f.refund();
      return { id: row.id, created, row };
    } catch (err) {
      if (err instanceof WaitShareFull) this.deps.metrics?.relayPreconditionRefused.inc({ chain: this.chain.network, share: err.share });
      if (err instanceof NonceTaken || err instanceof QueueFull) throw new RelayError('conflict', err.message);
      throw err;
    }
  }

  constructor(
    private readonly chain: RelayerChain,
    private readonly pricing: Pricing,
    private readonly deps: IntakeDeps,
  ) {}
}
