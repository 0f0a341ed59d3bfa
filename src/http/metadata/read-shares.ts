// The Metadata service's reads held to fair shares by cost, as the Indexer's are (http/indexer/read-shares.ts):
// a publishable key ships in apps, so anyone may read with it, and one client asking for 50 × 50 token
// batches as fast as they are answered would take the process from every other client of the key. Each
// read, RPC or REST, is weighed by the rows it asks for (tokens, contracts, search results) and run in its
// caller's share (util/cost-shares.ts); a full share is answered 429 with Retry-After and the share's name.
//
// A read is weighed by what it asks, not by what it will cost: whether its tokens are in the hot cache,
// the store or still to be fetched is only known once it runs (their fetches are held to the fetch
// slots' own shares: metadata/tokens/fetch-shares.ts). What is known before running is charged nothing
// here: an answer from the response cache is given before the handler runs (it spends only from the
// key's request rate, `auth.rateLimit`).

import type { FastifyRequest } from 'fastify';
import type { AppConfig } from '../../config/schema.ts';
import type { Metrics } from '../../telemetry/metrics.ts';
import type { FleetSize } from '../../util/fleet-share.ts';
import { readShares } from '../../util/cost-shares.ts';
import { SEARCH_LIMITS } from '../../metadata/search/filter.ts';
import { MetadataErrors } from '../core/errors.ts';
import { runInReadShare, type ReadShareGate } from '../core/read-share-run.ts';
import type { MethodDef } from '../core/webrpc.ts';

type Args = Record<string, any>;
/** What the weights know besides the arguments: the chains a cross-chain lookup looks at. */
type Scope = { chains: number };
/** What a call weighs: the rows it asks for (tokens, contracts, search results). */
type Weight = { rows: (a: Args, scope: Scope) => number };

/**
 * A search by text finds and ranks every match before it answers a page: measured at 30-40 ms on PGlite
 * whatever the page size (bench/metadata-read-shares.ts), so it counts as at least this many rows.
 */
export const TEXT_SEARCH_ROWS = 250;

const one = () => 1;
const ids = (a: Args) => (a.tokenIDs as unknown[]).length;
/** Searches' pages (SearchPageArg): the size is always set once parsed. */
const searchPage = (a: Args) => a.page?.pageSize ?? SEARCH_LIMITS.defaultPageSize;
const textSearch = (a: Args) => Math.max(searchPage(a), TEXT_SEARCH_ROWS);
/** Contract search and the directory page by 20 unless told. */
const listPage = (a: Args) => a.page?.pageSize ?? 20;
const everywhere = (n: number, scope: Scope) => n * Math.max(1, scope.chains);

/**
 * The methods charged, and their weights: the one place each is said (REST reads are weighed as the RPC
 * method they answer: http/metadata/rest.ts). Not charged: Ping, Version, RuntimeStatus (no work);
 * refresh and sync tasks and the mint monitor (a project's queue, held to its own limits:
 * `refresh.maxQueuedPerProject`); the directory's admin methods (the operator's, never charged).
 */
export const WEIGHTS: Record<string, Weight> = {
  GetTokenMetadata: { rows: ids },
  GetTokenMetadataBatch: { rows: (a) => Object.values(a.contractTokenMap as Record<string, unknown[]>).reduce((n, list) => n + list.length, 0) },
  GetContractInfo: { rows: one },
  GetContractInfoBatch: { rows: (a) => (a.contractAddresses as unknown[]).length },
  // On every configured chain.
  FindContractInfo: { rows: (_a, c) => everywhere(1, c) },
  FindContractInfoBatch: { rows: (a, c) => everywhere((a.contractAddresses as unknown[]).length, c) },
  SearchContractInfo: { rows: (_a, c) => everywhere(1, c) },
  SearchContractInfoBatch: { rows: (a, c) => everywhere((a.contractAddresses as unknown[]).length, c) },
  // Contract search reads an index in rank order (p99 under 6 ms over 100 000 contracts: docs/performance.md).
  SearchContracts: { rows: listPage },
  SearchContractsByQuery: { rows: listPage },
  // By properties: the page; with text, the text search's floor.
  SearchTokenMetadata: { rows: (a) => (a.filter?.text ? textSearch(a) : searchPage(a)) },
  SearchTokenMetadataTokenIDs: { rows: (a) => (a.filter?.text ? textSearch(a) : searchPage(a)) },
  SearchTokenIDs: { rows: (a) => (a.filter?.text ? textSearch(a) : searchPage(a)) },
  SearchTokenMetadataByQuery: { rows: textSearch },
  SearchTokens: { rows: textSearch },
  // Twenty contracts, and a text search of tokens.
  SearchMetadata: { rows: () => 20 + TEXT_SEARCH_ROWS },
  // Every property of a contract and its commonest values (35 ms measured): as many rows as properties it may answer.
  GetTokenMetadataPropertyFilters: { rows: () => SEARCH_LIMITS.filterProperties },
  TokenCollectionFilters: { rows: () => SEARCH_LIMITS.filterProperties },
  GetTokenDirectoryNetworks: { rows: one },
  DirectoryGetNetworks: { rows: one },
  GetTokenDirectory: { rows: listPage },
  DirectoryGetCollections: { rows: listPage },
  ListTokenDirectory: { rows: listPage },
  SearchTokenDirectory: { rows: listPage },
  DirectorySearchCollections: { rows: listPage },
  IsInTokenDirectory: { rows: one },
  GetFeatureIndex: { rows: one },
};

type Options = AppConfig['metadata']['readShares'];

/** What a call of `method` with these arguments costs, in units (`rowsPerUnit` rows are 1). */
export function readCost(method: string, a: Args, o: Pick<Options, 'rowsPerUnit'>, scope: Scope): number | undefined {
  const w = WEIGHTS[method];
  if (!w) return undefined;
  return Math.max(1, Math.ceil(w.rows(a, scope) / o.rowsPerUnit));
}

/** One process's shares of metadata reads, for both forms: a key's RPC and REST reads spend from the same buckets. */
export interface MetadataReadShares {
  /** The service's methods, those with a weight run in their caller's share. */
  wrap(methods: Record<string, MethodDef<any>>): Record<string, MethodDef<any>>;
  /** Runs a REST read, weighed as the RPC `method` it answers with these `args`, in the caller's share; a full share throws RpcError (RateLimited). */
  run<T>(req: FastifyRequest, method: string, args: Args, task: () => Promise<T>): Promise<T>;
}

/** `fleet`: the API processes sharing the rates (each holds its share, util/fleet-share.ts); the concurrency and queue are this process's. */
export function metadataReadShares(config: AppConfig, chains: () => number, metrics: Metrics, fleet?: FleetSize): MetadataReadShares {
  const o = config.metadata.readShares;
  if (!o.enabled) return { wrap: (methods) => methods, run: (_req, _m, _a, task) => task() };
  const { shares, limits } = readShares(o, fleet);
  metrics.metadataReadShares.watch(() => shares.reading());
  for (const [limit, v] of Object.entries(limits)) metrics.metadataReadShareLimit.set({ limit }, v);

  const gate: ReadShareGate = { shares, net: o, rateLimited: MetadataErrors.RateLimited, refused: (share) => metrics.metadataReadsRefused.inc({ share }) };
  const run = <T>(req: FastifyRequest, method: string, a: Args, task: () => Promise<T>): Promise<T> => runInReadShare(gate, req, () => readCost(method, a, o, { chains: chains() }), task);

  return {
    run,
    wrap(methods) {
      const out: Record<string, MethodDef<any>> = { ...methods };
      for (const [name, def] of Object.entries(methods)) {
        if (!WEIGHTS[name]) continue;
        out[name] = { ...def, handler: (a, ctx) => run(ctx.request, name, a, () => def.handler(a, ctx)) };
      }
      return out;
    },
  };
}
