import { ChainPricesConfigSchema } from '../config/price-schema.ts';
import type { ChainPricesConfig } from '../config/schema.ts';
import { tokenKey } from './price.ts';

// Prices without homework: Chainlink's published feeds for the native currency and the most held
// tokens of the main networks, so an indexer on those chains answers USD values with no `prices` set
// up. Only Chainlink feeds (an auditable on-chain source), read through the same PriceBook and checks
// as an operator's (a stale, failing or missing feed withdraws the price, never a guessed one). Used
// only for the indexer's USD answers: the relayer's fee tokens stay what the operator lists, since
// they move money. The operator's `chains[].prices` wins entry by entry; `prices.builtin: false`
// turns the table off for a chain (docs/indexer.md#prices).
//
// Addresses: data.chain.link / docs.chain.link "Price Feed Addresses" (the standard proxies; feeds
// answer in USD with 8 decimals, read from the feed itself). `heartbeatSec` is the feed's published
// heartbeat with room for a late round (×1.5): an answer older than that is stale. Where a
// feed updates more often than daily but its heartbeat was not at hand, a day is used: these prices
// are shown, never charged, so a loose bound costs a late figure, not money.

interface WellKnownFeed {
  feed: `0x${string}`;
  heartbeatSec: number;
}
interface WellKnownToken {
  address: `0x${string}`;
  symbol: string;
  decimals: number;
  /** Its USD feed; `native` for a wrapped native token (priced by the chain's native/USD feed). */
  usd: WellKnownFeed | 'native';
}
interface WellKnownChain {
  name: string;
  native: WellKnownFeed;
  tokens: WellKnownToken[];
}

const late = (heartbeatSec: number) => Math.round(heartbeatSec * 1.5);
const feed = (address: `0x${string}`, heartbeatSec: number): WellKnownFeed => ({ feed: address, heartbeatSec: late(heartbeatSec) });
const DAY = 86_400;
const HOUR = 3_600;

export const WELL_KNOWN_PRICES: Readonly<Record<number, WellKnownChain>> = {
  1: {
    name: 'Ethereum',
    native: feed('0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419', HOUR),
    tokens: [
      { address: '0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48', symbol: 'USDC', decimals: 6, usd: feed('0x8fFfFfd4AfB6115b954Bd326cbe7B4BA576818f6', DAY) },
      { address: '0xdAC17F958D2ee523a2206206994597C13D831ec7', symbol: 'USDT', decimals: 6, usd: feed('0x3E7d1eAB13ad0104d2750B8863b489D65364e32D', DAY) },
      { address: '0x6B175474E89094C44Da98b954EedeAC495271d0F', symbol: 'DAI', decimals: 18, usd: feed('0xAed0c38402a5d19df6E4c03F4E2DceD6e29c1ee9', HOUR) },
      { address: '0x514910771AF9Ca656af840dff83E8264EcF986CA', symbol: 'LINK', decimals: 18, usd: feed('0x2c1d072e956AFFC0D435Cb7AC38EF18d24d9127c', HOUR) },
      { address: '0xC02aaA39b223FE8D0A0e5C4F27eAD9083C756Cc2', symbol: 'WETH', decimals: 18, usd: 'native' },
    ],
  },
  10: {
    name: 'OP Mainnet',
    native: feed('0x13e3Ee699D1909E989722E753853AE30b17e08c5', 20 * 60),
    tokens: [
      { address: '0x0b2C639c533813f4Aa9D7837CAf62653d097Ff85', symbol: 'USDC', decimals: 6, usd: feed('0x16a9FA2FDa030272Ce99B29CF780dFA30361E0f3', DAY) },
      { address: '0x94b008aA00579c1307B0EF2c499aD98a8ce58e58', symbol: 'USDT', decimals: 6, usd: feed('0xECef79E109e997bCA29c1c0897ec9d7b03647F5E', DAY) },
      { address: '0x4200000000000000000000000000000000000006', symbol: 'WETH', decimals: 18, usd: 'native' },
    ],
  },
  56: { name: 'BNB Smart Chain', native: feed('0x0567F2323251f0Aab15c8dFb1967E4e8A7D42aeE', DAY), tokens: [] },
  137: {
    name: 'Polygon',
    native: feed('0xAB594600376Ec9fD91F8e885dADF0CE036862dE0', DAY),
    tokens: [
      { address: '0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359', symbol: 'USDC', decimals: 6, usd: feed('0xfE4A8cc5b5B2366C1B58Bea3858e81843581b2F7', DAY) },
      { address: '0x2791Bca1f2de4661ED88A30C99A7a9449Aa84174', symbol: 'USDC.e', decimals: 6, usd: feed('0xfE4A8cc5b5B2366C1B58Bea3858e81843581b2F7', DAY) },
      { address: '0xc2132D05D31c914a87C6611C10748AEb04B58e8F', symbol: 'USDT', decimals: 6, usd: feed('0x0A6513e40db6EB1b165753AD52E80663aeA50545', DAY) },
      { address: '0x7ceB23fD6bC0adD59E62ac25578270cFf1b9f619', symbol: 'WETH', decimals: 18, usd: feed('0xF9680D99D6C9589e2a93a78A04A279e509205945', DAY) },
      { address: '0x0d500B1d8E8eF31E21C99d1Db9A6444d3ADf1270', symbol: 'WPOL', decimals: 18, usd: 'native' },
    ],
  },
  8453: {
    name: 'Base',
    native: feed('0x71041dddad3595F9CEd3DcCFBe3D1F4b0a16Bb70', 20 * 60),
    tokens: [
      { address: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', symbol: 'USDC', decimals: 6, usd: feed('0x7e860098F58bBFC8648a4311b374B1D669a2bc6B', DAY) },
      { address: '0x4200000000000000000000000000000000000006', symbol: 'WETH', decimals: 18, usd: 'native' },
    ],
  },
  42161: {
    name: 'Arbitrum One',
    native: feed('0x639Fe6ab55C921f74e7fac1ee960C0B6293ba612', DAY),
    tokens: [
      { address: '0xaf88d065e77c8cC2239327C5EDb3A432268e5831', symbol: 'USDC', decimals: 6, usd: feed('0x50834F3163758fcC1Df9973b6e91f0F0F0434aD3', DAY) },
      { address: '0xFd086bC7CD5C481DCC9C85ebE478A1C0b69FCbb9', symbol: 'USDT', decimals: 6, usd: feed('0x3f3f5dF88dC9F13eac63DF89EC16ef6e7E25DdE7', DAY) },
      { address: '0x82aF49447D8a07e3bd95BD0d56f35241523fBab1', symbol: 'WETH', decimals: 18, usd: 'native' },
    ],
  },
  43114: { name: 'Avalanche C-Chain', native: feed('0x0A77230d17318075983913bC2145DB16C7366156', DAY), tokens: [] },
};

/** A chain's price sources: the operator's entries, over the built-in ones unless `builtin: false`; undefined: nothing priced. */
export interface EffectivePrices {
  config: ChainPricesConfig;
  /** Keys (lower-case addresses, "native") whose sources come from the built-in table. */
  builtin: ReadonlySet<string>;
}

export function effectivePrices(chainId: number, configured: ChainPricesConfig | undefined): EffectivePrices | undefined {
  const table = configured?.builtin === false ? undefined : WELL_KNOWN_PRICES[chainId];
  if (!table) return configured ? { config: configured, builtin: new Set() } : undefined;
  // No `prices` configured: the schema's defaults (pollMs and the rest), with the table filling them in.
  const base: ChainPricesConfig = configured ?? ChainPricesConfigSchema.parse({});
  const builtin = new Set<string>();
  // The native price: the operator's feed or fixed price wins; the table's feed otherwise.
  let nativeUsdFeed = base.nativeUsdFeed;
  if (!nativeUsdFeed && base.nativeUsdPrice === undefined) {
    nativeUsdFeed = table.native;
    builtin.add('native');
  }
  const listed = new Set(base.tokens.map((t) => tokenKey(t)));
  const tokens = [...base.tokens];
  for (const t of table.tokens) {
    const key = tokenKey(t);
    if (listed.has(key)) continue;
    // A table token's live source is a USD feed: it needs a native/USD feed to be read against.
    if (!nativeUsdFeed) continue;
    const source = t.usd === 'native' ? nativeUsdFeed : t.usd;
    tokens.push({ address: t.address, symbol: t.symbol, decimals: t.decimals, prices: [{ kind: 'chainlink', feed: source.feed, quote: 'usd', heartbeatSec: source.heartbeatSec }] });
    builtin.add(key);
  }
  return { config: { ...base, nativeUsdFeed, tokens }, builtin };
}
