import { decodeFunctionResult, encodeFunctionData, parseAbi, type Address, type Hex } from 'viem';
import type { Gauge } from 'prom-client';
import type { ChainClient } from '../chain/client.ts';
import { MULTICALL3_ADDRESS, multicall, type CallResult } from '../chain/multicall.ts';
import type { Logger } from '../telemetry/logger.ts';
import { fixedPrice, fractionToDecimal, tokenKey, type Fraction, type PriceResult, type PriceSourceConfig as SourceConfig, type PricedToken } from './price.ts';
import { MAX_TICK, MIN_TICK, averageTick, sqrtRatioAtTick } from './tick.ts';

/** What a book reads: its tokens' sources, the native/USD feed, the wrapped native the pools pair with. */
export interface PriceBookConfig {
  tokens: readonly PricedToken[];
  nativeUsdFeed?: { feed: string; heartbeatSec: number };
  wrappedNative?: string;
  /** The head is asked at most this often. */
  pollMs: number;
}

export interface PriceBookOptions {
  /** Per token (labels chain, token): 1 while it has no price, and its last price in native units. */
  gauges?: { unpriced: Gauge<'chain' | 'token'>; price: Gauge<'chain' | 'token'> };
  log?: Logger;
  /** What a token is called in the log lines ("fee token", "priced token"). */
  what?: string;
}

const aggregatorAbi = parseAbi([
  'function latestRoundData() view returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)',
  'function decimals() view returns (uint8)',
]);
const poolAbi = parseAbi([
  'function observe(uint32[] secondsAgos) view returns (int56[] tickCumulatives, uint160[] secondsPerLiquidityCumulativeX128s)',
  'function token0() view returns (address)',
  'function token1() view returns (address)',
]);
const multicallAbi = parseAbi(['function getBlockNumber() view returns (uint256)', 'function getCurrentBlockTimestamp() view returns (uint256)']);

const Q192 = 1n << 192n;

/** A Chainlink answer that passed every check, as a fraction (answer / 10^decimals). */
type FeedRead = { ok: true; value: Fraction } | { ok: false; reason: string };

/** Every price of a chain at one block. */
export interface PriceSnapshot {
  /** The block read; null when nothing had to be read (fixed rates only). */
  block: bigint | null;
  /** The block's timestamp (seconds); null when nothing was read or it did not answer. */
  blockTime: number | null;
  /** What the staleness checks measured ages against: max(block timestamp, this host's clock), in seconds. */
  now: number | null;
  prices: Map<string, PriceResult>;
  /** The native/USD feed's answer (USD per whole native unit); undefined when none is configured. */
  nativeUsd?: FeedRead;
}

/** One eth_call of the snapshot's aggregate3, deduplicated by target and calldata. */
class CallSet {
  readonly calls: Array<{ target: Address; data: Hex }> = [];
  private readonly index = new Map<string, number>();
  add(target: Address, data: Hex): number {
    const key = `${target.toLowerCase()}:${data}`;
    let i = this.index.get(key);
    if (i === undefined) {
      i = this.calls.push({ target, data }) - 1;
      this.index.set(key, i);
    }
    return i;
  }
}

function decode<T>(abi: readonly unknown[], functionName: string, r: CallResult | undefined): T | undefined {
  if (!r?.ok || r.data === '0x') return undefined;
  try {
    return (decodeFunctionResult as (a: unknown) => unknown)({ abi, functionName, data: r.data }) as T;
  } catch {
    return undefined;
  }
}

/**
 * Live token prices: per token, its sources in the configured order (Chainlink feed, Uniswap v3 TWAP),
 * then its fixed rate; the first trustworthy one wins, and a token whose every source fails has no price
 * (the relayer withdraws it from FeeOptions, the indexer shows none: never mispriced). Every feed and pool of the chain is read in one
 * Multicall3 call at one block, and the result is kept for that block: concurrent and later callers in
 * the same block share it. The head is asked at most once per `pollMs`.
 */
export class PriceBook {
  private readonly tokens: readonly PricedToken[];
  private readonly live: boolean;
  private snapshotCache?: PriceSnapshot;
  private inflight?: { block: bigint; promise: Promise<PriceSnapshot> };
  private readonly unpriced = new Set<string>();

  constructor(
    private readonly chain: ChainClient,
    private readonly config: PriceBookConfig,
    private readonly opts: PriceBookOptions = {},
  ) {
    this.tokens = config.tokens;
    // A native/USD feed alone (for sponsorship caps in USD) is read too.
    this.live = this.tokens.some((t) => t.prices.length > 0) || config.nativeUsdFeed !== undefined;
  }

  async prices(_chainId: number, tokens: readonly PricedToken[]): Promise<Map<string, PriceResult>> {
    const snap = await this.snapshot();
    // Tokens this book was not built for (a caller's own list) fall back to their fixed rate.
    for (const t of tokens) if (!snap.prices.has(tokenKey(t))) snap.prices.set(tokenKey(t), fixedPrice(t));
    return snap.prices;
  }

  /** USD per whole native unit from `nativeUsdFeed`, read with the fee prices (same block, same checks). */
  async nativeUsd(): Promise<{ ok: true; price: Fraction } | { ok: false; reason: string }> {
    if (!this.config.nativeUsdFeed) return { ok: false, reason: 'no nativeUsdFeed is configured' };
    const read = (await this.snapshot()).nativeUsd;
    return read ? (read.ok ? { ok: true, price: read.value } : read) : { ok: false, reason: 'the native/USD feed was not read' };
  }

  /** The prices at the current block: one Multicall3 call per block at most, none with fixed rates only. */
  async snapshot(): Promise<PriceSnapshot> {
    if (!this.live) {
      const snap = { block: null, blockTime: null, now: null, prices: new Map(this.tokens.map((t) => [tokenKey(t), fixedPrice(t)])) };
      this.observe(snap);
      return snap;
    }
    const block = await this.currentBlock();
    if (this.snapshotCache && this.snapshotCache.block === block) return this.snapshotCache;
    if (this.inflight?.block === block) return this.inflight.promise;
    const promise = this.read(block).then((snap) => {
      if (!this.snapshotCache || (this.snapshotCache.block ?? -1n) <= block) this.snapshotCache = snap;
      this.observe(snap);
      return snap;
    });
    this.inflight = { block, promise };
    try {
      return await promise;
    } finally {
      if (this.inflight?.promise === promise) this.inflight = undefined;
    }
  }

  /** The head read at most a poll interval ago (the shared head shares a read in flight). */
  private currentBlock(): Promise<bigint> {
    return this.chain.head.number(this.config.pollMs);
  }

  private async read(block: bigint): Promise<PriceSnapshot> {
    const set = new CallSet();
    const at = {
      block: set.add(MULTICALL3_ADDRESS, encodeFunctionData({ abi: multicallAbi, functionName: 'getBlockNumber' })),
      time: set.add(MULTICALL3_ADDRESS, encodeFunctionData({ abi: multicallAbi, functionName: 'getCurrentBlockTimestamp' })),
    };
    const feed = (address: string) => ({
      round: set.add(address as Address, encodeFunctionData({ abi: aggregatorAbi, functionName: 'latestRoundData' })),
      decimals: set.add(address as Address, encodeFunctionData({ abi: aggregatorAbi, functionName: 'decimals' })),
    });
    const nativeUsd = this.config.nativeUsdFeed ? feed(this.config.nativeUsdFeed.feed) : undefined;
    const plans = this.tokens.map((t) =>
      t.prices.map((src) =>
        src.kind === 'chainlink'
          ? { src, feed: feed(src.feed) }
          : {
              src,
              observe: set.add(src.pool as Address, encodeFunctionData({ abi: poolAbi, functionName: 'observe', args: [[src.windowSec, 0]] })),
              token0: set.add(src.pool as Address, encodeFunctionData({ abi: poolAbi, functionName: 'token0' })),
              token1: set.add(src.pool as Address, encodeFunctionData({ abi: poolAbi, functionName: 'token1' })),
            },
      ),
    );

    let results: CallResult[] | undefined;
    let failure: string | undefined;
    try {
      results = await multicall(this.chain, set.calls, { blockNumber: block });
    } catch (err) {
      failure = `the price read at block ${block} failed: ${(err as Error).message.split('\n')[0]}`;
    }
    const blockTime = decode<bigint>(multicallAbi, 'getCurrentBlockTimestamp', results?.[at.time]);
    const now = Math.max(Number(blockTime ?? 0n), Math.floor(Date.now() / 1000));

    const readFeed = (f: { round: number; decimals: number }, address: string, heartbeatSec: number): FeedRead => {
      if (!results) return { ok: false, reason: failure! };
      const round = decode<readonly [bigint, bigint, bigint, bigint, bigint]>(aggregatorAbi, 'latestRoundData', results[f.round]);
      const decimals = decode<number>(aggregatorAbi, 'decimals', results[f.decimals]);
      if (!round || decimals === undefined) return { ok: false, reason: `feed ${address} did not answer latestRoundData/decimals` };
      const [roundId, answer, , updatedAt, answeredInRound] = round;
      if (answer <= 0n) return { ok: false, reason: `feed ${address} answers ${answer}, not a positive price` };
      if (updatedAt === 0n || answeredInRound < roundId)
        return { ok: false, reason: `feed ${address}: round ${roundId} is incomplete (answered in round ${answeredInRound}, updated at ${updatedAt})` };
      const age = now - Number(updatedAt);
      if (age > heartbeatSec) return { ok: false, reason: `feed ${address} is stale: updated ${age} s ago, heartbeat ${heartbeatSec} s` };
      return { ok: true, value: { num: answer, den: 10n ** BigInt(decimals) } };
    };

    const native = nativeUsd ? readFeed(nativeUsd, this.config.nativeUsdFeed!.feed, this.config.nativeUsdFeed!.heartbeatSec) : undefined;

    const priceOf = (token: PricedToken, plan: (typeof plans)[number][number]): { ok: true; price: Fraction; address: string } | { ok: false; reason: string } => {
      if ('feed' in plan && plan.feed) {
        const src = plan.src as Extract<SourceConfig, { kind: 'chainlink' }>;
        const read = readFeed(plan.feed, src.feed, src.heartbeatSec);
        if (!read.ok) return read;
        if (src.quote === 'native') return { ok: true, price: read.value, address: src.feed };
        if (!native?.ok) return { ok: false, reason: `native/USD: ${native?.reason ?? 'no nativeUsdFeed'}` };
        // (token USD) / (native USD) = native per token.
        return { ok: true, price: { num: read.value.num * native.value.den, den: read.value.den * native.value.num }, address: src.feed };
      }
      const src = plan.src as Extract<SourceConfig, { kind: 'uniswapV3' }>;
      if (!results) return { ok: false, reason: failure! };
      const obs = decode<readonly [readonly bigint[], readonly bigint[]]>(poolAbi, 'observe', results[plan.observe]);
      const t0 = decode<Address>(poolAbi, 'token0', results[plan.token0])?.toLowerCase();
      const t1 = decode<Address>(poolAbi, 'token1', results[plan.token1])?.toLowerCase();
      if (!t0 || !t1) return { ok: false, reason: `pool ${src.pool} did not answer token0/token1` };
      const mine = token.address!.toLowerCase();
      const wrapped = this.config.wrappedNative!.toLowerCase();
      if (!((t0 === mine && t1 === wrapped) || (t0 === wrapped && t1 === mine))) {
        return { ok: false, reason: `pool ${src.pool} pairs ${t0}/${t1}, not ${token.symbol} with the wrapped native ${wrapped}` };
      }
      if (obs?.[0].length !== 2) return { ok: false, reason: `pool ${src.pool} has no ${src.windowSec} s of price history (observe reverted)` };
      const tick = averageTick(obs[0][0], obs[0][1], src.windowSec);
      if (tick < MIN_TICK || tick > MAX_TICK) return { ok: false, reason: `pool ${src.pool}: average tick ${tick} is out of range` };
      const sq = sqrtRatioAtTick(tick);
      const ratio = sq * sq; // token1 base units per token0 base unit, times 2^192
      const scale = 10n ** BigInt(token.decimals);
      const WEI = 10n ** 18n;
      // Native (wei) per token base unit, then per whole token in whole native.
      const price = t0 === mine ? { num: ratio * scale, den: Q192 * WEI } : { num: Q192 * scale, den: ratio * WEI };
      if (price.num === 0n) return { ok: false, reason: `pool ${src.pool}: the average price rounds to zero` };
      return { ok: true, price, address: src.pool };
    };

    const prices = new Map<string, PriceResult>();
    for (const [i, token] of this.tokens.entries()) {
      const skipped: string[] = [];
      let found: PriceResult | undefined;
      for (const plan of plans[i]) {
        const p = priceOf(token, plan);
        if (p.ok) {
          found = { ok: true, price: p.price, source: plan.src.kind, address: p.address, block, skipped };
          break;
        }
        skipped.push(`${plan.src.kind}: ${p.reason}`);
      }
      prices.set(tokenKey(token), found ?? fixedPrice(token, skipped));
    }
    return { block, blockTime: blockTime === undefined ? null : Number(blockTime), now, prices, nativeUsd: native };
  }

  /** Keeps the gauges current and logs a token being withdrawn or coming back. */
  private observe(snap: PriceSnapshot) {
    const chain = this.chain.name;
    for (const t of this.tokens) {
      const key = tokenKey(t);
      const p = snap.prices.get(key)!;
      this.opts.gauges?.unpriced.set({ chain, token: t.symbol }, p.ok ? 0 : 1);
      if (p.ok) this.opts.gauges?.price.set({ chain, token: t.symbol }, Number(fractionToDecimal(p.price, 18)));
      if (!p.ok && !this.unpriced.has(key)) {
        this.unpriced.add(key);
        this.opts.log?.warn({ chain, token: t.symbol, reason: p.reason }, `${this.opts.what ?? 'token'} withdrawn: no trustworthy price`);
      } else if (p.ok && this.unpriced.delete(key)) {
        this.opts.log?.info({ chain, token: t.symbol, source: p.source }, `${this.opts.what ?? 'token'} priced again`);
      }
    }
  }
}

/** A price as RuntimeStatus, the console and FeeOptions show it. */
export function priceWire(p: PriceResult) {
  return p.ok
    ? { ok: true as const, nativePrice: fractionToDecimal(p.price), source: p.source, address: p.address, block: p.block?.toString() ?? null, skipped: p.skipped }
    : { ok: false as const, reason: p.reason };
}
