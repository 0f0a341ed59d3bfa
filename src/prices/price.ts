import type { z } from 'zod';
import type { PriceSourceSchema } from '../config/schema.ts';

// What a price is, whoever asks for it: the relayer (fee tokens, in the native currency) and the
// indexer (balances and the price methods, in USD) read the same sources through PriceBook.

export type PriceSourceConfig = z.infer<typeof PriceSourceSchema>;

/** A token a PriceBook prices: its sources in order, then its fixed rate (one whole token in native units). */
export interface PricedToken {
  /** The ERC20 contract; null means the chain's native currency. */
  address: string | null;
  symbol: string;
  decimals: number;
  prices: readonly PriceSourceConfig[];
  nativePrice?: string;
}

/** A price as an exact fraction, so nothing is ever rounded in the operator's disfavour. */
export interface Fraction {
  num: bigint;
  den: bigint;
}

export function parseDecimal(text: string): Fraction {
  const [int, frac = ''] = text.split('.');
  return { num: BigInt(int + frac), den: 10n ** BigInt(frac.length) };
}

/** Where a price came from: a live source (feed or pool address) or the configured fixed rate. */
export type PriceOrigin = 'chainlink' | 'uniswapV3' | 'fixed';

/** A token's price in the native currency, or why it has no trustworthy one now. */
export type PriceResult =
  | {
      ok: true;
      /** Native currency per whole token. */
      price: Fraction;
      source: PriceOrigin;
      /** The feed or pool read; null for a fixed rate. */
      address: string | null;
      /** The block the price was read at; null for a fixed rate. */
      block: bigint | null;
      /** Sources tried before this one and why they were passed over. */
      skipped: string[];
    }
  | { ok: false; reason: string };

/** The configured fixed rate of a token, if it has one. */
export function fixedPrice(token: PricedToken, skipped: string[] = []): PriceResult {
  if (token.nativePrice === undefined) return { ok: false, reason: skipped.length ? skipped.join('; ') : 'no price source' };
  const price = parseDecimal(token.nativePrice);
  if (price.num <= 0n) return { ok: false, reason: [...skipped, 'the fixed nativePrice is zero'].join('; ') };
  return { ok: true, price, source: 'fixed', address: null, block: null, skipped };
}

/** A fraction as a decimal string of at most `digits` fractional digits (rounded down), trailing zeros trimmed. */
export function fractionToDecimal(f: Fraction, digits = 18): string {
  const scaled = (f.num * 10n ** BigInt(digits)) / f.den;
  const int = scaled / 10n ** BigInt(digits);
  const frac = (scaled % 10n ** BigInt(digits)).toString().padStart(digits, '0').replace(/0+$/, '');
  return frac ? `${int}.${frac}` : `${int}`;
}

/** The key a token goes by in quotes, fee records and price maps: its lower-case address, or "native". */
export const tokenKey = (t: Pick<PricedToken, 'address'>) => (t.address ? t.address.toLowerCase() : 'native');
