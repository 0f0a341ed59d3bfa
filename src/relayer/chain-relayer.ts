import { getAddress, parseEther, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { Tx } from '../store/db.ts';
import type { RelayerChain, RelayerDeps } from './chain-view.ts';
import { SEQUENCE_V2_CONTEXT, type SequenceContext } from './context.ts';
import { senderAccounts } from './engine/sender-pool.ts';
import { StaleState } from './errors.ts';
import { pauseAbout } from '../util/ask-again.ts';
import { blockGone } from '../chain/block-gone.ts';
import { STALE_PAUSE_MS } from './intake/ask-again.ts';
import type { Authorization } from './intake/authorization.ts';
import { joinNonce, type DecodedCall } from './intake/bundle.ts';
import { probeTokens, type FeeTokenConfig, type PriceSource } from './intake/fees.ts';
import { Intake, type SendArgs, type SendResult } from './intake/intake.ts';
import { PriceBook } from '../prices/index.ts';
import { Pricing, type Admission, type Funding } from './intake/pricing.ts';
import { ProbeBatcher } from './intake/probe-batch.ts';
import { feePolicyOf, marketFees, type FeePolicy } from './engine/gas-price.ts';
import type { RunAs } from './intake/run-as.ts';
import { intrinsicGas, probeAddress, type CodeOverride, type NonceOverride, type ProbeJob, type ProbeResult } from './intake/simulate.ts';
import type { SponsorRule } from './intake/sponsors.ts';
import { WalletCache, type WalletKind } from './intake/wallets.ts';
import { WalletRecognition } from './chain-relayer/recognise.ts';
import { readNonces } from './nonces.ts';
import { feeModelFor, hexBytes, l1FeeUpperBound, unsignedTxSize, type FeeModelName } from './fee-model.ts';

export type { RelayerDeps } from './chain-view.ts';
export type { SendArgs, SendResult } from './intake/intake.ts';
export type { Admission, Funding } from './intake/pricing.ts';
export { sponsorshipWire } from './intake/pricing.ts';

/**
 * Simulations, whose results a gas limit is signed on, are tried longer: 10 runs within about 3 s (a
 * node a block behind catches up within a block time), each pinned run a fresh chance at another node.
 */
const STALE_RUNS = 10;
const STALE_PAUSE_MAX_MS = 400;
/** Who asks the node for a call's L1 gas (Arbitrum): an address with no code, never a sender. */
const L1_GAS_PROBE: Address = '0x000000000000000000000000000000000000dEaD';

/** Runtime code returning block.number (NUMBER, MSTORE at 0, RETURN 32 bytes): asks whether the node takes block overrides. */
const NUMBER_CODE: Hex = '0x4360005260206000f3';
const OVERRIDE_CHECK_NUMBER = 0x7ffffffen;

/** A sender lent a balance for its simulations is said so in the log at most this often. */
const FUNDED_LOG_MS = 600_000;

/** A gas price read for intake is reused until a newer block is seen, and never for longer than this. */
const GAS_PRICE_MAX_AGE_MS = 2_000;

/** A value read once per block seen and reused until a newer block is seen (never for longer than GAS_PRICE_MAX_AGE_MS); a failed read is forgotten. */
class BlockMemo<T> {
  private memo?: { block: bigint; at: number; value: Promise<T> };

  get(seen: bigint, read: () => Promise<T>): Promise<T> {
    const m = this.memo;
    if (m && m.block >= seen && Date.now() - m.at < GAS_PRICE_MAX_AGE_MS) return m.value;
    const memo = { block: seen, at: Date.now(), value: read() };
    memo.value.catch(() => {
      if (this.memo === memo) this.memo = undefined;
    });
    this.memo = memo;
    return memo.value;
  }
}

/**
 * One relayer per configured network: the per-chain context both stages use (addresses, fee tokens,
 * the node, simulations, wallet recognition, nonces), and the doors to intake (intake/intake.ts) and
 * pricing (intake/pricing.ts). Sending is the dispatcher's job (engine/).
 */
export class ChainRelayer implements RelayerChain {
  readonly chainId: number;
  readonly context: SequenceContext;
  readonly senders: Address[];
  readonly paymentAddress: Address;
  readonly feeTokens: readonly FeeTokenConfig[];
  readonly prices: PriceSource;

  /** Wallet proxies seen (their code never changes) and implementation slots of the current block. */
  readonly wallets: WalletCache;
  /** Wallet implementations an EOA may delegate to (EIP-7702), lower case. */
  readonly delegates: readonly Address[];
  /** Decodes calls and recognises their wallets on the node, at the block seen when it is behind. */
  private readonly recognition: WalletRecognition;
  /** Concurrent simulations of this chain, sent to the node together. */
  private readonly probes: ProbeBatcher;
  /** ... those of the dispatcher, apart from intake's. */
  private readonly engineProbes: ProbeBatcher;
  /** The stages: a SendMetaTxn from request to queue, and what a bundle costs and who pays it. */
  readonly pricing: Pricing;
  readonly intake: Intake;
  private seenBlock = -1n;
  /** A check in flight of whether the chain went back below the block seen (lowerSeen). */
  private lowering?: Promise<void>;

  private readonly gasPriceMemo = new BlockMemo<bigint>();
  private readonly runAsMemo = new BlockMemo<RunAs>();
  /** When it was last said that a sender's simulations were lent a balance (runAs onFunded). */
  private readonly fundedSaid = new Map<Address, number>();
  /** Whether the node takes eth_call block overrides (asked once). */
  private blockOverrides?: Promise<boolean>;
  /** The fees the dispatcher signs with (its FeePolicy), which simulations run at too. */
  readonly feePolicy: FeePolicy;
  /** The L1 fee bounds read for the block seen, by transaction size (an OP-stack oracle changes once per L1 block at most). */
  private l1BoundMemo?: { block: bigint; at: number; bySize: Map<number, Promise<bigint>> };
  readonly feeModel: FeeModelName;

  constructor(private readonly deps: RelayerDeps) {
    const c = deps.config;
    this.chainId = deps.chain.chainId;
    this.feeModel = deps.feeModel ?? feeModelFor(this.chainId);
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
    this.prices =
      deps.prices ??
      new PriceBook(
        deps.chain,
        { tokens: c.feeTokens, nativeUsdFeed: c.nativeUsdFeed, wrappedNative: c.wrappedNative, pollMs: c.pollMs },
        { gauges: deps.metrics && { unpriced: deps.metrics.relayFeeTokenUnpriced, price: deps.metrics.relayFeeTokenPrice }, log: deps.log, what: 'fee token' },
      );
    this.feePolicy = feePolicyOf(c, this.feeModel === 'legacy');
    this.delegates = c.delegatedWallets.map((a) => a.toLowerCase() as Address);
    this.wallets = new WalletCache(deps.chain.public, this.delegates);
    this.recognition = new WalletRecognition(this);
    const probeSettings = {
      payee: this.paymentAddress.toLowerCase() as Address,
      tokens: probeTokens(this.feeTokens),
      // The trial run gets gasUsed × gasMargin: what the gas limit sized from it leaves the entrypoint at least.
      trialBps: BigInt(Math.floor(c.gasMargin * 10_000)),
      // Simulated as the transaction will run: its fees, the real sender's balance, the next block (run-as.ts).
      runAs: () => this.runAs(),
      alwaysEstimate: this.feeModel === 'arbitrum',
    };
    // The shared head took a lower head: perhaps the chain went back below the block seen (see lowerSeen).
    deps.chain.head.onWentBack((h) => void this.lowerSeen(h.number));
    this.probes = new ProbeBatcher(deps.chain.public, probeSettings);
    // The dispatcher's runs before signing go out on the engine's own client (chain/client.ts NodeRole).
    this.engineProbes = new ProbeBatcher(deps.chain.forRole('engine'), probeSettings);
    this.pricing = new Pricing(this, deps);
    this.intake = new Intake(this, this.pricing, deps);
  }

  /**
   * The block seen goes down to `head` only when the chain really went back below it (a deep reorg, a dev
   * node reverted): those blocks are gone, and a simulation pinned to one would be refused by every node
   * for good. A head read lower three times in a row (what the shared head takes as gone back) may still
   * be a node behind met three times by a load balancer; a block seen lowered on its word let a node
   * behind's runs be signed on, at intake and before sending (a wallet deployed a block ago has no code
   * there, its bundle "needs" next to no gas, and the transaction signed with that limit reverted on
   * chain at the relayer's expense). So the block at the height seen is asked for first (blockGone).
   */
  lowerSeen(head: bigint): Promise<void> {
    if (head >= this.seenBlock) return Promise.resolve();
    this.lowering ??= (async () => {
      const seen = this.seenBlock;
      if (!(await blockGone(this.client, seen))) return;
      const top = this.deps.chain.head.current?.number ?? head;
      if (this.seenBlock !== seen || top >= seen) return;
      this.deps.log.info({ chainId: this.chainId, seen: seen.toString(), head: top.toString() }, 'the chain went back below the block seen');
      this.seenBlock = top;
    })().finally(() => {
      this.lowering = undefined;
    });
    return this.lowering;
  }

  /** The newest block seen (-1 before any): reads that must not go back in time are pinned to at least it. */
  get seen(): bigint {
    return this.seenBlock;
  }

  /** A block seen by a simulation or the dispatcher: per-block caches (gas price, wallet slots) move on. */
  observeBlock(block: bigint | number) {
    const b = BigInt(block);
    if (b > this.seenBlock) this.seenBlock = b;
    this.wallets.observe(b);
  }

  /** The node's gas price, read at most once per block seen (and per GAS_PRICE_MAX_AGE_MS), not per request. */
  gasPriceNow(): Promise<bigint> {
    return this.gasPriceMemo.get(this.seenBlock, () => this.client.getGasPrice());
  }

  /**
   * How simulations run now, like the transaction that will be mined (intake/run-as.ts): the fees of the
   * dispatcher's first attempt (fee history, read at most once per block seen), senders' own balances at
   * that block, and the next block's base fee and number where the node takes block overrides.
   */
  runAs(): Promise<RunAs> {
    return this.runAsMemo.get(this.seenBlock, async (): Promise<RunAs> => {
      const [market, overrides] = await Promise.all([marketFees(this.client, this.feePolicy), this.takesBlockOverrides()]);
      const fees = market.type === 'legacy' ? { gasPrice: market.gasPrice } : { maxFeePerGas: market.maxFeePerGas, maxPriorityFeePerGas: market.maxPriorityFeePerGas };
      const top = [this.seenBlock, this.deps.chain.head.current?.number ?? -1n].reduce((a, b) => (a > b ? a : b));
      const nextBlock = market.nextBlock ?? (top >= 0n ? top + 1n : (await this.deps.chain.head.number()) + 1n);
      const balances = new Map<Address, Promise<bigint>>();
      return {
        sender: this.senders[0],
        fees,
        next: overrides ? { number: nextBlock, baseFeePerGas: market.nextBaseFee } : undefined,
        balanceOf: (a) => {
          const k = a.toLowerCase() as Address;
          let b = balances.get(k);
          if (!b) {
            b = this.client.getBalance({ address: k });
            b.catch(() => balances.delete(k));
            balances.set(k, b);
          }
          return b;
        },
        onFunded: (sender, has, need) => {
          // Said at most every FUNDED_LOG_MS per sender: its simulations' sender balance is not its real one (a tell).
          const k = sender.toLowerCase() as Address;
          if (Date.now() - (this.fundedSaid.get(k) ?? -Infinity) < FUNDED_LOG_MS) return;
          this.fundedSaid.set(k, Date.now());
          this.deps.log.info(
            { chainId: this.chainId, sender, balance: has.toString(), lent: need.toString() },
            'a sender cannot buy the gas its simulations are given: they run with exactly that balance lent by state override',
          );
        },
      };
    });
  }

  /**
   * Whether the node runs an eth_call with block overrides (geth, anvil, reth do): asked once with a call
   * reading NUMBER under an override. A node that refuses or ignores them gets none (simulations then see
   * the latest block's base fee and number), said once in the log.
   */
  takesBlockOverrides(): Promise<boolean> {
    this.blockOverrides ??= (async () => {
      const at = probeAddress();
      const r = await this.client.call({ to: at, stateOverride: [{ address: at, code: NUMBER_CODE }], blockOverrides: { number: OVERRIDE_CHECK_NUMBER } }).catch(() => undefined);
      const ok = r?.data !== undefined && r.data !== '0x' && BigInt(r.data) === OVERRIDE_CHECK_NUMBER;
      if (!ok) this.deps.log.info({ chainId: this.chainId }, "the node takes no eth_call block overrides: simulations see the latest block's base fee and number, not the next block's");
      return ok;
    })();
    return this.blockOverrides;
  }

  l1FeeBound(input: string, withAuthorization = false): Promise<bigint> {
    if (this.feeModel !== 'opStack') return Promise.resolve(0n);
    const size = unsignedTxSize(hexBytes(input), withAuthorization);
    let m = this.l1BoundMemo;
    if (!m || m.block < this.seenBlock || Date.now() - m.at >= GAS_PRICE_MAX_AGE_MS) {
      m = { block: this.seenBlock, at: Date.now(), bySize: new Map() };
      this.l1BoundMemo = m;
    }
    const memo = m;
    let value = memo.bySize.get(size);
    if (!value) {
      value = l1FeeUpperBound(this.client, size);
      value.catch(() => memo.bySize.delete(size));
      memo.bySize.set(size, value);
    }
    return value;
  }

  async l1Gas(input: string): Promise<bigint> {
    if (this.feeModel !== 'arbitrum') return 0n;
    // A call carrying the same calldata to an account without code: the node's estimate is the intrinsic
    // gas plus the L1 component (Arbitrum counts the poster's cost as gas); the rest is that component.
    const est = await this.client.estimateGas({ account: L1_GAS_PROBE, to: L1_GAS_PROBE, data: input as Hex });
    const rest = est - intrinsicGas(input as Hex);
    return rest > 0n ? rest : 0n;
  }

  /**
   * One bundle through the shared probe batcher (one eth_call for every simulation in flight together),
   * never answered from a block older than one this relayer has seen. Its gas, nonces and verdict are
   * what a gas limit is signed on: a run on a node behind (load-balanced providers answer from nodes a
   * block or two apart) may predate a wallet the relayer deployed, where the bundle's call reaches no
   * code and "needs" next to no gas. Such a run is made again pinned to the block seen, which a node
   * behind refuses instead of answering; if no node gives that block within the tries, StaleState.
   */
  async probe(job: ProbeJob, probes = this.probes): Promise<ProbeResult> {
    let pinned = false;
    let wentBack = false;
    let last: { block: bigint; err?: unknown } | undefined;
    for (let attempt = 1; ; attempt++) {
      if (attempt > STALE_RUNS) {
        // Unless the chain itself went back below the block seen: the shared head takes a lower head once
        // read so several times in a row, and the block seen follows it once its block is gone (lowerSeen).
        // Tried again from the start, once.
        const seen = this.seenBlock;
        const head = await this.deps.chain.head.read().catch(() => undefined);
        if (!wentBack && head) await this.lowerSeen(head.number);
        if (wentBack || this.seenBlock >= seen) throw new StaleState(this.chainId, seen, last?.block, last?.err);
        wentBack = true;
        pinned = false;
        attempt = 0;
        continue;
      }
      if (attempt > 1) await pauseAbout(Math.min(STALE_PAUSE_MS * (attempt - 2), STALE_PAUSE_MAX_MS));
      let r: ProbeResult;
      try {
        // Pinned, not re-read at latest: a retry in step with a round robin (a head read, a run) would
        // land on the node behind every time, and its latest is the old state again.
        r = await probes.run(pinned ? { ...job, block: this.seenBlock } : job);
      } catch (err) {
        // At latest, the node's failure is the caller's to handle, as before; pinned, it is most often a
        // node behind refusing the block, and another may have it.
        if (!pinned) throw err;
        last = { block: last?.block ?? -1n, err };
        continue;
      }
      if (r.block < this.seenBlock) {
        this.deps.log.debug(
          { chainId: this.chainId, attempt, ran: r.block.toString(), seen: this.seenBlock.toString() },
          'simulation answered from a block behind the one seen: run again at that block',
        );
        pinned = true;
        last = { block: r.block };
        continue;
      }
      // Failed on a block older than the head: the caller may act on a block this relayer has not seen
      // yet (funds that arrived, a wallet deployed elsewhere), read from a node that has it. Once more on it.
      if (!r.ok && attempt <= 2) {
        const head = await this.deps.chain.head.number().catch(() => r.block);
        if (head > r.block) {
          this.observeBlock(head);
          continue;
        }
      }
      this.observeBlock(r.block);
      return r;
    }
  }

  get client() {
    return this.deps.chain.public;
  }

  /** The chain's head and recent headers, shared with the process's other readers (chain/head.ts). */
  get chainHead() {
    return this.deps.chain.head;
  }

  /** The client FeeOptions and Simulate run a caller's simulations on: keyless callers' have their own (chain/client.ts NodeRole). */
  simulationClient(anonymous: boolean) {
    return anonymous ? this.deps.chain.forRole('keyless') : this.deps.chain.public;
  }

  get isFeeRequired() {
    return !this.deps.config.gasless;
  }

  // What readers outside the stages are told (the RPC and console methods, health.ts); the rest of deps stays here.
  /** The network's name, as errors and wire answers give it. */
  get network(): string {
    return this.deps.chain.name;
  }
  /** Whether the node answers now (chain/health.ts): while it does not, health shows the sweep's last reads. */
  get nodeUp(): boolean {
    return this.deps.chain.health.ok;
  }
  /** Work arrived for this chain: a local dispatcher (and preconditions checker) looks at it now, not at its next poll. */
  wake(): void {
    this.deps.onQueued?.();
  }
  /** How long GetMetaTxnReceipt holds a request for a meta-transaction not final yet. */
  get receiptWaitMs(): number {
    return this.deps.config.receiptWaitMs;
  }
  /** Whether the native token has a USD feed here (sponsorship caps in USD need one). */
  get usdPriced(): boolean {
    return this.deps.config.nativeUsdFeed !== undefined;
  }
  get feeMarkup(): number {
    return this.deps.config.feeMarkup;
  }
  /** The sender balance floor, in wei: a sender below it takes no new work. */
  get minSenderBalance(): bigint {
    return parseEther(this.deps.config.minSenderBalance);
  }
  /** The treasury that tops senders up (engine/refill.ts); null when no refill is configured. */
  get treasury(): Address | null {
    const refill = this.deps.config.refill;
    return refill ? privateKeyToAccount(refill.treasuryKey as Hex).address : null;
  }

  payee(): Address {
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

  // Wallet recognition (chain-relayer/recognise.ts), for intake, pricing and the dispatcher.
  checkDelegation(auth: Authorization, wallet: string, call: DecodedCall): Promise<void> {
    return this.recognition.checkDelegation(auth, wallet, call);
  }
  checkDelegationShape(auth: Authorization, wallet: string, call: DecodedCall): Promise<void> {
    return this.recognition.checkDelegationShape(auth, wallet, call);
  }
  decode(walletAddress: string, contract: string, input: string, isWallet?: (a: Address) => boolean): DecodedCall {
    return this.recognition.decode(walletAddress, contract, input, isWallet);
  }
  recognise(...a: Parameters<WalletRecognition['recognise']>): Promise<{ call: DecodedCall; kinds: Map<Address, WalletKind>; unverified: Address[] }> {
    return this.recognition.recognise(...a);
  }

  /** The next nonce of a wallet's space, counting meta-transactions already queued here. */
  async nextNonce(wallet: Address, space: bigint): Promise<bigint> {
    const [onChain] = await readNonces(this.client, [{ wallet, space }]);
    return joinNonce(space, await this.nextAfterQueued(wallet, space, onChain));
  }

  async nextAfterQueued(wallet: Address, space: bigint, onChain: bigint): Promise<bigint> {
    let next = onChain;
    for (const n of await this.deps.metaTxns.liveNonces(this.chainId, wallet, space, onChain)) {
      if (n === next) next++;
      else if (n > next) break;
    }
    return next;
  }

  /** The gas each simulation of a caller's FeeOptions or Simulate may burn: less without an access key. */
  simulationGasCap(projectId: number | null): bigint {
    return this.gasCap(projectId == null);
  }

  gasCap(anonymous: boolean): bigint {
    const c = this.deps.config;
    return BigInt(anonymous ? Math.min(c.anonymousMaxGasLimit, c.maxGasLimit) : c.maxGasLimit);
  }

  // The stages' doors (kept here so callers hold one object per chain).
  feeOptions(...a: Parameters<Pricing['feeOptions']>) {
    return this.pricing.feeOptions(...a);
  }
  feeOptionsWork(...a: Parameters<Pricing['feeOptionsWork']>) {
    return this.pricing.feeOptionsWork(...a);
  }
  priceStatus() {
    return this.pricing.priceStatus();
  }
  checkSponsorship(...a: Parameters<Pricing['checkSponsorship']>) {
    return this.pricing.checkSponsorship(...a);
  }
  send(args: SendArgs): Promise<SendResult> {
    return this.intake.send(args);
  }
  admit<T>(args: SendArgs, rules: SponsorRule[] | undefined, commit: (a: Admission) => Promise<T>): Promise<T> {
    return this.intake.admit(args, rules, commit);
  }
  clientNetOf(args: Pick<SendArgs, 'clientIp'>): string | null {
    return this.intake.clientNetOf(args);
  }

  charge(tx: Tx, metaTxnId: string, f: Funding, args: Pick<SendArgs, 'keyId' | 'clientIp'>): Promise<void> {
    return this.intake.charge(tx, metaTxnId, f, args);
  }
}
