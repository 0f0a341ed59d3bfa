// The price machinery's door: the relayer (fee tokens, in native units) and the indexer (USD) use it.
import { withRole, type ChainClient } from '../chain/client.ts';
import type { Common } from '../common.ts';
import { UsdPrices } from './usd.ts';
import { effectivePrices } from './well-known.ts';
export { PriceBook, priceWire, type PriceBookConfig, type PriceBookOptions, type PriceSnapshot } from './book.ts';
export { fixedPrice, fractionToDecimal, parseDecimal, tokenKey, type Fraction, type PriceOrigin, type PriceResult, type PriceSourceConfig, type PricedToken } from './price.ts';
export { UsdPrices, NATIVE_ADDRESS, usdValue, type UsdPrice } from './usd.ts';
export { WELL_KNOWN_PRICES, effectivePrices, type EffectivePrices } from './well-known.ts';

/**
 * USD prices per chain configured with `prices` (the indexer's priceUSD, GetTokenPrice(s), ListTokenPrices),
 * by chain id: the operator's sources over the built-in table of well-known feeds for the chain id. Read
 * only when asked (a price method, a page of balances): no background polling.
 */
export function createPrices({ config, log }: Common, chains: ReadonlyMap<number, ChainClient>): Map<number, UsdPrices> {
  const prices = new Map<number, UsdPrices>();
  for (const c of config.chains) {
    const p = effectivePrices(c.chainId, c.prices);
    if (p) prices.set(c.chainId, new UsdPrices(withRole(chains.get(c.chainId)!, 'indexer'), p.config, log, p.builtin));
  }
  return prices;
}
