import { getAddress, isAddress, type Address, type Hex } from 'viem';
import type { ChainClient } from '../chain/client.ts';
import type { ChainConfig } from '../config/schema.ts';
import type { Logger } from '../telemetry/logger.ts';
import { readNonces } from './nonces.ts';
import { LOST_DELEGATION, describeBar, type BarRepo } from './bars.ts';
import { BundleError, bareId, decodeCall, joinNonce, selectorOf, type DecodedCall } from './intake/bundle.ts';
import { SEQUENCE_V2_CONTEXT, type SequenceContext } from './context.ts';
import { RelayError } from './errors.ts';
import { calledContracts, ceilMul, feeTotals, fractionToDecimal, probeTokens, requiredWei, structuralFees, tokenKey, tokenToWei, weiToToken, type FeePayment, type FeeTokenConfig, type PriceResult, type PriceSource } from './intake/fees.ts';
import { PriceBook, priceWire } from './intake/prices/book.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { signQuote, verifyQuote } from './intake/quote.ts';
import { senderAccounts } from './engine/sender-pool.ts';
import { simulateUnsigned, estimationCodeBytes, intrinsicGas, type CodeOverride, type NonceOverride, type ProbeJob, type ProbeResult } from './intake/simulate.ts';
import { ProbeBatcher } from './intake/probe-batch.ts';
import { bundleKey, type Coverage, type SponsorRepo, type SponsorRule } from './intake/sponsors.ts';
import { askOnce, type SponsorApprover } from './intake/approval.ts';
import { decideSponsorship, type Decision } from './intake/decision.ts';
import { weiToAttoUsd, type Cost, type Stop } from './intake/policy.ts';
import { OverBudget, type SpendCaps } from './intake/spend-caps.ts';
import { HOLD_PRICE_FACTOR, type BalanceHolds } from './balances/holds.ts';
import type { Tx } from '../store/db.ts';
import { NonceTaken, QueueFull, type MetaTxnRepo, type MetaTxnRow, type NewMetaTxn } from './store.ts';
import { WalletCache, describeKind, recogniseDeferring, slotKind, type WalletKind } from './intake/wallets.ts';
import { checkPreconditions, type Precondition, type PreconditionInput } from './preconditions/conditions.ts';
import type { WaitRepo } from './preconditions/store.ts';
import { checkWaitingFee } from './preconditions/fee-floor.ts';
import { AUTHORIZATION_GAS, checkAuthorization, designator, type Authorization } from './intake/authorization.ts';

export type RelayerChainConfig = NonNullable<ChainConfig['relayer']>;

/** Per-call overheads the gas-estimation module does not see (signature check, nonce, events, the fee transfer). */
const BUNDLE_OVERHEAD = 45_000n;
const PER_TX_OVERHEAD = 8_000n;
const DEPLOY_GAS = 110_000n;
const FEE_TRANSFER_ALLOWANCE = 60_000n;
/** A gas price read for intake is reused until a newer block is seen, and never for longer than this. */
const GAS_PRICE_MAX_AGE_MS = 2_000;

export interface RelayerDeps {
  chain: ChainClient;
  config: RelayerChainConfig;
  quoteSecret: string;
  metaTxns: MetaTxnRepo;
  sponsors: SponsorRepo;
  /** Callers barred from fee-paid relaying after a fee did not arrive; without it, nobody is. */
  bars?: BarRepo;
  /** Budgets of sponsorship rules (daily, per wallet, total); without it, rules have none. */
  spendCaps?: SpendCaps;
  /** Project balances: a project whose limited gas tank cannot cover a bundle does not sponsor it; without it, none is limited. */
  balances?: BalanceHolds;
  log: Logger;
  /** Fee-token prices; default: a PriceBook over the configured sources (live feeds and pools, then fixed rates). */
  prices?: PriceSource;
  metrics?: Metrics;
  /** Wakes the dispatcher when work arrives. */
  onQueued?: () => void;
  /** Asks a rule's approval webhook (GasSponsor.webhookUrl); without it, such a rule never sponsors. */
  approveSponsorship?: SponsorApprover;
  /** Where meta-transactions waiting on preconditions keep them; without it, preconditions are refused. */
  waits?: WaitRepo;
}

export interface SendResult {
  id: string;
  created: boolean;
  row: MetaTxnRow;
}

/** One relayer per configured network: intake, fees and sponsorship. Sending is the dispatcher's job. */
export class ChainRelayer {
  readonly chainId: number;
  readonly context: SequenceContext;
  readonly senders: Address[];
  readonly paymentAddress: Address;
  readonly feeTokens: readonly FeeTokenConfig[];
  private readonly prices: PriceSource;
  /** Wallet proxies seen (their code never changes) and implementation slots of the current block. */
  readonly wallets: WalletCache;
  /** Wallet implementations an EOA may delegate to (EIP-7702), lower case. */
  readonly delegates: readonly Address[];
  /** Concurrent simulations of this chain, sent to the node together. */
  private readonly probes: ProbeBatcher;
  /** ... those of the dispatcher, apart from intake's. */
  private readonly engineProbes: ProbeBatcher;
  private seenBlock = -1n;
  /** The structural decode send() made of a request, so the checks that follow do not decode it again. */
  private readonly decoded = new WeakMap<SendArgs, DecodedCall>();
  private gasPriceMemo?: { block: bigint; at: number; value: Promise<bigint> };

  constructor(readonly deps: RelayerDeps) {
    const c = deps.config;
    this.chainId = deps.chain.chainId;
    this.context = c.context
      ? {
          factory: getAddress(c.context.factory),
          mainModule: getAddress(c.context.mainModule),
          mainModuleUpgradable: getAddress(c.context.mainModuleUpgradable),
          guestModule: getAddress(c.context.guestModule),
          utils: getAddress(c.context.utils),
        }
      : SEQUENCE_V2_CONTEXT;
    this.senders = senderAccounts(c).map((a) => a.address);
    this.paymentAddress = getAddress(c.paymentAddress ?? this.senders[0]);
    this.feeTokens = c.feeTokens;
    this.prices = deps.prices ?? new PriceBook(deps.chain, c, { metrics: deps.metrics, log: deps.log });
    this.delegates = c.delegatedWallets.map((a) => a.toLowerCase() as Address);
    this.wallets = new WalletCache(deps.chain.public, this.delegates);
    const probeSettings = {
      payee: this.paymentAddress.toLowerCase() as Address,
      tokens: probeTokens(this.feeTokens),
      // The trial run gets gasUsed × gasMargin: what the gas limit sized from it leaves the entrypoint at least.
      trialBps: BigInt(Math.floor(c.gasMargin * 10_000)),
      // Simulated at the chain's gas price, as the transaction will run (simulate.ts).
      gasPrice: () => this.gasPriceNow(),
    };
    this.probes = new ProbeBatcher(deps.chain.public, probeSettings);
    // The dispatcher's runs before signing go out on the engine's own client (chain/client.ts NodeRole).
    this.engineProbes = new ProbeBatcher(deps.chain.forRole('engine'), probeSettings);
  }

  /** A block seen by a simulation or the dispatcher: per-block caches (gas price, wallet slots) move on. */
  observeBlock(block: bigint | number) {
    const b = BigInt(block);
    if (b > this.seenBlock) this.seenBlock = b;
    this.wallets.observe(b);
  }

  /** The node's gas price, read at most once per block seen (and per GAS_PRICE_MAX_AGE_MS), not per request. */
  gasPriceNow(): Promise<bigint> {
    const m = this.gasPriceMemo;
    if (m && m.block >= this.seenBlock && Date.now() - m.at < GAS_PRICE_MAX_AGE_MS) return m.value;
    const value = this.client.getGasPrice();
    const memo = { block: this.seenBlock, at: Date.now(), value };
    value.catch(() => {
      if (this.gasPriceMemo === memo) this.gasPriceMemo = undefined;
    });
    this.gasPriceMemo = memo;
    return value;
  }

  /** One bundle through the shared probe batcher (one eth_call for every simulation in flight together). */
  async probe(job: ProbeJob, probes = this.probes): Promise<ProbeResult> {
    const r = await probes.run(job);
    this.observeBlock(r.block);
    return r;
  }

  get client() {
    return this.deps.chain.public;
  }

  get isFeeRequired() {
    return !this.deps.config.gasless;
  }

  private payee(): Address {
    return this.paymentAddress.toLowerCase() as Address;
  }

  /**
   * Runs a signed bundle exactly as a sender would send it, through the probe: whether it executes, the
   * gas it burns and what each fee token pays the payment address (the dispatcher's run before signing;
   * intake probes in checkCall).
   */
  simulate(sender: Address, entrypoint: Address, input: Hex, nonces: NonceOverride[] = [], trialGas?: bigint, wallets?: Address[], codes?: CodeOverride[]) {
    return this.probe({ sender, entrypoint, input, nonces, gasCap: BigInt(this.deps.config.maxGasLimit), trialGas, codes, wallets }, this.engineProbes);
  }

  /**
   * An EIP-7702 authorization a call brings, checked before anything is accepted: this chain, an accepted
   * implementation, signed by the wallet itself, for the EOA's next account nonce (pending included: a
   * transaction of its own in the pool would void it first), and only with a call of the wallet itself.
   */
  async checkDelegation(auth: Authorization, wallet: string, call: DecodedCall): Promise<void> {
    const w = wallet.toLowerCase() as Address;
    await this.checkDelegationShape(auth, w, call);
    const next = await this.client.getTransactionCount({ address: w, blockTag: 'pending' });
    if (next !== auth.nonce) {
      throw new RelayError('invalidArgument', `authorization.nonce: ${auth.nonce} is not the account nonce of ${getAddress(w)} (${next}); sign the authorization for its next nonce`);
    }
  }

  /** What an authorization must be, known without the chain: with a call of the wallet itself, for this chain, an accepted implementation, signed by the wallet. */
  async checkDelegationShape(auth: Authorization, wallet: string, call: DecodedCall): Promise<void> {
    const w = wallet.toLowerCase() as Address;
    if (call.kind !== 'wallet' || call.entrypoint !== w) {
      throw new RelayError('invalidArgument', 'authorization: only with a call of the delegating wallet itself (contract = walletAddress, its execute)');
    }
    await checkAuthorization(auth, { field: 'authorization', chainId: this.chainId, wallet: w, accepted: this.delegates });
  }

  /** Decodes (syntax and structure only, no node call); `isWallet` decides which execute calls are nested bundles. */
  decode(walletAddress: string, contract: string, input: string, isWallet?: (a: Address) => boolean): DecodedCall {
    if (!isAddress(walletAddress, { strict: false })) throw new RelayError('invalidArgument', `walletAddress "${walletAddress}" is not an address`);
    if (!isAddress(contract, { strict: false })) throw new RelayError('invalidArgument', `contract "${contract}" is not an address`);
    if (!/^0x([0-9a-fA-F]{2})*$/.test(input)) throw new RelayError('invalidArgument', 'input is not 0x-prefixed hex bytes');
    try {
      return decodeCall(this.chainId, this.context, walletAddress.toLowerCase() as Address, contract.toLowerCase() as Address, input as Hex, { isWallet });
    } catch (err) {
      if (err instanceof BundleError) throw new RelayError('invalidArgument', err.message);
      throw err;
    }
  }

  /**
   * Decodes a call against the chain: every address the call treats as a wallet is asked for its code
   * (one batch), and only real Sequence wallets are unfolded. With `strict` (intake), the wallet a
   * wallet-form call targets must be one, and a wallet the call deploys must not exist yet. With
   * `deferSlot`, the wallet a wallet-form call targets, a proxy already known, may come back 'wallet'
   * before its implementation slot is read: it is then in `unverified`, for the caller's probe to read
   * and check (checkCall). Nested wallets and deploys never are: their kinds decide how the call decodes.
   */
  async recognise(
    walletAddress: string,
    contract: string,
    input: string,
    strict: boolean,
    auth?: Authorization | null,
    decoded?: DecodedCall,
    deferSlot = false,
  ): Promise<{ call: DecodedCall; kinds: Map<Address, WalletKind>; unverified: Address[] }> {
    const first = decoded ?? this.decode(walletAddress, contract, input);
    const asked = [...(first.kind === 'wallet' ? [first.entrypoint] : []), ...first.candidates, ...first.deploys];
    const defer = deferSlot && !auth && first.kind === 'wallet' && !first.candidates.includes(first.entrypoint) && !first.deploys.includes(first.entrypoint) ? first.entrypoint : undefined;
    const [{ kinds, unverified }] = await Promise.all([
      recogniseDeferring(this.client, this.context, asked, this.wallets, defer),
      auth ? this.checkDelegation(auth, walletAddress, first) : undefined,
    ]);
    // With the delegation its authorization applies, the EOA runs an accepted wallet implementation.
    if (auth) kinds.set(first.entrypoint, 'wallet');
    if (strict) {
      if (first.kind === 'wallet' && kinds.get(first.entrypoint) !== 'wallet') {
        const kind = kinds.get(first.entrypoint)!;
        throw new RelayError('simulationFailed', kind === 'empty' ? `wallet ${describeKind(first.entrypoint, kind)}` : describeKind(first.entrypoint, kind));
      }
      const existing = first.deploys.find((d) => kinds.get(d) !== 'empty');
      if (existing) throw new RelayError('simulationFailed', `the call deploys wallet ${existing}, which already exists`);
    }
    // Decoded again only when a nested execute targets something that is not a wallet: when every one
    // is, the wallet-aware decode unfolds exactly what the first did (a decode hashes every bundle: it
    // was a tenth of intake's CPU done three times per SendMetaTxn).
    const call = first.candidates.every((a) => kinds.get(a) === 'wallet') ? first : this.decode(walletAddress, contract, input, (a) => kinds.get(a) === 'wallet');
    const upgrade = unknownUpgrade(call, this.context);
    if (upgrade) throw new RelayError('invalidArgument', upgrade);
    return { call, kinds, unverified };
  }

  private async rulesOf(projectId: number | null) {
    return projectId == null ? [] : (await this.deps.sponsors.list(projectId, this.chainId)).filter((r) => r.active);
  }

  /** A cost in wei, and in atto-USD at the native/USD feed's price when there is one (for caps in USD). */
  private async costOf(wei: bigint): Promise<Cost> {
    const p = this.prices.nativeUsd ? await this.prices.nativeUsd() : { ok: false as const, reason: 'the relayer has no nativeUsdFeed' };
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
      ask: { chainId: this.chainId, stage },
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
    const rules = await this.deps.sponsors.list(projectId, this.chainId);
    const gasPrice = await this.client.getGasPrice();
    const decision = await this.sponsorship(projectId, rules, call, { gas, gasPrice, costWei: gas == null ? 1n : gas * gasPrice }, 'check');
    return { decision, rules };
  }

  /** The next nonce of a wallet's space, counting meta-transactions already queued here. */
  async nextNonce(wallet: Address, space: bigint): Promise<bigint> {
    const [onChain] = await readNonces(this.client, [{ wallet, space }]);
    return joinNonce(space, await this.nextAfterQueued(wallet, space, onChain));
  }

  private async nextAfterQueued(wallet: Address, space: bigint, onChain: bigint): Promise<bigint> {
    let next = onChain;
    for (const n of await this.deps.metaTxns.liveNonces(this.chainId, wallet, space, onChain)) {
      if (n === next) next++;
      else if (n > next) break;
    }
    return next;
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
      throw new RelayError('invalidArgument', `simulating the call's ${n} bundles places ${n * codeBytes} bytes of code, over this relayer's ${c.maxOverrideBytes} (maxOverrideBytes): send fewer bundles at once`);
    }
    return n;
  }

  /** The gas each simulation of a caller's FeeOptions or Simulate may burn: less without an access key. */
  simulationGasCap(projectId: number | null): bigint {
    return this.gasCap(projectId == null);
  }

  async feeOptions(projectId: number | null, wallet: string, to: string, data: string, auth?: Authorization | null, decoded?: DecodedCall) {
    const first = decoded ?? this.decode(wallet, to, data);
    this.feeOptionsWork(first);
    this.feeOptionsWork(first, await estimationCodeBytes(this.client, this.chainId));
    const { call, kinds } = await this.recognise(wallet, to, data, false, auth, first);
    // Without a key, each bundle runs with at most the keyless gas limit (as SendMetaTxn's), not maxGasLimit.
    const anonymous = projectId == null;
    const gasCap = this.simulationGasCap(projectId);
    const overCap = (gas: bigint) => new RelayError('simulationFailed', `the call needs about ${gas} gas, over this relayer's limit of ${gasCap}${anonymous ? ' for calls without an access key' : ''}`);
    // Its calldata alone over the limit: refused unsimulated (the node would refuse the eth_call anyway).
    if (intrinsicGas(data as Hex) > gasCap) throw overCap(intrinsicGas(data as Hex));
    const simPrice = await this.gasPriceNow();
    const sims = await Promise.all(call.bundles.map((b) => simulateUnsigned(this.client, this.chainId, b.wallet, b.txs, gasCap, simPrice)));
    sims.forEach((results, i) => {
      const failed = results.findIndex((r, j) => r.executed && !r.succeeded && call.bundles[i].txs[j].revertOnError);
      if (failed >= 0) throw new RelayError('simulationFailed', `transaction ${failed} of wallet ${call.bundles[i].wallet} reverts: ${results[failed].reason}`);
    });
    // A wallet that is neither deployed nor deployed by this call will be by the one the client sends.
    const undeployed = call.bundles.filter((b) => !call.deploys.includes(b.wallet) && kinds.get(b.wallet) === 'empty').length;
    let gas = intrinsicGas(data as Hex) + BigInt(call.deploys.length + undeployed) * DEPLOY_GAS + FEE_TRANSFER_ALLOWANCE + (auth ? AUTHORIZATION_GAS : 0n);
    sims.forEach((results, i) => {
      gas += BUNDLE_OVERHEAD + PER_TX_OVERHEAD * BigInt(call.bundles[i].txs.length);
      for (const r of results) gas += r.gasUsed;
    });
    if (gas > gasCap) throw overCap(gas);
    const gasPrice = await this.gasPriceNow();
    // The gas limit a send of this bundle would be signed with (size): what fees, holds and caps are priced on.
    const limit = this.limitFor(gas);
    let cover = await this.sponsorship(projectId, await this.rulesOf(projectId), call, { gas: limit, gasPrice, costWei: limit * gasPrice }, 'feeOptions');
    // A project's limited balance that cannot cover the bundle stops its sponsorship (balances/holds.ts).
    if (this.deps.balances && cover.sponsored) cover = withBalance(cover, await this.deps.balances.fits(projectId, this.chainId, cover, limit, gasPrice));
    const sponsorship = sponsorshipWire(cover);
    if (!this.isFeeRequired || cover.sponsored) return { options: [], sponsored: cover.sponsored, quote: null, unpriced: [], sponsorship };
    const wei = requiredWei(gas, limit, gasPrice, this.deps.config.feeMarkup);
    const board = await this.prices.prices(this.chainId, this.feeTokens);
    const options = [];
    const unpriced: Array<{ token: FeeTokenConfig; reason: string }> = [];
    const quoted: Record<string, string> = {};
    const used: Record<string, string> = {};
    let block: bigint | null = null;
    for (const t of this.feeTokens) {
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
      options.push({ token: t, to: this.paymentAddress, value, gasLimit: Number(FEE_TRANSFER_ALLOWANCE), price: priceWire(p) });
    }
    if (options.length === 0) {
      throw new RelayError('unavailable', `no fee token has a trustworthy price now, and the bundle is not sponsored (${cover.reason ?? 'no sponsorship'}): ${unpriced.map((u) => `${u.token.symbol}: ${u.reason}`).join('; ')}`);
    }
    const quote = signQuote(this.deps.quoteSecret, {
      v: 1,
      c: this.chainId,
      w: call.bundles[0].wallet,
      k: bundleKey(call, structuralFees(call, this.payee(), this.feeTokens)),
      g: gas.toString(),
      l: limit.toString(),
      o: quoted,
      p: used,
      ...(block !== null ? { b: block.toString() } : {}),
      e: Math.floor(Date.now() / 1000) + this.deps.config.quoteTtlSec,
    });
    return { options, sponsored: false, quote, unpriced: unpriced.map((u) => ({ token: u.token, reason: u.reason })), sponsorship };
  }

  /** Every fee token's price now, as RuntimeStatus and the console show it. */
  async priceStatus() {
    const board = await this.prices.prices(this.chainId, this.feeTokens);
    return this.feeTokens.map((t) => ({ symbol: t.symbol, token: tokenKey(t), ...priceWire(board.get(tokenKey(t)) ?? { ok: false, reason: 'no price' }) }));
  }

  /**
   * Accepts a meta-transaction, in four stages: check it (decode, a fee or a sponsorship present at all,
   * bars — all before any node call; then wallets by their code, nonces, and the exact simulation), size
   * its gas, fund it (a sponsorship within its caps, or a fee read from the calldata that covers the
   * price), and enqueue it within the caller's share of the queue. Nothing is signed here.
   */
  async send(args: SendArgs): Promise<SendResult> {
    const c = this.deps.config;
    const conditions = args.preconditions?.length ? checkPreconditions(args.preconditions, this.chainId, c.maxPreconditions) : null;
    const first = this.decode(args.walletAddress, args.contract, args.input);
    this.decoded.set(args, first);
    const known = await this.deps.metaTxns.find(this.chainId, bareId(first.id));
    if (known && known.status !== 'DROPPED') return { id: known.id, created: false, row: known };
    // A waiting meta-transaction is admitted later from its stored call; an authorization could not
    // outlive the wait anyway (any transaction of the EOA voids it).
    if (conditions && args.authorization) throw new RelayError('invalidArgument', 'authorization: not accepted together with preconditions; delegate first, then send bundles that wait');
    if (args.authorization) {
      await this.checkDelegationShape(args.authorization, args.walletAddress, first);
      // A signer whose delegated call already failed on chain is not relayed another, sponsored or not.
      const bar = await this.deps.bars?.find({ wallet: args.walletAddress, keyId: null, clientIp: null });
      if (bar?.feeToken === LOST_DELEGATION) throw new RelayError('barred', describeBar(bar));
    }
    const rules = await this.rulesOf(args.projectId);
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
    rules ??= await this.rulesOf(args.projectId);
    const checked = await this.check(args);
    const sized = this.size(args, checked);
    // Each webhook is asked once per send, even when the bundle is decided again below.
    const approve = askOnce(this.deps.approveSponsorship);
    const stopped: Stop[] = [];
    for (;;) {
      const funded = await this.fund(args, rules, checked, sized, approve, stopped);
      try {
        return await commit({ call: checked.call, sized, funded });
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
    return (await this.deps.spendCaps.overBudget(err, { chainId: this.chainId, metaTxnId: '', ...f.charge })) ?? err;
  }

  /**
   * Charges a sponsored admission to its rules' budgets as the last statement of the caller's
   * transaction (the transaction throws what admit turns into OverBudget when another intake spent them first).
   */
  async charge(tx: Tx, metaTxnId: string, f: Funding): Promise<void> {
    if (f.charge && this.deps.spendCaps) this.deps.spendCaps.charge(tx, { chainId: this.chainId, metaTxnId, ...f.charge });
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
    const payers = [...new Set(structuralFees(pre.call, this.payee(), this.feeTokens).map((p) => p.wallet))];
    if (payers.length > 1) throw new RelayError('insufficientFee', `fees are paid by ${payers.length} wallets (${payers.join(', ')}); one wallet pays the fee of a meta-transaction`);
    // Unless a sponsorship may cover it, a place in the pool takes a real fee its payer holds now.
    if (this.isFeeRequired && payers[0] && rules.length === 0) {
      const fees = structuralFees(pre.call, this.payee(), this.feeTokens);
      const deps = { client: this.client, prices: this.prices, chainId: this.chainId, feeTokens: this.feeTokens, feeMarkup: this.deps.config.feeMarkup };
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
        const waitSec = keyless ? Math.min(c.preconditionTimeoutSec, c.anonymousPreconditionTimeoutSec) : c.preconditionTimeoutSec;
        const caps = { max: c.maxPendingPreconditions, projectId: args.projectId ?? null, perProject: c.maxPendingPreconditionsPerProject, anonymous: Math.ceil((c.maxPendingPreconditions * c.anonymousPendingPreconditionsPercent) / 100) };
        return waits.insert(q, this.chainId, id, { conditions, deadline: new Date(Date.now() + waitSec * 1000), quote: args.quote ?? null }, caps);
      },
    });
  }

  /** What costs no node call: a fee or a sponsorship must be there at all, and a caller who did not pay before gets no credit. */
  private async precheck(args: SendArgs, call: DecodedCall, rules: SponsorRule[]) {
    if (!this.isFeeRequired) return;
    const payments = structuralFees(call, this.payee(), this.feeTokens);
    if (payments.length === 0 && rules.length === 0) {
      const why = args.projectId == null ? 'no access key: only bundles that pay their own fee are relayed' : 'the project has no active sponsorship on this network';
      throw new RelayError('insufficientFee', `the bundle pays no fee to ${this.paymentAddress} in an accepted fee token (a top-level transfer of its wallet, revertOnError=true; not sponsored: ${why})`);
    }
    if (payments.length > 0 && rules.length === 0) await this.refuseBarred(args, payments[0].wallet);
  }

  /** A fee-paid bundle that calls a contract barred for burning gas it did not pay for is not relayed on the relayer's credit. */
  private async refuseBarredContracts(call: DecodedCall, payments: FeePayment[]) {
    const bars = this.deps.bars;
    if (!bars) return;
    const bar = await bars.findContract(calledContracts(call, payments));
    if (bar) throw new RelayError('barred', describeBar(bar));
  }

  private async refuseBarred(args: SendArgs, payer: Address) {
    const bar = await this.deps.bars?.find({ wallet: payer, keyId: args.keyId ?? null, clientIp: args.clientIp ?? null });
    if (bar) throw new RelayError('barred', describeBar(bar));
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
      this.recognise(args.walletAddress, args.contract, args.input, true, args.authorization, this.decoded.get(args), true),
      this.isFeeRequired ? this.gasPriceNow() : Promise.resolve(0n),
    ]);
    const deployed = new Set(call.deploys);
    // Simulated with the delegation applied, as the type-4 transaction will have it when its call runs.
    const codes = args.authorization ? [{ address: call.entrypoint, code: designator(args.authorization.implementation) }] : undefined;
    const job = { sender: this.senders[0], entrypoint: call.entrypoint, input: args.input as Hex, gasCap: this.gasCap(anonymous), codes, wallets: call.bundles.map((b) => b.wallet) };
    // The slot reads make this run's gas a few gas per call into the wallet dearer (probe-proxy.ts):
    // conservative. The dispatcher simulates again without them before signing.
    const sim = await this.probe({ ...job, nonces: [], reads: call.bundles.map((b) => ({ wallet: b.wallet, space: b.space })), slotReads: unverified });
    for (const [i, w] of unverified.entries()) {
      // Remembered for this block either way: other sends of the wallet need no read.
      this.wallets.learn(w, sim.slots[i], sim.block);
      if (slotKind(this.context, sim.slots[i]) !== 'wallet') throw new RelayError('simulationFailed', describeKind(w, 'other'));
    }
    const chainNonces = sim.chainNonces;
    const window = BigInt(this.deps.config.maxNonceAhead);
    for (const [i, b] of call.bundles.entries()) {
      if (b.nonce < chainNonces[i]) {
        throw new RelayError('simulationFailed', `BadNonce: nonce ${b.nonce} of space ${b.space} is already used (wallet ${b.wallet} is at ${chainNonces[i]})`);
      }
      if (b.nonce - chainNonces[i] > window) {
        const next = await this.nextAfterQueued(b.wallet, b.space, chainNonces[i]);
        if (b.nonce > next + window) {
          throw new RelayError('invalidArgument', `nonce ${b.nonce} of space ${b.space} is too far ahead: wallet ${b.wallet} is at ${next} counting queued meta-transactions, and at most ${window} ahead is accepted`);
        }
      }
    }
    const overrides: NonceOverride[] = call.bundles
      .filter((b, i) => b.nonce > chainNonces[i] && !deployed.has(b.wallet))
      .map((b) => ({ wallet: b.wallet, space: b.space, nonce: b.nonce }));
    return { call, gasPrice, anonymous, job, first: sim, overrides };
  }

  /** The exact call simulated from a sender: the first probe's run, or again with predecessors' nonces set when it is ahead of the chain. */
  private async simulateCall(pre: Awaited<ReturnType<ChainRelayer['checkCall']>>) {
    return pre.overrides.length > 0 ? this.probe({ ...pre.job, nonces: pre.overrides }) : pre.first;
  }

  private gasCap(anonymous: boolean): bigint {
    const c = this.deps.config;
    return BigInt(anonymous ? Math.min(c.anonymousMaxGasLimit, c.maxGasLimit) : c.maxGasLimit);
  }

  /** The gas limit sized from a gas figure that includes the intrinsic cost: room for 63/64 forwarding, times the margin. */
  private limitFor(gas: bigint): bigint {
    return ceilMul((gas * 64n) / 63n + 1n, this.deps.config.gasMargin);
  }

  private size(args: SendArgs, { sim, anonymous }: Checked) {
    const intrinsic = intrinsicGas(args.input as Hex) + (args.authorization ? AUTHORIZATION_GAS : 0n);
    const used = intrinsic + sim.gasUsed;
    // The probe ran the bundle again with gasUsed × gasMargin and saw it execute, so the limit below
    // (which leaves the entrypoint at least that) is proven enough; only when that trial failed does the
    // node's eth_estimateGas (sim.estimate) have a say.
    const needed = [sim.estimate ?? 0n, intrinsic + (sim.gasUsed * 64n) / 63n + 1n].reduce((a, b) => (a > b ? a : b));
    const gasLimit = ceilMul(needed, this.deps.config.gasMargin);
    const cap = this.gasCap(anonymous);
    if (gasLimit > cap) {
      throw new RelayError('simulationFailed', `the bundle needs ${gasLimit} gas, over this relayer's limit of ${cap}${anonymous ? ' for calls without an access key' : ''}`);
    }
    return { used, gasLimit };
  }

  /**
   * Sponsored within every limit of the covering rules (charged when it is queued), or paid by a fee
   * read from the calldata. Over a rule's limit, a bundle is not sponsored: it then has to pay like any other.
   */
  private async fund(args: SendArgs, rules: SponsorRule[], { call, sim, gasPrice }: Checked, { used, gasLimit }: Sized, approve: SponsorApprover, stopped: Stop[]): Promise<Funding> {
    const none: Funding = { sponsored: false, sponsorId: null, feeToken: null, feeValue: null, feePayer: null, charge: null, refund: async () => {} };
    if (!this.isFeeRequired) return none;
    // Caps, holds and charges are on the gas limit that will be signed (the worst case), not on what the
    // simulation used: the charge is settled to the real cost once mined (spend-caps.ts).
    const worst = gasLimit * gasPrice;
    let cover = await this.sponsorship(args.projectId, rules, call, { gas: gasLimit, gasPrice, costWei: worst }, 'send', approve, stopped);
    let refund = async () => {};
    // A project's limited balance holds what the bundle may cost, or it is not sponsored (balances/holds.ts).
    if (this.deps.balances && cover.sponsored) {
      const held = await this.deps.balances.hold(cover, refund, { projectId: args.projectId, chainId: this.chainId, metaTxnId: bareId(call.id), gasLimit, gasPrice });
      cover = withBalance(cover, held.cover);
      refund = held.refund;
    }
    if (cover.sponsored) {
      const cost = await this.costOf(worst);
      // Covered up to the hold's price room (balances/holds.ts): beyond it, what it cost is a shortfall.
      const coverWei = worst * HOLD_PRICE_FACTOR;
      return { ...none, sponsored: true, sponsorId: cover.ruleIds[0] ?? null, charge: { ruleIds: cover.ruleIds, wallets: cover.wallets, cost }, refund, gasPricePriced: gasPrice, coverWei };
    }
    const payments = structuralFees(call, this.payee(), this.feeTokens);
    const payers = [...new Set(payments.map((p) => p.wallet))];
    if (payers.length > 1) throw new RelayError('insufficientFee', `fees are paid by ${payers.length} wallets (${payers.join(', ')}); one wallet pays the fee of a meta-transaction`);
    if (payers[0]) await this.refuseBarred(args, payers[0]);
    await this.refuseBarredContracts(call, payments);
    const paid = await this.checkPayment(call, payments, sim.paid, used, gasLimit, gasPrice, args.quote, cover.reason);
    return { ...none, feeToken: paid.token, feeValue: paid.value, feePayer: payers[0], gasPricePriced: gasPrice, coverWei: paid.coverWei };
  }

  private async enqueue(args: SendArgs, call: DecodedCall, { used, gasLimit }: Sized, f: Funding, extra: Pick<NewMetaTxn, 'status' | 'also'> = {}): Promise<SendResult> {
    const c = this.deps.config;
    try {
      const { row, created } = await this.deps.metaTxns.insert(
        {
          chainId: this.chainId,
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
          ...extra,
        },
        { perWallet: c.maxQueuedPerWallet, perKey: c.maxQueuedPerKey, perAddress: c.maxQueuedPerAddress },
        // The sponsorship is charged in the transaction that queues the meta-transaction: both or neither.
        f.charge ? (tx, r) => this.charge(tx, r.id, f) : undefined,
      );
      if (created) this.deps.onQueued?.();
      // Already there (sent twice): what this send held of a project balance goes back.
      else await f.refund();
      return { id: row.id, created, row };
    } catch (err) {
      if (err instanceof NonceTaken || err instanceof QueueFull) throw new RelayError('conflict', err.message);
      throw err;
    }
  }

  /**
   * The fee the calldata pays must cover the quote it brings, or the current price when it brings none;
   * and the simulation must see it arrive (a fee token whose transfer does not move what it says is not paid).
   */
  private async checkPayment(call: DecodedCall, payments: FeePayment[], simPaid: bigint[], gasUsed: bigint, gasLimit: bigint, gasPrice: bigint, quote: string | undefined, whyNotSponsored?: string) {
    const totals = feeTotals(payments);
    const offers = this.feeTokens.map((t, i) => ({ token: t, key: tokenKey(t), paid: totals.get(tokenKey(t)) ?? 0n, arrived: simPaid[i] ?? 0n })).filter((o) => o.paid > 0n);
    const unsponsored = whyNotSponsored ? ` (not sponsored: ${whyNotSponsored})` : '';
    if (offers.length === 0) {
      throw new RelayError('insufficientFee', `the bundle pays no fee to ${this.paymentAddress} in an accepted fee token (a top-level transfer of its wallet, revertOnError=true)${unsponsored}`);
    }
    let quoted: Record<string, string> | undefined;
    if (quote) {
      const check = verifyQuote(this.deps.quoteSecret, quote);
      if (!check.ok) throw new RelayError('insufficientFee', check.reason);
      const q = check.payload;
      if (q.c !== this.chainId) throw new RelayError('insufficientFee', `the quote is for chain ${q.c}`);
      if (q.w !== call.bundles[0].wallet) throw new RelayError('insufficientFee', `the quote is for wallet ${q.w}, not ${call.bundles[0].wallet}`);
      if (q.k !== bundleKey(call, payments)) throw new RelayError('insufficientFee', 'the quote was issued for different transactions');
      // A bundle that turns out to need a larger gas limit than quoted is priced now instead.
      if (gasLimit <= BigInt(q.l ?? q.g)) quoted = q.o;
    }
    const wei = requiredWei(gasUsed, gasLimit, gasPrice, this.deps.config.feeMarkup);
    const board = await this.prices.prices(this.chainId, this.feeTokens);
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
      const cost = weiToToken(gasLimit * gasPrice, o.token, now.price);
      if (o.paid < cost) {
        best = `${o.token.symbol}: paid ${o.paid} as quoted, but its gas limit of ${gasLimit} alone now costs ${cost} at the current price`;
        continue;
      }
      if (o.arrived < o.paid) throw new RelayError('insufficientFee', `the ${o.token.symbol} fee of ${o.paid} does not arrive in simulation (${o.arrived} did)`);
      return { token: o.key, value: o.paid, coverWei: tokenToWei(o.paid, o.token, now.price) };
    }
    throw new RelayError('insufficientFee', best.includes(' is not accepted now') ? `the fee is not accepted: ${best}${unsponsored}` : `the fee paid is too low (${best})${unsponsored}`);
  }
}

type Checked = Awaited<ReturnType<ChainRelayer['check']>>;
type Sized = ReturnType<ChainRelayer['size']>;

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
}

/** What admission decided: the decoded call, its gas and how it is paid for. */
export interface Admission {
  call: DecodedCall;
  sized: { used: bigint; gasLimit: bigint };
  funded: Funding;
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

export interface SendArgs {
  projectId: number | null;
  /** The access key's id, for the per-key share of the queue and bars. */
  keyId?: number | null;
  /** The caller's address (IP), for the per-address share of the queue and bars. */
  clientIp?: string | null;
  walletAddress: string;
  contract: string;
  input: string;
  quote?: string;
  /** Wait in PENDING_PRECONDITION until these hold (checked once per block); DROPPED after preconditionTimeoutSec. */
  preconditions?: PreconditionInput[];
  /** EIP-7702: the EOA `walletAddress` delegates to an accepted wallet implementation in the transaction that carries this bundle. */
  authorization?: Authorization | null;
}

const UPDATE_IMPLEMENTATION = '0x025b22bc';



/**
 * A wallet switching its own implementation to code this relayer does not know: every later bundle of
 * it would run that code, which no longer has to honour signatures, nonces or fees. Not relayed.
 */
function unknownUpgrade(call: DecodedCall, context: SequenceContext): string | null {
  const known = new Set([context.mainModule, context.mainModuleUpgradable].map((a) => a.toLowerCase()));
  for (const l of call.leaves) {
    if (l.delegateCall || l.target !== l.executor || selectorOf(l.data) !== UPDATE_IMPLEMENTATION) continue;
    const to = `0x${l.data.slice(-40)}`.toLowerCase();
    if (!known.has(to)) return `wallet ${l.executor} switches its implementation to ${to}, which is not a Sequence main module this relayer knows`;
  }
  return null;
}
