import type { PriceFields, PriceSourceWire } from '../../indexer/index.ts';
import { NATIVE_ADDRESS, fractionToDecimal, usdValue, type UsdPrice } from '../../prices/index.ts';
import type { Services } from '../../services.ts';
import { IndexerErrors, RpcError } from '../core/errors.ts';

/** What the indexer's price reads use: the USD prices per chain. */
export type PriceDeps = Pick<Services, 'prices'>;

// USD prices in the indexer's answers, from the chain's UsdPrices (src/prices/usd.ts). A token with no
// price keeps the schema's required "0" with no priceUpdatedAt (as Sequence answers a token it does not
// price); one the operator prices whose sources all fail now also says why (`priceUnavailable`).

/** The Sequence Price: a token's USD price (contractAddress 0x000…0 for the native token). */
export interface PriceWire {
  contractAddress: string;
  tokenID?: string;
  priceUSD: string;
  updatedAt?: string;
  /** metarelay's own: where the price came from (docs/indexer.md#prices). */
  source: PriceSourceWire;
}

const sourceWire = (p: Extract<UsdPrice, { ok: true }>): PriceSourceWire => ({ kind: p.source, ...(p.address ? { address: p.address.toLowerCase() } : {}), builtin: p.builtin });

const keyOf = (contract: string) => (contract.toLowerCase() === NATIVE_ADDRESS ? 'native' : contract.toLowerCase());

/** Prices of the keys on a chain; a chain with no `prices` configured prices nothing. */
export async function pricesOf(s: PriceDeps, chainId: number, keys: readonly string[]): Promise<Map<string, UsdPrice>> {
  const book = s.prices.get(chainId);
  if (book) return book.get(keys);
  const none: UsdPrice = { ok: false, known: false, reason: 'this chain has no price sources configured (chains[].prices)' };
  return new Map(keys.map((k) => [k, none]));
}

/** As pricesOf, but a node that cannot be asked withdraws the live prices instead of failing: balances are read from the database and still answer. */
export async function pricesOrWithdrawn(s: PriceDeps, chainId: number, keys: readonly string[]): Promise<Map<string, UsdPrice>> {
  try {
    return await pricesOf(s, chainId, keys);
  } catch (err) {
    const withdrawn: UsdPrice = { ok: false, known: true, reason: `the price read failed: ${(err as Error).message.split('\n')[0]}` };
    const listed = new Set(s.prices.get(chainId)?.listed() ?? []);
    return new Map(keys.map((k) => [k, listed.has(k) ? withdrawn : { ok: false, known: false, reason: 'no price source is configured for this token' }]));
  }
}

export function priceFields(p: UsdPrice | undefined, amount: string | bigint): PriceFields | undefined {
  if (!p) return undefined;
  if (!p.ok) return p.known ? { priceUSD: '0', balanceUSD: '0', priceUnavailable: p.reason } : undefined;
  return { priceUSD: fractionToDecimal(p.usd, 18), balanceUSD: usdValue(amount, p.decimals, p.usd), ...(p.updatedAt ? { priceUpdatedAt: p.updatedAt.toISOString() } : {}), priceSource: sourceWire(p) };
}

/** Price fields per row (ERC20 balances only: collectibles are not priced); undefined for all when `omit`. */
export async function balancePrices(s: PriceDeps, chainId: number, rows: ReadonlyArray<{ contract: string; type: string; balance: string }>, omit = false): Promise<Array<PriceFields | undefined>> {
  if (omit || !rows.some((r) => r.type === 'ERC20')) return rows.map(() => undefined);
  const keys = [...new Set(rows.filter((r) => r.type === 'ERC20').map((r) => r.contract.toLowerCase()))];
  const prices = await pricesOrWithdrawn(s, chainId, keys);
  return rows.map((r) => (r.type === 'ERC20' ? priceFields(prices.get(r.contract.toLowerCase()), r.balance) : undefined));
}

function priceWire(contractAddress: string, tokenID: string | undefined, p: Extract<UsdPrice, { ok: true }>): PriceWire {
  return {
    contractAddress,
    ...(tokenID !== undefined ? { tokenID } : {}),
    priceUSD: fractionToDecimal(p.usd, 18),
    ...(p.updatedAt ? { updatedAt: p.updatedAt.toISOString() } : {}),
    source: sourceWire(p),
  };
}

export interface PriceQuery {
  contractAddress: string;
  tokenID?: string;
}

/** Each query's price, in query order; those without one are left out and listed with the reason in `unpriced`. */
export async function queryPrices(s: PriceDeps, chainId: number, queries: readonly PriceQuery[]) {
  const prices = await pricesOf(s, chainId, [...new Set(queries.map((q) => keyOf(q.contractAddress)))]);
  const out: PriceWire[] = [];
  const unpriced: Array<PriceQuery & { reason: string }> = [];
  for (const q of queries) {
    const p = prices.get(keyOf(q.contractAddress))!;
    if (p.ok) out.push(priceWire(q.contractAddress, q.tokenID, p));
    else unpriced.push({ ...q, reason: p.reason });
  }
  return { prices: out, unpriced };
}

/** One query's price, or the error that says why there is none (NotFound: not priced here; Unavailable: its sources fail now). */
export async function onePrice(s: PriceDeps, chainId: number, q: PriceQuery): Promise<PriceWire> {
  const p = (await pricesOf(s, chainId, [keyOf(q.contractAddress)])).get(keyOf(q.contractAddress))!;
  if (p.ok) return priceWire(q.contractAddress, q.tokenID, p);
  throw new RpcError(p.known ? IndexerErrors.Unavailable : IndexerErrors.NotFound, `${q.contractAddress} has no USD price on chain ${chainId}: ${p.reason}`);
}

/** Every token the chain prices, native first, in configuration order: a page of priced ones, and the rest with their reason. */
export async function listedPrices(s: PriceDeps, chainId: number, offset: number, limit: number) {
  const book = s.prices.get(chainId);
  const keys = book ? book.listed().slice(offset, offset + limit) : [];
  const prices = await pricesOf(s, chainId, keys);
  const rows = keys.map((k) => ({ key: k, address: k === 'native' ? NATIVE_ADDRESS : k, p: prices.get(k)! }));
  return rows;
}

export function listedWire(rows: Awaited<ReturnType<typeof listedPrices>>) {
  const prices: PriceWire[] = [];
  const unpriced: Array<{ contractAddress: string; reason: string }> = [];
  for (const r of rows) {
    if (r.p.ok) prices.push(priceWire(r.address, undefined, r.p));
    else unpriced.push({ contractAddress: r.address, reason: r.p.reason });
  }
  return { prices, unpriced };
}
