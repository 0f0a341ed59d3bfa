import type { ChainClient } from '../chain/client.ts';
import type { ChainPricesConfig } from '../config/schema.ts';
import type { Logger } from '../telemetry/logger.ts';
import { PriceBook } from './book.ts';
import { fractionToDecimal, parseDecimal, tokenKey, type Fraction, type PriceOrigin } from './price.ts';

/** How Sequence's indexer names the native token in price queries and answers. */
export const NATIVE_ADDRESS = '0x0000000000000000000000000000000000000000';

/** A token's USD price now, or why it has none. `known`: the operator lists the token (a withdrawn price, not an unknown token). */
export type UsdPrice =
  | {
      ok: true;
      usd: Fraction;
      source: PriceOrigin;
      /** The feed or pool read; null for a fixed price. */
      address: string | null;
      /** The source came from the built-in table of well-known feeds (src/prices/well-known.ts), not the operator. */
      builtin: boolean;
      updatedAt: Date | null;
      decimals: number;
    }
  | { ok: false; known: boolean; reason: string };

/** USD per whole native unit, or why there is none. */
type NativeUsd = { ok: true; usd: Fraction; source: PriceOrigin; address: string | null } | { ok: false; reason: string };

const mul = (a: Fraction, b: Fraction): Fraction => ({ num: a.num * b.num, den: a.den * b.den });

/**
 * One chain's USD prices, from sources the operator lists (`chains[].prices`) and nothing else. A
 * token's live price is the PriceBook's (the relayer's machinery: feeds and TWAPs, read in one
 * Multicall3 call per block, stale or manipulated sources passed over) in native units, times the
 * native/USD feed; then its fixed `usdPrice`. A token whose sources all fail has no price: answers
 * say so, they never show a made-up one.
 */
export class UsdPrices {
  private readonly book: PriceBook;
  private readonly decimals = new Map<string, number>();
  private readonly fixed = new Map<string, Fraction>();

  constructor(
    readonly chain: ChainClient,
    private readonly config: ChainPricesConfig,
    log?: Logger,
    /** Keys ("native", lower-case addresses) priced from the built-in table (src/prices/well-known.ts). */
    private readonly builtin: ReadonlySet<string> = new Set(),
  ) {
    for (const t of config.tokens) {
      this.decimals.set(tokenKey(t), t.decimals);
      if (t.usdPrice !== undefined) this.fixed.set(tokenKey(t), parseDecimal(t.usdPrice));
    }
    // The book prices in native units with no fixed fallback of its own: the fixed price here is in USD.
    this.book = new PriceBook(
      chain,
      {
        tokens: config.tokens.map((t) => ({ address: t.address, symbol: t.symbol, decimals: t.decimals, prices: t.prices })),
        nativeUsdFeed: config.nativeUsdFeed,
        wrappedNative: config.wrappedNative,
        pollMs: config.pollMs,
      },
      { log, what: 'priced token' },
    );
  }

  /** The tokens listed, by key (lower-case address, "native" first). */
  listed(): string[] {
    return ['native', ...this.config.tokens.map((t) => tokenKey(t))];
  }

  /**
   * Prices of `keys` (lower-case addresses, or "native"), read together at one block. Throws when the
   * node cannot be asked (the caller decides: a balance page goes on unpriced, a price method fails).
   */
  async get(keys: readonly string[]): Promise<Map<string, UsdPrice>> {
    const out = new Map<string, UsdPrice>();
    const live = this.config.tokens.some((t) => t.prices.length > 0) || this.config.nativeUsdFeed !== undefined;
    const snap = live && keys.some((k) => k === 'native' || this.decimals.has(k)) ? await this.book.snapshot() : undefined;
    const updatedAt = snap?.blockTime ? new Date(snap.blockTime * 1000) : null;
    const native = this.nativeUsd(snap);
    for (const key of keys) {
      if (key === 'native') {
        out.set(
          key,
          native.ok
            ? { ...native, builtin: native.source !== 'fixed' && this.builtin.has('native'), updatedAt: native.source === 'fixed' ? null : updatedAt, decimals: 18 }
            : { ok: false, known: true, reason: native.reason },
        );
        continue;
      }
      const decimals = this.decimals.get(key);
      if (decimals === undefined) {
        out.set(key, { ok: false, known: false, reason: 'no price source is configured for this token (chains[].prices.tokens)' });
        continue;
      }
      const p = snap?.prices.get(key) ?? { ok: false as const, reason: 'no live source' };
      if (p.ok && native.ok) {
        out.set(key, { ok: true, usd: mul(p.price, native.usd), source: p.source, address: p.address, builtin: this.builtin.has(key), updatedAt, decimals });
        continue;
      }
      const fixed = this.fixed.get(key);
      const reason = p.ok ? `native/USD: ${(native as { reason: string }).reason}` : p.reason;
      out.set(key, fixed ? { ok: true, usd: fixed, source: 'fixed', address: null, builtin: false, updatedAt: null, decimals } : { ok: false, known: true, reason });
    }
    return out;
  }

  private nativeUsd(snap: { nativeUsd?: { ok: true; value: Fraction } | { ok: false; reason: string } } | undefined): NativeUsd {
    const feed = snap?.nativeUsd;
    if (feed?.ok) return { ok: true, usd: feed.value, source: 'chainlink', address: this.config.nativeUsdFeed!.feed };
    if (this.config.nativeUsdPrice !== undefined) return { ok: true, usd: parseDecimal(this.config.nativeUsdPrice), source: 'fixed', address: null };
    if (!this.config.nativeUsdFeed) return { ok: false, reason: 'no nativeUsdFeed or nativeUsdPrice is configured' };
    return { ok: false, reason: feed?.reason ?? 'the native/USD feed was not read' };
  }
}

/** `amount` base units of a token of `decimals` at `usd` per whole token, as a decimal string. */
export function usdValue(amount: string | bigint, decimals: number, usd: Fraction): string {
  return fractionToDecimal({ num: BigInt(amount) * usd.num, den: usd.den * 10n ** BigInt(decimals) }, 18);
}
