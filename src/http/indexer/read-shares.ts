// The Indexer's reads held to fair shares (issue 54, finding 7): each read is weighed by the rows it
// asks for and whether metadata comes with them, and run in its caller's share (util/cost-shares.ts):
// the key's rate, and inside it each client network's fraction and concurrency. A full share is
// answered 429 with Retry-After and the share's name. The rates are the fleet's: each API process
// holds its share of them (util/fleet-share.ts).

import type { AppConfig } from '../../config/schema.ts';
import type { Metrics } from '../../telemetry/metrics.ts';
import type { FleetSize } from '../../util/fleet-share.ts';
import { readShares } from '../../util/cost-shares.ts';
import { IndexerErrors } from '../core/errors.ts';
import { runInReadShare, type ReadShareGate } from '../core/read-share-run.ts';
import type { MethodDef } from '../core/webrpc.ts';
import { INDEXER_PAGE } from './args.ts';

type Args = Record<string, any>;
/** What a method's call weighs: the rows it may answer, whether metadata comes with them, whether it holds a slot while it runs. */
type Weight = { rows: (a: Args) => number; metadata?: (a: Args) => boolean; hold?: boolean };

const page = (a: Args): number => a.page?.pageSize ?? INDEXER_PAGE.default;
const one = () => 1;

/**
 * The methods charged, and their weights. Not charged: Ping, Version, RuntimeStatus, GetChainID (no
 * work), webhook listeners (a secret key's) and the Subscribe streams (held to their own allowances).
 */
const WEIGHTS: Record<string, Weight> = {
  GetTokenBalances: { rows: page, metadata: (a) => a.includeMetadata === true },
  GetTokenBalancesSummary: { rows: page, metadata: (a) => a.omitMetadata !== true },
  GetTokenBalancesDetails: { rows: page, metadata: (a) => a.omitMetadata !== true },
  GetTokenBalancesByContract: { rows: page, metadata: (a) => a.omitMetadata !== true },
  GetTransactionHistory: { rows: page, metadata: (a) => a.includeMetadata === true },
  GetTokenSupplies: { rows: page, metadata: (a) => a.includeMetadata === true },
  // A contract named with no ids answers up to a whole page of its tokens.
  GetTokenSuppliesMap: {
    rows: (a) => Object.values(a.tokenMap as Record<string, string[]>).reduce((n, ids) => n + (ids.length || INDEXER_PAGE.max), 0),
    metadata: (a) => a.includeMetadata === true,
  },
  GetTokenIDs: { rows: page },
  GetTokenIDRanges: { rows: () => INDEXER_PAGE.max },
  GetBalanceUpdates: { rows: page },
  ListTokenPrices: { rows: page },
  GetTokenPrices: { rows: (a) => (a.q as unknown[]).length },
  GetTokenPrice: { rows: one },
  GetEtherBalance: { rows: one },
  GetNativeTokenBalance: { rows: one },
  SyncBalance: { rows: one },
  // These mostly wait for a block: charged to the rate, holding none of the client's concurrency.
  FetchTransactionReceipt: { rows: one, hold: false },
  FetchTransactionReceiptWithFilter: { rows: one, hold: false },
};

/** What a call of `method` with these arguments costs, in units (a page of `rowsPerUnit` rows without metadata is 1). */
export function readCost(method: string, a: Args, o: AppConfig['indexer']['readShares']): number | undefined {
  const w = WEIGHTS[method];
  if (!w) return undefined;
  const units = Math.max(1, Math.ceil(w.rows(a) / o.rowsPerUnit));
  return Math.ceil(units * (w.metadata?.(a) ? o.metadataWeight : 1));
}

/** The Indexer's methods, those that read wrapped in their caller's share; `fleet`: the API processes sharing the rates. */
export function withReadShares(methods: Record<string, MethodDef<any>>, config: AppConfig, metrics: Metrics, fleet?: FleetSize): Record<string, MethodDef<any>> {
  const o = config.indexer.readShares;
  if (!o.enabled) return methods;
  const { shares, limits } = readShares(o, fleet);
  metrics.indexerReadShares.watch(() => shares.reading());
  for (const [limit, v] of Object.entries({ ...limits, metadataWeight: o.metadataWeight })) metrics.indexerReadShareLimit.set({ limit }, v);
  const gate: ReadShareGate = { shares, net: o, rateLimited: IndexerErrors.RateLimited, refused: (share) => metrics.indexerReadsRefused.inc({ share }) };
  const out: Record<string, MethodDef<any>> = { ...methods };
  for (const [name, def] of Object.entries(methods)) {
    const w = WEIGHTS[name];
    if (!w) continue;
    out[name] = {
      ...def,
      handler: (a, ctx) =>
        runInReadShare(
          gate,
          ctx.request,
          () => readCost(name, a, o),
          () => def.handler(a, ctx),
          { hold: w.hold },
        ),
    };
  }
  return out;
}
