import { z } from 'zod';
import { Address, Decimal } from './fields.ts';

// Price sources (docs/fee-prices.md, docs/indexer.md#prices): a fee token's and an indexer-priced token's.

/** A live price source of a fee token (docs/fee-prices.md). */
export const PriceSourceSchema = z.discriminatedUnion('kind', [
  z
    .object({
      /** A Chainlink AggregatorV3Interface feed: token/native, or token/USD divided by the relayer's `nativeUsdFeed`. */
      kind: z.literal('chainlink'),
      feed: Address,
      /** What the feed's answer is quoted in. */
      quote: z.enum(['native', 'usd']).default('native'),
      /** An answer older than this (the feed's heartbeat) is stale. */
      heartbeatSec: z
        .number()
        .int()
        .positive()
        .max(7 * 86_400),
    })
    .strict(),
  z
    .object({
      /** A Uniswap v3 pool of the token and the relayer's `wrappedNative`: its time-weighted average price. */
      kind: z.literal('uniswapV3'),
      pool: Address,
      /** The averaging window; a short one is cheap to manipulate. */
      windowSec: z
        .number()
        .int()
        .min(60)
        .max(7 * 86_400)
        .default(1_800),
    })
    .strict(),
]);

/** A token the indexer prices in USD (docs/indexer.md, Prices): its live sources, then a fixed USD price. */
export const UsdPricedTokenSchema = z
  .object({
    address: Address,
    symbol: z.string().min(1),
    decimals: z.number().int().min(0).max(36),
    /** Live sources, tried in order (as a fee token's, docs/fee-prices.md); the fixed `usdPrice` after them. */
    prices: z.array(PriceSourceSchema).max(4).default([]),
    /** USD per whole token, fixed (e.g. "1" for a stablecoin you vouch for); the last fallback. */
    usdPrice: Decimal.optional(),
  })
  .strict()
  .refine((t) => t.usdPrice !== undefined || t.prices.length > 0, { message: 'a priced token needs prices or a fixed usdPrice', path: ['usdPrice'] })
  .refine((t) => t.usdPrice === undefined || /[1-9]/.test(t.usdPrice), { message: 'a fixed usdPrice must be above zero', path: ['usdPrice'] });

/** USD prices the indexer answers (balances' priceUSD, GetTokenPrice(s), ListTokenPrices): only what the operator lists. */
/** A native/USD Chainlink feed and how old its answer may be. */
export const NativeUsdFeedSchema = z
  .object({
    feed: Address,
    heartbeatSec: z
      .number()
      .int()
      .positive()
      .max(7 * 86_400),
  })
  .strict();

export const ChainPricesConfigSchema = z
  .object({
    /** The native/USD Chainlink feed: the native token's price, and what every live token price is multiplied by. */
    nativeUsdFeed: NativeUsdFeedSchema.optional(),
    /** USD per whole native unit, fixed: the fallback when the feed is absent or withdrawn. */
    nativeUsdPrice: Decimal.refine((d) => /[1-9]/.test(d), 'must be above zero').optional(),
    /** The wrapped native token (WETH) `uniswapV3` sources' pools pair with. */
    wrappedNative: Address.optional(),
    tokens: z.array(UsdPricedTokenSchema).max(500).default([]),
    /** The head is asked at most this often: a price is at most one block plus this old. */
    pollMs: z.number().int().positive().default(1_000),
    /**
     * Price the chain's native currency and common tokens from the built-in table of Chainlink's
     * published feeds for its chain id (src/prices/well-known.ts) where the entries above say nothing;
     * false: only what is listed here.
     */
    builtin: z.boolean().default(true),
  })
  .strict()
  .refine((p) => p.nativeUsdFeed || p.nativeUsdPrice || !p.tokens.some((t) => t.prices.length > 0), {
    message: 'live token prices are in native units: they need a nativeUsdFeed or a nativeUsdPrice to be in USD',
    path: ['nativeUsdFeed'],
  })
  .refine((p) => p.wrappedNative || !p.tokens.some((t) => t.prices.some((s) => s.kind === 'uniswapV3')), { message: 'a uniswapV3 price needs wrappedNative', path: ['wrappedNative'] })
  .refine((p) => p.nativeUsdFeed || !p.tokens.some((t) => t.prices.some((s) => s.kind === 'chainlink' && s.quote === 'usd')), {
    message: "a chainlink price quoted in 'usd' needs the nativeUsdFeed",
    path: ['nativeUsdFeed'],
  });

export type ChainPricesConfig = z.infer<typeof ChainPricesConfigSchema>;
