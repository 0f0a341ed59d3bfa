import { getAddress, isAddress, type Address, type Hex } from 'viem';
import type { ChainClient } from '../chain/client.ts';
import type { ChainConfig } from '../config/schema.ts';
import type { Logger } from '../telemetry/logger.ts';
import { readNonces } from './nonces.ts';
import { BundleError, bareId, decodeCall, joinNonce, type DecodedCall } from './bundle.ts';
import { SEQUENCE_V2_CONTEXT, type SequenceContext } from './context.ts';
import { RelayError } from './errors.ts';
import { ceilMul, fixedPrices, gasCost, probeTokens, tokenKey, weiToToken, type FeeTokenConfig, type PriceSource } from './fees.ts';
import { signQuote, verifyQuote } from './quote.ts';
import { senderAccounts } from './sender-pool.ts';
import { simulateExact, simulateUnsigned, intrinsicGas, type NonceOverride } from './simulate.ts';
import { bundleKey, coverage, type SponsorRepo } from './sponsors.ts';
import type { SpendCaps } from './spend-caps.ts';
import { NonceTaken, type MetaTxnRepo, type MetaTxnRow } from './store.ts';

export type RelayerChainConfig = NonNullable<ChainConfig['relayer']>;

/** Per-call overheads the gas-estimation module does not see (signature check, nonce, events, the fee transfer). */
const BUNDLE_OVERHEAD = 45_000n;
const PER_TX_OVERHEAD = 8_000n;
const DEPLOY_GAS = 110_000n;
const FEE_TRANSFER_ALLOWANCE = 60_000n;

export interface RelayerDeps {
  chain: ChainClient;
  config: RelayerChainConfig;
  quoteSecret: string;
  metaTxns: MetaTxnRepo;
  sponsors: SponsorRepo;
  /** Daily spend caps of sponsorship rules; without it, rules have no cap. */
  spendCaps?: SpendCaps;
  log: Logger;
  prices?: PriceSource;
  /** Wakes the dispatcher when work arrives. */
  onQueued?: () => void;
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
  private readonly feeTokenSet: ReadonlySet<string>;
  private readonly prices: PriceSource;

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
    this.feeTokenSet = new Set(c.feeTokens.filter((t) => t.address).map((t) => t.address!.toLowerCase()));
    this.prices = deps.prices ?? fixedPrices;
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
   * gas it burns and what each fee token pays the payment address (intake, and again before signing).
   */
  simulate(sender: Address, entrypoint: Address, input: Hex, nonces: NonceOverride[] = []) {
    return simulateExact(this.client, {
      sender,
      entrypoint,
      input,
      payee: this.payee(),
      tokens: probeTokens(this.feeTokens),
      nonces,
      gasCap: BigInt(this.deps.config.maxGasLimit),
    });
  }

  decode(walletAddress: string, contract: string, input: string): DecodedCall {
    if (!isAddress(walletAddress, { strict: false })) throw new RelayError('invalidArgument', `walletAddress "${walletAddress}" is not an address`);
    if (!isAddress(contract, { strict: false })) throw new RelayError('invalidArgument', `contract "${contract}" is not an address`);
    if (!/^0x([0-9a-fA-F]{2})*$/.test(input)) throw new RelayError('invalidArgument', 'input is not 0x-prefixed hex bytes');
    try {
      return decodeCall(this.chainId, this.context, walletAddress.toLowerCase() as Address, contract.toLowerCase() as Address, input as Hex);
    } catch (err) {
      if (err instanceof BundleError) throw new RelayError('invalidArgument', err.message);
      throw err;
    }
  }

  private async sponsorship(projectId: number | null, call: DecodedCall) {
    if (projectId == null) return { sponsored: false as const, ruleIds: [] as number[], reason: 'no access key: only bundles that pay their own fee are relayed' };
    const rules = await this.deps.sponsors.list(projectId, this.chainId);
    return coverage(call, rules);
  }

  /** Per wallet bundle: does the wallet have code, or does this call deploy it? */
  private async walletsExist(call: DecodedCall): Promise<boolean[]> {
    return Promise.all(
      call.bundles.map(async (b) => {
        if (call.deploys.includes(b.wallet)) return true;
        const code = await this.client.getCode({ address: b.wallet });
        return !!code && code !== '0x';
      }),
    );
  }

  /** The next nonce of a wallet's space, counting meta-transactions already queued here. */
  async nextNonce(wallet: Address, space: bigint): Promise<bigint> {
    const [onChain] = await readNonces(this.client, [{ wallet, space }]);
    let next = onChain;
    for (const n of await this.deps.metaTxns.liveNonces(this.chainId, wallet, space, onChain)) {
      if (n === next) next++;
      else if (n > next) break;
    }
    return joinNonce(space, next);
  }

  async feeOptions(projectId: number | null, wallet: string, to: string, data: string) {
    const call = this.decode(wallet, to, data);
    const gasCap = BigInt(this.deps.config.maxGasLimit);
    const sims = await Promise.all(call.bundles.map((b) => simulateUnsigned(this.client, this.chainId, b.wallet, b.txs, gasCap)));
    sims.forEach((results, i) => {
      const failed = results.findIndex((r, j) => r.executed && !r.succeeded && call.bundles[i].txs[j].revertOnError);
      if (failed >= 0) throw new RelayError('simulationFailed', `transaction ${failed} of wallet ${call.bundles[i].wallet} reverts: ${results[failed].reason}`);
    });
    // A wallet that is neither deployed nor deployed by this call will be by the one the client sends.
    const undeployed = (await this.walletsExist(call)).filter((exists) => !exists).length;
    let gas = intrinsicGas(data as Hex) + BigInt(call.deploys.length + undeployed) * DEPLOY_GAS + FEE_TRANSFER_ALLOWANCE;
    sims.forEach((results, i) => {
      gas += BUNDLE_OVERHEAD + PER_TX_OVERHEAD * BigInt(call.bundles[i].txs.length);
      for (const r of results) gas += r.gasUsed;
    });
    const gasPrice = await this.client.getGasPrice();
    let cover = await this.sponsorship(projectId, call);
    if (this.deps.spendCaps) cover = await this.deps.spendCaps.fits(cover, gas * gasPrice);
    if (!this.isFeeRequired || cover.sponsored) return { options: [], sponsored: cover.sponsored, quote: null };
    const wei = gasCost(gas, gasPrice, this.deps.config.feeMarkup);
    const options = [];
    const quoted: Record<string, string> = {};
    for (const t of this.feeTokens) {
      const value = weiToToken(wei, t, await this.prices.nativePrice(this.chainId, t));
      quoted[tokenKey(t)] = value.toString();
      // The option's gasLimit is the fee transfer's own: clients give it to the payment call.
      options.push({ token: t, to: this.paymentAddress, value, gasLimit: Number(FEE_TRANSFER_ALLOWANCE) });
    }
    const quote = signQuote(this.deps.quoteSecret, {
      v: 1,
      c: this.chainId,
      w: call.bundles[0].wallet,
      k: bundleKey(call, this.payee(), this.feeTokenSet),
      g: gas.toString(),
      o: quoted,
      e: Math.floor(Date.now() / 1000) + this.deps.config.quoteTtlSec,
    });
    return { options, sponsored: false, quote };
  }

  /**
   * Accepts a meta-transaction: decode, simulate the exact call from a sender, check payment or
   * sponsorship, then persist it as QUEUED. Nothing is signed here.
   */
  async send(args: { projectId: number | null; walletAddress: string; contract: string; input: string; quote?: string }): Promise<SendResult> {
    const call = this.decode(args.walletAddress, args.contract, args.input);
    const id = bareId(call.id);
    const known = await this.deps.metaTxns.find(this.chainId, id);
    if (known && known.status !== 'DROPPED') return { id: known.id, created: false, row: known };

    const deployed = new Set(call.deploys);
    const probes = call.bundles.map((b) => ({ wallet: b.wallet, space: b.space }));
    const overrides: NonceOverride[] = call.bundles
      .filter((b) => b.nonce > 0n && !deployed.has(b.wallet))
      .map((b) => ({ wallet: b.wallet, space: b.space, nonce: b.nonce }));
    const gasCap = BigInt(this.deps.config.maxGasLimit);
    // Sponsorship is a database read, asked alongside the chain batch (where the gas price goes too).
    const coverP = this.isFeeRequired ? this.sponsorship(args.projectId, call) : undefined;
    void coverP?.catch(() => undefined);
    const [exists, chainNonces, sim, gasPrice] = await Promise.all([
      this.walletsExist(call),
      readNonces(this.client, probes),
      this.simulate(this.senders[0], call.entrypoint, args.input as Hex, overrides),
      this.isFeeRequired ? this.client.getGasPrice() : 0n,
    ]);
    // A call to an address without code "succeeds" doing nothing: never relay (or pay for) that.
    const missing = call.bundles.find((_, i) => !exists[i]);
    if (missing) throw new RelayError('simulationFailed', `wallet ${missing.wallet} is not deployed and this call does not deploy it (send it through the guest module with a factory deploy)`);
    call.bundles.forEach((b, i) => {
      if (b.nonce < chainNonces[i]) {
        throw new RelayError('simulationFailed', `BadNonce: nonce ${b.nonce} of space ${b.space} is already used (wallet ${b.wallet} is at ${chainNonces[i]})`);
      }
    });
    if (!sim.ok) throw new RelayError('simulationFailed', sim.reason ?? 'the bundle reverts');

    const intrinsic = intrinsicGas(args.input as Hex);
    const used = intrinsic + sim.gasUsed;
    const needed = [sim.estimate ?? 0n, intrinsic + (sim.gasUsed * 64n) / 63n + 1n].reduce((a, b) => (a > b ? a : b));
    const gasLimit = ceilMul(needed, this.deps.config.gasMargin);
    if (gasLimit > gasCap) throw new RelayError('simulationFailed', `the bundle needs ${gasLimit} gas, over this relayer's limit of ${gasCap}`);

    let sponsored = false;
    let sponsorId: number | null = null;
    let feeToken: string | null = null;
    let feeValue: bigint | null = null;
    let refund = async () => {};
    if (coverP) {
      let cover = await coverP;
      // Over its sponsor's daily cap, a bundle is not sponsored: it then has to pay like any other.
      if (this.deps.spendCaps) ({ cover, refund } = await this.deps.spendCaps.charge(cover, used * gasPrice));
      if (cover.sponsored) {
        sponsored = true;
        sponsorId = cover.ruleIds[0] ?? null;
      } else {
        const paid = await this.checkPayment(call, sim.paid, used, gasPrice, args.quote, cover.reason);
        feeToken = paid.token;
        feeValue = paid.value;
      }
    }

    try {
      const { row, created } = await this.deps.metaTxns.insert({
        chainId: this.chainId,
        id,
        projectId: args.projectId,
        wallet: (call.kind === 'wallet' ? call.entrypoint : call.bundles[0].wallet) as Address,
        entrypoint: call.entrypoint,
        input: (args.input as string).toLowerCase() as Hex,
        gasLimit,
        gasEstimated: used,
        sponsored,
        sponsorId,
        feeToken,
        feeValue,
        bundles: call.bundles.map((b) => ({ id: bareId(b.id), wallet: b.wallet, space: b.space, nonce: b.nonce })),
      });
      if (created) this.deps.onQueued?.();
      else await refund();
      return { id: row.id, created, row };
    } catch (err) {
      await refund();
      if (err instanceof NonceTaken) throw new RelayError('conflict', err.message);
      throw err;
    }
  }

  /** The fee the bundle pays must cover the quote it brings, or the current price when it brings none. */
  private async checkPayment(call: DecodedCall, paid: bigint[], gasUsed: bigint, gasPrice: bigint, quote: string | undefined, whyNotSponsored?: string) {
    const offers = this.feeTokens.map((t, i) => ({ token: t, key: tokenKey(t), paid: paid[i] ?? 0n })).filter((o) => o.paid > 0n);
    const unsponsored = whyNotSponsored ? ` (not sponsored: ${whyNotSponsored})` : '';
    if (offers.length === 0) {
      throw new RelayError('insufficientFee', `the bundle pays no fee to ${this.paymentAddress} in an accepted fee token${unsponsored}`);
    }
    let quoted: Record<string, string> | undefined;
    if (quote) {
      const check = verifyQuote(this.deps.quoteSecret, quote);
      if (!check.ok) throw new RelayError('insufficientFee', check.reason);
      const q = check.payload;
      if (q.c !== this.chainId) throw new RelayError('insufficientFee', `the quote is for chain ${q.c}`);
      if (q.w !== call.bundles[0].wallet) throw new RelayError('insufficientFee', `the quote is for wallet ${q.w}, not ${call.bundles[0].wallet}`);
      if (q.k !== bundleKey(call, this.payee(), this.feeTokenSet)) throw new RelayError('insufficientFee', 'the quote was issued for different transactions');
      // A bundle that turns out to burn more gas than quoted is priced now instead.
      if (gasUsed <= BigInt(q.g)) quoted = q.o;
    }
    const wei = gasCost(gasUsed, gasPrice, this.deps.config.feeMarkup);
    let best = '';
    for (const o of offers) {
      const required = quoted?.[o.key] !== undefined ? BigInt(quoted[o.key]) : weiToToken(wei, o.token, await this.prices.nativePrice(this.chainId, o.token));
      if (o.paid >= required) return { token: o.key, value: o.paid };
      best = `${o.token.symbol}: paid ${o.paid}, required ${required}`;
    }
    throw new RelayError('insufficientFee', `the fee paid is too low (${best})${unsponsored}`);
  }
}
