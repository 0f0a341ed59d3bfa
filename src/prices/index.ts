// The price machinery's door: the relayer (fee tokens, in native units) and the indexer (USD) use it.
export { PriceBook, priceWire, type PriceBookConfig, type PriceBookOptions, type PriceSnapshot } from './book.ts';
export { fixedPrice, fractionToDecimal, parseDecimal, tokenKey, type Fraction, type PriceOrigin, type PriceResult, type PriceSourceConfig, type PricedToken } from './price.ts';
export { UsdPrices, NATIVE_ADDRESS, usdValue, type UsdPrice } from './usd.ts';
export { WELL_KNOWN_PRICES, effectivePrices, type EffectivePrices } from './well-known.ts';
