import type { Queryable } from '../../store/db.ts';
import { BaseError, ExecutionRevertedError, IntrinsicGasTooHighError, type Address, type Hex } from 'viem';
import { describeBar } from '../bars.ts';
import type { PricingDeps, RelayerChain } from '../chain-view.ts';
import { RelayError } from '../errors.ts';
import type { Authorization } from './authorization.ts';
import { AUTHORIZATION_GAS } from './authorization.ts';
import type { SponsorApprover } from './approval.ts';
import { bareId, type DecodedCall } from './bundle.ts';
import type { SendArgs } from './request.ts';
import { decideSponsorship, type Decision } from './decision.ts';
import { calledContracts, ceilMul, feeTotals, requiredWei, structuralFees, tokenKey, tokenToWei, weiToToken, type FeePayment, type FeeTokenConfig, type PriceResult } from './fees.ts';
import { atMaxFee } from '../balances/holds.ts';
import { weiToAttoUsd, type Cost, type Stop } from './policy.ts';
import { priceWire } from '../../prices/index.ts';
import { signQuote, verifyQuote } from './quote.ts';
import { bounded, failGas, feeFinality, type Finality } from './finality.ts';
import { LossBudgetFull, clientNet, lossBudgets, type LossBudgets } from '../loss-budget.ts';
import { estimationCodeBytes, intrinsicGas, simulateUnsigned, type ProbeResult, type TxSimulation } from './simulate.ts';
import { bundleKey, type Coverage, type SponsorRule } from './sponsors.ts';

/*
 * Pricing: what a bundle costs and who pays it. FeeOptions' quote, a sponsorship decision within its
 * rules' limits and the project's balance, and at SendMetaTxn the funding of an admitted bundle — a
 * sponsorship charged to its caps and held on its tank, or a fee read from its calldata that covers the
 * worst case (docs/relayer-worst-case.md). No node call of its own but the unsigned simulations of
 * FeeOptions; no SQL (the repositories in PricingDeps own theirs).
 */

/** Per-call overheads the gas-estimation module does not see (signature check, nonce, events, the fee transfer). */
const BUNDLE_OVERHEAD = 45_000n;
const PER_TX_OVERHEAD = 8_000n;
const DEPLOY_GAS = 110_000n;
export const FEE_TRANSFER_ALLOWANCE = 60_000n;

/** Gas simulated on the node for one request so far (what a keyless caller's bucket is charged). */
export interface SimulationMeter {
  gas: bigint;
}

/** What the checks of intake found: the decoded call, its exact simulation and the gas price it is priced at. */
export interface Checked {
  call: DecodedCall;
  sim: ProbeResult;
  gasPrice: bigint;
  anonymous: boolean;
}

/** The gas a bundle used in simulation (intrinsic included) and the limit it will be signed with. */
export interface Sized {
  used: bigint;
  gasLimit: bigint;
}

export class Pricing {
  private readonly budgets: LossBudgets;

  constructor(
    private readonly chain: RelayerChain,
    private readonly deps: PricingDeps,
  ) {
    this.budgets = lossBudgets(deps.config.lossBudget);
  }

  async rulesOf(projectId: number | null) {
    // The project's rules and its ecosystem's.
    return projectId == null ? [] : (await this.deps.sponsors.forProject(projectId, this.chain.chainId)).filter((r) => r.active);
  }

  /** A cost in wei, and in atto-USD at the native/USD feed's price when there is one (for caps in USD). */
  private async costOf(wei: bigint): Promise<Cost> {
    const p = this.chain.prices.nativeUsd ? await this.chain.prices.nativeUsd() : { ok: false as const, reason: 'the relayer has no nativeUsdFeed' };
    return p.ok ? { wei, usd: weiToAttoUsd(wei, p.price) } : { wei, usd: null, usdMissing: p.reason };
  }

  /**
   * Whether the project's rules sponsor the call (intake/decision.ts): covered, within every limit of
   * the covering rules, and approved by the webhooks of those that have one. Charges nothing.
   */
  private async sponsorship(
    projectId: number | null,
    rules: SponsorRule[],
    call: DecodedCall,
    sizing: { gas: bigint | null; gasPrice: bigint; costWei: bigint },
    stage: 'feeOptions' | 'send' | 'check',
    approve: SponsorApprover | undefined = this.deps.approveSponsorship,
    stopped: Stop[] = [],
  ): Promise<Decision> {
    if (projectId == null) return { sponsored: false, ruleIds: [], reason: 'no access key: only bundles that pay their own fee are relayed', stop: null, wallets: [] };
    const caps = this.deps.spendCaps;
    return decideSponsorship({
      call,
      rules,
      gas: sizing.gas,
      gasPrice: sizing.gasPrice,
      cost: await this.costOf(sizing.costWei),
      now: new Date(),
      budgetStops: caps ? (r, w, c) => caps.budgetStops(r, w, c) : undefined,
      approve,
      ask: { chainId: this.chain.chainId, stage },
      stopped,
    });
  }

  /**
   * The console's CheckSponsorship: the decision FeeOptions would take for this call (approval webhooks
   * asked, stage "check"), costed at `gas` × the gas price now (1 wei without it: is anything left).
   */
  async checkSponsorship(projectId: number, one: { wallet: Address; target: Address; data: Hex; value: bigint }, gas: bigint | null) {
    const wallet = one.wallet.toLowerCase() as Address;
    // One call of a deployed wallet, as the coverage rules see a leaf.
    const call: DecodedCall = {
      id: '0x',
      kind: 'wallet',
      entrypoint: wallet,
      bundles: [{ id: '0x', wallet, space: 0n, nonce: 0n, txs: [], depth: 0 }],
      leaves: [{ executor: wallet, target: one.target.toLowerCase() as Address, value: one.value, data: one.data.toLowerCase() as Hex, delegateCall: false, revertOnError: true, bundle: 0, index: 0 }],
      deploys: [],
      candidates: [],
    };
    const rules = await this.deps.sponsors.forProject(projectId, this.chain.chainId);
    const gasPrice = await this.chain.client.getGasPrice();
    const decision = await this.sponsorship(projectId, rules, call, { gas, gasPrice, costWei: gas == null ? 1n : atMaxFee(gas * gasPrice) }, 'check');
    return { decision, rules };
  }

  /**
   * The bundles a FeeOptions call would simulate, each one eth_call with placed code: refused past
   * maxFeeOptionsBundles and maxOverrideBytes before any node call (an upper bound: this decode unfolds
   * every nested execute, the chain's answer only some).
   */
  feeOptionsWork(decoded: DecodedCall, codeBytes = 0): number {
    const c = this.deps.config;
    const n = decoded.bundles.length;
    if (n > c.maxFeeOptionsBundles) {
      throw new RelayError('invalidArgument', `the call carries ${n} bundles; FeeOptions simulates at most ${c.maxFeeOptionsBundles} (maxFeeOptionsBundles): send fewer at once`);
    }
    if (n * codeBytes > c.maxOverrideBytes) {
      throw new RelayError(
        'invalidArgument',
        `simulating the call's ${n} bundles places ${n * codeBytes} bytes of code, over this relayer's ${c.maxOverrideBytes} (maxOverrideBytes): send fewer bundles at once`,
      );
    }
    return n;
  }

  /**
   * `meter.gas` is raised by the gas each simulation was given or used as it goes (the keyless bucket is
   * charged by it: http/relayer/relayer.ts), whether or not the call ends in an answer.
   */
  async feeOptions(
    projectId: number | null,
    wallet: string,
    to: string,
    data: string,
    auth?: Authorization | null,
    decoded?: DecodedCall,
    meter: SimulationMeter = { gas: 0n },
    caller: Pick<SendArgs, 'keyId' | 'clientIp'> = {},
  ) {
    const first = decoded ?? this.chain.decode(wallet, to, data);
    this.feeOptionsWork(first);
    this.feeOptionsWork(first, await estimationCodeBytes(this.chain.client, this.chain.chainId));
    const { call, kinds } = await this.chain.recognise(wallet, to, data, false, auth, first);
    // Without a key, the call runs with at most the keyless gas limit (as SendMetaTxn's), not maxGasLimit.
    const anonymous = projectId == null;
    const gasCap = this.chain.simulationGasCap(projectId);
    const overCap = (gas: bigint) =>
      new RelayError('simulationFailed', `the call needs about ${gas} gas, over this relayer's limit of ${gasCap}${anonymous ? ' for calls without an access key' : ''}`);
    const outOfBudget = (w: Address, left: bigint) =>
      new RelayError(
        'simulationFailed',
        `the call needs more than this relayer's limit of ${gasCap} gas${anonymous ? ' for calls without an access key' : ''}: the bundle of wallet ${w} ran out of the ${left} gas the bundles before it left`,
      );
    // A wallet that is neither deployed nor deployed by this call will be by the one the client sends.
    const undeployed = call.bundles.filter((b) => !call.deploys.includes(b.wallet) && kinds.get(b.wallet) === 'empty').length;
    // What the transaction costs besides its bundles' own gas. On Arbitrum the L1 component of the calldata
    // is gas too, inside the limit (fee-model.ts).
    let gas = intrinsicGas(data as Hex) + BigInt(call.deploys.length + undeployed) * DEPLOY_GAS + FEE_TRANSFER_ALLOWANCE + (auth ? AUTHORIZATION_GAS : 0n);
    // Its calldata alone over the limit: refused unsimulated (the node would refuse the eth_call anyway).
    if (gas > gasCap) throw overCap(gas);
    gas += await this.chain.l1Gas(data);
    // One gas price for the fee (read once per block); the simulations run as the transaction will (runAs).
    const [gasPrice, runAs] = await Promise.all([this.chain.gasPriceNow(), this.chain.runAs()]);
    // One gas budget for the whole call, shared by its bundles: each runs in order with what the ones before
    // it left, and the first that does not fit ends the call. So a call costs the node at most its limit
    // in gas, however many bundles it carries, not one limit per bundle.
    for (const b of call.bundles) {
      gas += BUNDLE_OVERHEAD + PER_TX_OVERHEAD * BigInt(b.txs.length);
      const left = gasCap - gas;
      if (left <= 0n) throw overCap(gas);
      let results: TxSimulation[];
      try {
        results = await simulateUnsigned(this.chain.simulationClient(anonymous), this.chain.chainId, b.wallet, b.txs, left, runAs);
      } catch (err) {
        // The node refused the run whole: all that was left was spent. Out of gas or reverted in the
        // wallet's own frame (a huge revert payload to copy with what was left) is the caller's; else the node's.
        meter.gas += left;
        if (ranOutOrReverted(err)) throw outOfBudget(b.wallet, left);
        throw err;
      }
      const used = results.reduce((a, r) => a + r.gasUsed, 0n);
      meter.gas += used;
      gas += used;
      const failed = results.findIndex((r, j) => r.executed && !r.succeeded && b.txs[j].revertOnError);
      if (failed >= 0) {
        // A call that ran out of what its budget left is over the limit, whatever it reverted with.
        if ((used * 64n) / 63n + 10_000n >= left || results[failed].reason?.startsWith('NotEnoughGas')) throw outOfBudget(b.wallet, left);
        throw new RelayError('simulationFailed', `transaction ${failed} of wallet ${b.wallet} reverts: ${results[failed].reason}`);
      }
      if (gas > gasCap) throw overCap(gas);
    }
    // The gas limit a send of this bundle would be signed with (size): what fees, holds and caps are priced on.
    const limit = this.limitFor(gas);
    // On an OP-stack chain the sender also pays an L1 data fee, up to the oracle's bound for the size (fee-model.ts).
    const l1 = await this.chain.l1FeeBound(data, !!auth);
    let cover = await this.sponsorship(projectId, await this.rulesOf(projectId), call, { gas: limit, gasPrice, costWei: atMaxFee(limit * gasPrice + l1) }, 'feeOptions');
    // A project's limited balance that cannot cover the bundle stops its sponsorship (balances/holds.ts).
    if (this.deps.balances && cover.sponsored) cover = withBalance(cover, await this.deps.balances.fits(projectId, this.chain.chainId, cover, limit, gasPrice, l1));
    const sponsorship = sponsorshipWire(cover);
    if (!this.chain.isFeeRequired || cover.sponsored) return { options: [], sponsored: cover.sponsored, quote: null, unpriced: [], sponsorship };
    // What SendMetaTxn would refuse before pricing, FeeOptions refuses too: a barred caller or contract, and
    // a caller whose loss budget has no room for the fee's worth (the fee is appended later, so whether it
    // will be final is not known yet: the whole worth counts, as for a fee sent last).
    const payer = call.bundles[0].wallet;
    await this.refuseBarred({ ...caller }, payer);
    await this.refuseBarredContracts(call, []);
    // A bundle whose calls could all run after a first fee without undoing it is quoted for the limit
    // such a send is signed with (finality.ts): its fee then pays for every call failing at its worst.
    const top = call.bundles[0].txs;
    const finalShaped = !auth && call.bundles.length === 1 && top.length > 0 && bounded(top) === null;
    const needed = finalShaped ? ((gas + failGas(top)) * 64n) / 63n + 1n : 0n;
    const feeLimit = needed > limit && needed <= gasCap ? needed : limit;
    const wei = requiredWei(gas, feeLimit, gasPrice, this.deps.config.feeMarkup, l1, this.deps.config.feePriceRoom);
    await this.judgeBudget({
      id: '',
      feePayer: payer,
      keyId: caller.keyId ?? null,
      clientIp: caller.clientIp ?? null,
      gasPrice,
      final: finalShaped,
      exposureWei: this.exposureOf(wei, feeLimit, gasPrice, l1),
    });
    const board = await this.chain.prices.prices(this.chain.chainId, this.chain.feeTokens);
    const options = [];
    const unpriced: Array<{ token: FeeTokenConfig; reason: string }> = [];
    const quoted: Record<string, string> = {};
    const used: Record<string, string> = {};
    let block: bigint | null = null;
    for (const t of this.chain.feeTokens) {
      const p = board.get(tokenKey(t));
      // A token without a trustworthy price is withdrawn, never mispriced.
      if (!p?.ok) {
        unpriced.push({ token: t, reason: p?.reason ?? 'no price' });
        continue;
      }
      const value = weiToToken(wei, t, p.price);
      quoted[tokenKey(t)] = value.toString();
      used[tokenKey(t)] = `${p.price.num}/${p.price.den}`;
      if (p.block !== null) block = p.block;
      // The option's gasLimit is the fee transfer's own: clients give it to the payment call.
      options.push({ token: t, to: this.chain.paymentAddress, value, gasLimit: Number(FEE_TRANSFER_ALLOWANCE), price: priceWire(p) });
    }
    if (options.length === 0) {
      throw new RelayError(
        'unavailable',
        `no fee token has a trustworthy price now, and the bundle is not sponsored (${cover.reason ?? 'no sponsorship'}): ${unpriced.map((u) => `${u.token.symbol}: ${u.reason}`).join('; ')}`,
      );
    }
    const quote = signQuote(this.deps.quoteSecret, {
      v: 1,
      c: this.chain.chainId,
      w: call.bundles[0].wallet,
      k: bundleKey(call, structuralFees(call, this.chain.payee(), this.chain.feeTokens)),
      g: gas.toString(),
      l: feeLimit.toString(),
      o: quoted,
      p: used,
      ...(block !== null ? { b: block.toString() } : {}),
      e: Math.floor(Date.now() / 1000) + this.deps.config.quoteTtlSec,
    });
    return { options, sponsored: false, quote, unpriced: unpriced.map((u) => ({ token: u.token, reason: u.reason })), sponsorship };
  }

  /** Every fee token's price now, as RuntimeStatus and the console show it. */
  async priceStatus() {
    const board = await this.chain.prices.prices(this.chain.chainId, this.chain.feeTokens);
    return this.chain.feeTokens.map((t) => ({ symbol: t.symbol, token: tokenKey(t), ...priceWire(board.get(tokenKey(t)) ?? { ok: false, reason: 'no price' }) }));
  }

  /** A fee-paid bundle that calls a contract barred for burning gas it did not pay for is not relayed on the relayer's credit. */
  async refuseBarredContracts(call: DecodedCall, payments: FeePayment[]) {
    const bars = this.deps.bars;
    if (!bars) return;
    const bar = await bars.findContract(calledContracts(call, payments));
    if (bar) throw new RelayError('barred', describeBar(bar));
  }

  async refuseBarred(args: Pick<SendArgs, 'keyId' | 'clientIp'>, payer: Address) {
    const clientIp = args.clientIp ?? null;
    const bar = await this.deps.bars?.find({ wallet: payer, keyId: args.keyId ?? null, clientIp, clientNet: this.clientNetOf(clientIp) });
    if (bar) throw new RelayError('barred', describeBar(bar));
  }

  /** The client network the loss budgets count a caller under. */
  clientNetOf(clientIp: string | null | undefined): string | null {
    return clientNet(clientIp, this.budgets);
  }

  /**
   * The loss budgets of a fee-paying caller (loss-budget.ts), a full one refused as RateLimited: judged on
   * `q`, the transaction that queued the row (its own row counted), or before any write (FeeOptions).
   */
  async judgeBudget(m: { id: string; feePayer: string | null; keyId: number | null; clientIp: string | null; gasPrice: bigint; final: boolean; exposureWei: bigint }, q?: Queryable) {
    try {
      await this.deps.metaTxns.judgeLossBudget({ chainId: this.chain.chainId, ...m, clientNet: this.clientNetOf(m.clientIp) }, this.budgets, q);
    } catch (err) {
      throw err instanceof LossBudgetFull ? new RelayError('rateLimited', err.message) : err;
    }
  }

  /** The gas limit sized from a gas figure that includes the intrinsic cost: room for 63/64 forwarding, times the margin. */
  limitFor(gas: bigint): bigint {
    return ceilMul((gas * 64n) / 63n + 1n, this.deps.config.gasMargin);
  }

  /**
   * Sponsored within every limit of the covering rules (charged when it is queued), or paid by a fee
   * read from the calldata. Over a rule's limit, a bundle is not sponsored: it then has to pay like any other.
   */
  async fund(args: SendArgs, rules: SponsorRule[], { call, sim, gasPrice }: Checked, { used, gasLimit }: Sized, approve: SponsorApprover, stopped: Stop[]): Promise<Funding> {
    const none: Funding = { sponsored: false, sponsorId: null, feeToken: null, feeValue: null, feePayer: null, charge: null, refund: async () => {} };
    if (!this.chain.isFeeRequired) return none;
    // Caps, holds and charges are on the gas limit that will be signed at the most any attempt of it may
    // offer per gas (the worst case), not on what the simulation used at today's price: the charge is
    // settled to the real cost once mined (spend-caps.ts), which gives the difference back.
    const l1 = await this.chain.l1FeeBound(args.input, !!args.authorization);
    const worst = atMaxFee(gasLimit * gasPrice + l1);
    let cover = await this.sponsorship(args.projectId, rules, call, { gas: gasLimit, gasPrice, costWei: worst }, 'send', approve, stopped);
    let refund = async () => {};
    // A project's limited balance holds what the bundle may cost, or it is not sponsored (balances/holds.ts).
    if (this.deps.balances && cover.sponsored) {
      const held = await this.deps.balances.hold(cover, refund, { projectId: args.projectId, chainId: this.chain.chainId, metaTxnId: bareId(call.id), gasLimit, gasPrice, l1Fee: l1 });
      cover = withBalance(cover, held.cover);
      refund = held.refund;
    }
    if (cover.sponsored) {
      // Charged what it is covered for: no attempt offers more per gas than the cover pays for over its
      // gas limit (engine/cover-ceiling.ts), so what it costs once mined never passes its charge.
      const cost = await this.costOf(worst);
      return { ...none, sponsored: true, sponsorId: cover.ruleIds[0] ?? null, charge: { ruleIds: cover.ruleIds, wallets: cover.wallets, cost }, refund, gasPricePriced: gasPrice, coverWei: worst };
    }
    const payments = structuralFees(call, this.chain.payee(), this.chain.feeTokens);
    const payers = [...new Set(payments.map((p) => p.wallet))];
    if (payers.length > 1) throw new RelayError('insufficientFee', `fees are paid by ${payers.length} wallets (${payers.join(', ')}); one wallet pays the fee of a meta-transaction`);
    if (payers[0]) await this.refuseBarred(args, payers[0]);
    await this.refuseBarredContracts(call, payments);
    // A final fee (intake/finality.ts) is signed with the gas for every later call to fail at its worst.
    const intrinsic = used - sim.gasUsed;
    const final = this.finalLimit(feeFinality(call, payments, this.chain.context.factory, !!args.authorization), intrinsic, sim.gasUsed, gasLimit, args.projectId == null);
    const limit = final.final ? final.gasLimit : gasLimit;
    const paid = await this.checkPayment(call, payments, sim.paid, { used, gasLimit: limit, gasPrice, l1 }, args.quote, cover.reason);
    // What is not final counts against the loss budgets: the whole fee's worth (what any attempt may be
    // signed for, engine/cover-ceiling.ts), or for a final fee the part of it up to the fee transfer.
    const signable = this.exposureOf(paid.coverWei, limit, gasPrice, l1);
    const exposureWei = final.final ? ((intrinsic + final.preFeeGas) * (paid.coverWei - l1)) / limit + l1 : signable;
    return { ...none, feeToken: paid.token, feeValue: paid.value, feePayer: payers[0], gasPricePriced: gasPrice, coverWei: paid.coverWei, gasLimit: limit, exposureWei, feeFinal: final.final };
  }

  /**
   * What a fee-paying bundle whose fee is not final may be signed for at most: its fee's worth, but no more
   * than its limit at the price times the room the base fee has to climb (feePriceRoom). An overpaid fee
   * buys no higher ceiling (engine/cover-ceiling.ts signs such a row within this), so it does not fill the
   * caller's loss budget either.
   */
  private exposureOf(coverWei: bigint, gasLimit: bigint, gasPrice: bigint, l1: bigint): bigint {
    const room = ceilMul(gasLimit * gasPrice, this.deps.config.feePriceRoom) + l1;
    return coverWei < room ? coverWei : room;
  }

  /**
   * The gas limit of a bundle whose fee is final: its simulated gas plus what every call after the fee may
   * burn failing (finality.ts failGas), with room for 63/64 forwarding; never below the limit it was sized
   * with. Over the relayer's gas cap, its fee is not final after all (it is signed with the ordinary limit).
   */
  private finalLimit(f: Finality, intrinsic: bigint, simGas: bigint, sized: bigint, anonymous: boolean): { final: false } | { final: true; gasLimit: bigint; preFeeGas: bigint } {
    if (!f.final) return { final: false };
    const needed = intrinsic + ((simGas + f.postFeeGas) * 64n) / 63n + 1n;
    const gasLimit = needed > sized ? needed : sized;
    return gasLimit > this.chain.gasCap(anonymous) ? { final: false } : { final: true, gasLimit, preFeeGas: f.preFeeGas };
  }

  /**
   * The fee the calldata pays must cover the quote it brings, or the current price when it brings none;
   * and the simulation must see it arrive (a fee token whose transfer does not move what it says is not paid).
   */
  private async checkPayment(
    call: DecodedCall,
    payments: FeePayment[],
    simPaid: bigint[],
    { used: gasUsed, gasLimit, gasPrice, l1 }: { used: bigint; gasLimit: bigint; gasPrice: bigint; l1: bigint },
    quote: string | undefined,
    whyNotSponsored?: string,
  ) {
    const totals = feeTotals(payments);
    const offers = this.chain.feeTokens.map((t, i) => ({ token: t, key: tokenKey(t), paid: totals.get(tokenKey(t)) ?? 0n, arrived: simPaid[i] ?? 0n })).filter((o) => o.paid > 0n);
    const unsponsored = whyNotSponsored ? ` (not sponsored: ${whyNotSponsored})` : '';
    if (offers.length === 0) {
      throw new RelayError('insufficientFee', `the bundle pays no fee to ${this.chain.paymentAddress} in an accepted fee token (a top-level transfer of its wallet, revertOnError=true)${unsponsored}`);
    }
    let quoted: Record<string, string> | undefined;
    if (quote) {
      const check = verifyQuote(this.deps.quoteSecret, quote);
      if (!check.ok) throw new RelayError('insufficientFee', check.reason);
      const q = check.payload;
      if (q.c !== this.chain.chainId) throw new RelayError('insufficientFee', `the quote is for chain ${q.c}`);
      if (q.w !== call.bundles[0].wallet) throw new RelayError('insufficientFee', `the quote is for wallet ${q.w}, not ${call.bundles[0].wallet}`);
      if (q.k !== bundleKey(call, payments)) throw new RelayError('insufficientFee', 'the quote was issued for different transactions');
      // A bundle that turns out to need a larger gas limit than quoted is priced now instead.
      if (gasLimit <= BigInt(q.l ?? q.g)) quoted = q.o;
    }
    const wei = requiredWei(gasUsed, gasLimit, gasPrice, this.deps.config.feeMarkup, l1, this.deps.config.feePriceRoom);
    const board = await this.chain.prices.prices(this.chain.chainId, this.chain.feeTokens);
    let best = '';
    for (const o of offers) {
      // A token that has no trustworthy price now is not accepted, even under a quote issued before.
      const now: PriceResult | undefined = board.get(o.key);
      if (!now?.ok) {
        best = `${o.token.symbol} is not accepted now: it has no trustworthy price (${now?.reason ?? 'no price'})`;
        continue;
      }
      const required = quoted?.[o.key] !== undefined ? BigInt(quoted[o.key]) : weiToToken(wei, o.token, now.price);
      if (o.paid < required) {
        best = `${o.token.symbol}: paid ${o.paid}, required ${required}`;
        continue;
      }
      // A quote never buys the gas limit below its cost at the current price (a token that fell more than
      // the markup since the quote, or gas that rose as much): the relayer does not sign at a loss.
      const cost = weiToToken(gasLimit * gasPrice + l1, o.token, now.price);
      if (o.paid < cost) {
        best = `${o.token.symbol}: paid ${o.paid} as quoted, but its gas limit of ${gasLimit}${l1 ? ` (with an L1 data fee of up to ${l1} wei)` : ''} alone now costs ${cost} at the current price`;
        continue;
      }
      if (o.arrived < o.paid) throw new RelayError('insufficientFee', `the ${o.token.symbol} fee of ${o.paid} does not arrive in simulation (${o.arrived} did)`);
      return { token: o.key, value: o.paid, coverWei: tokenToWei(o.paid, o.token, now.price) };
    }
    throw new RelayError('insufficientFee', best.includes(' is not accepted now') ? `the fee is not accepted: ${best}${unsponsored}` : `the fee paid is too low (${best})${unsponsored}`);
  }
}

export interface Funding {
  sponsored: boolean;
  sponsorId: number | null;
  feeToken: string | null;
  feeValue: bigint | null;
  feePayer: Address | null;
  /** What to charge the covering rules when it is queued; null when not sponsored. */
  charge: { ruleIds: number[]; wallets: Address[]; cost: Cost } | null;
  /** The gas price it was priced at and what its fee (or its sponsor's hold) covers, in wei: reconciled once mined. */
  gasPricePriced?: bigint;
  coverWei?: bigint;
  /** Gives back what was held of a project balance when it is not queued after all. */
  refund: () => Promise<void>;
  /** The gas limit it was priced with, where pricing raised the sized one (a final fee's room for its calls to fail). */
  gasLimit?: bigint;
  /** A fee-paying one: what it may cost the relayer if its fee does not arrive (loss-budget.ts), and whether its fee is final by construction. */
  exposureWei?: bigint;
  feeFinal?: boolean;
}

/** What admission decided: the decoded call, its gas and how it is paid for. */
export interface Admission {
  call: DecodedCall;
  sized: { used: bigint; gasLimit: bigint };
  funded: Funding;
}

/** Whether a simulation's eth_call failed in the EVM (reverted, out of gas) rather than at the node or on the way. */
function ranOutOrReverted(err: unknown): boolean {
  if (!(err instanceof BaseError)) return false;
  return err.walk((e) => e instanceof ExecutionRevertedError || e instanceof IntrinsicGasTooHighError || /out of gas/i.test((e as Error).message ?? '')) != null;
}

/** A sponsorship decision after the project's balance had its say (a limited tank that cannot cover it stops it). */
function withBalance(d: Decision, after: Coverage): Decision {
  if (after.sponsored || !d.sponsored) return d;
  const reason = after.reason ?? 'the project balance cannot cover it';
  return { ...d, sponsored: false, ruleIds: [], reason, stop: { ruleId: d.ruleIds[0], limit: 'projectBalance', reason } };
}

/** metarelay's extra in FeeOptions: the rules that cover the bundle, or the first limit that stopped them. */
export function sponsorshipWire(d: Decision) {
  return { sponsored: d.sponsored, ruleIds: d.ruleIds, reason: d.reason, stoppedBy: d.stop && { ruleId: d.stop.ruleId, limit: d.stop.limit, reason: d.stop.reason } };
}
