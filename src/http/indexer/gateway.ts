import { z } from 'zod';
import { databaseOutageOf } from '../../store/outage.ts';
import { chainOutageOf } from '../../chain/outage.ts';
import type { ChainIndexer } from '../../indexer/index.ts';
import type { Services } from '../../services.ts';
import { IndexerErrors, RpcError, indexerErrorMap as E } from '../core/errors.ts';
import { RawJson, method, type RpcContext, type ServiceDef } from '../core/webrpc.ts';
import { runtimeStatus, seesDetail, versionInfo, type StatusDeps } from '../health/status-methods.ts';
import { NoArgs } from '../core/args.ts';
import { AccountArgs, BalanceUpdatesArgs, ByContractArgs, GetTokenBalancesArgs, HistoryArgs, MAP_LIMITS, PriceQueryArg, TokenBalancesFilterArgs, bad } from './args.ts';
import { balanceUpdates, balancesByContract, balancesByFilter, nativeBalance, tokenBalances, transactionHistory, type PageWire, type AnswerDeps } from './answers.ts';
import { INDEXER_SCHEMA } from './indexer.ts';
import { queryPrices } from './prices.ts';

/** What the IndexerGateway service uses: every chain's indexer and client, the directory, the networks and the config, and what its answers and RuntimeStatus use. */
export type GatewayDeps = AnswerDeps & StatusDeps & Pick<Services, 'chains' | 'config' | 'directory' | 'indexers' | 'networks'>;

// The IndexerGateway (@0xsequence/indexer indexergw.gen.ts, `SequenceIndexerGateway`): the Indexer's
// reads across every indexed chain in one call, each chain asked concurrently through the same
// per-chain answers (answers.ts). A chain that fails (its node down) does not fail the call:
// its entry carries `errorReason` and no results, the other chains answer as usual.

const GW_SCHEMA_HASH = '212120aad9a46e88ead9a2183c5717e9902d8c2b';

/** Which chains a gateway call asks: named ones (ids, names) or all indexed, narrowed by networkType. */
const Scope = {
  chainIds: z.array(z.number().int().positive()).max(100, 'at most 100 chains').optional(),
  networks: z.array(z.string()).max(100, 'at most 100 networks').optional(),
  networkType: z.enum(['MAINNETS', 'TESTNETS', 'ALL']).optional(),
};
type ScopeArgs = { chainIds?: number[]; networks?: string[]; networkType?: 'MAINNETS' | 'TESTNETS' | 'ALL' };

/** One chain's part of an answer: its results, or why it has none. */
type ChainPart<T> = { ix: ChainIndexer; ok: true; value: T } | { ix: ChainIndexer; ok: false; reason: string };

export function indexerGatewayService(s: GatewayDeps): ServiceDef {
  const byType = (ids: number[], type: ScopeArgs['networkType']) => (!type || type === 'ALL' ? ids : ids.filter((id) => s.directory.isTestnet(id) === (type === 'TESTNETS')));

  /** The chains of a call, in configuration order; a key held to some networks sees only those. */
  function chainsOf(a: ScopeArgs, ctx: RpcContext): ChainIndexer[] {
    const allowed = ctx.project?.allowedChainIds;
    const named = [...(a.chainIds ?? []).map(String), ...(a.networks ?? [])];
    let ids: number[];
    if (named.length) {
      ids = [];
      for (const n of named) {
        const found = s.networks.lookup(n);
        if (!found.ok) throw bad(`networks: ${found.message}`);
        if (!s.indexers.has(found.chain.chainId)) throw bad(`networks: ${found.chain.name} is not indexed here (chains[].indexer in the config)`);
        if (allowed && !allowed.includes(found.chain.chainId)) throw new RpcError(E.networkNotAllowed, `network ${found.chain.name} is not enabled for this access key's project`);
        if (!ids.includes(found.chain.chainId)) ids.push(found.chain.chainId);
      }
    } else {
      ids = [...s.indexers.keys()].filter((id) => !allowed || allowed.includes(id));
    }
    return byType(ids, a.networkType).map((id) => s.indexers.get(id)!);
  }

  /** Asks each chain at once; a refused request (bad arguments) fails the call, anything else only its chain. */
  async function across<T>(chains: ChainIndexer[], ask: (ix: ChainIndexer) => Promise<T>, ctx: RpcContext): Promise<Array<ChainPart<T>>> {
    return Promise.all(
      chains.map(async (ix): Promise<ChainPart<T>> => {
        try {
          return { ix, ok: true, value: await ask(ix) };
        } catch (err) {
          if (err instanceof RpcError && err.def === IndexerErrors.InvalidArgument) throw err;
          // A chain's node first: a refused connection to it is that chain's outage, not the database's.
          const outage = chainOutageOf(err, s.chains.values());
          // The database is every chain's: the whole call answers 503 (webrpc.ts), not each chain an internal error.
          if (!outage && databaseOutageOf(err) !== undefined) throw err;
          if (outage) return { ix, ok: false, reason: `chain ${outage.chain} (${outage.chainId}): its node ${outage.rateLimited ? 'is rate-limiting us' : 'cannot be reached'} (${outage.cause})` };
          if (!(err instanceof RpcError)) ctx.request.log.error({ err, chain: ix.chain.name }, 'indexer gateway: a chain failed');
          return { ix, ok: false, reason: err instanceof RpcError ? `${err.def.name}: ${err.detail ?? err.def.message}` : `chain ${ix.chain.name}: internal error (request ${ctx.request.id})` };
        }
      }),
    );
  }

  /** One page over every chain: each chain answers the same page; `more` while any chain has more. */
  const pageOf = (parts: Array<ChainPart<{ page: PageWire }>>, fallback: PageWire): PageWire => {
    const pages = parts.flatMap((p) => (p.ok ? [p.value.page] : []));
    const more = pages.find((p) => p.more);
    return more ?? pages[0] ?? fallback;
  };
  const emptyPage = (a: { page?: { page?: number; pageSize?: number } }): PageWire => ({ page: a.page?.page ?? 0, pageSize: a.page?.pageSize ?? 50, more: false });

  /** `{"chainId":…,"errorReason"?:…,"results":[…]}` per chain, the results being JSON text items. */
  const entries = (parts: Array<ChainPart<{ items: string[] }>>) =>
    parts.map((p) => (p.ok ? `{"chainId":${p.ix.chain.chainId},"results":[${p.value.items.join(',')}]}` : `{"chainId":${p.ix.chain.chainId},"errorReason":${JSON.stringify(p.reason)},"results":[]}`));
  const listAnswer = (key: string, parts: Array<ChainPart<{ page: PageWire; items: string[] }>>, a: { page?: { page?: number; pageSize?: number } }) =>
    new RawJson(`{"page":${JSON.stringify(pageOf(parts, emptyPage(a)))},${JSON.stringify(key)}:[${entries(parts).join(',')}]}`);

  const byFilter = (summary: boolean) =>
    method({
      input: TokenBalancesFilterArgs.extend(Scope),
      handler: async (a, ctx) => {
        const parts = await across(chainsOf(a, ctx), (ix) => balancesByFilter(s, ix, a, summary), ctx);
        const natives = parts.map((p) => (p.ok ? { chainId: p.ix.chain.chainId, results: p.value.nativeBalances } : { chainId: p.ix.chain.chainId, errorReason: p.reason, results: [] }));
        return new RawJson(`{"page":${JSON.stringify(pageOf(parts, emptyPage(a)))},"nativeBalances":${JSON.stringify(natives)},"balances":[${entries(parts).join(',')}]}`);
      },
    });

  return {
    name: 'IndexerGateway',
    schema: INDEXER_SCHEMA,
    errors: E,
    defaultAuth: (name) => (s.config.auth.publicMethods.includes(name) ? 'optional' : s.config.auth.rpc),
    methods: {
      Ping: method({ input: NoArgs, handler: async () => ({ status: true }) }),
      Version: method({ input: NoArgs, handler: async () => ({ version: versionInfo('v0.4.0', GW_SCHEMA_HASH) }) }),
      RuntimeStatus: method({
        input: NoArgs,
        handler: async (_a, ctx) => {
          const base = await runtimeStatus(s, seesDetail(ctx));
          return {
            status: {
              healthOK: base.healthOK,
              startTime: base.startTime,
              uptime: base.uptime,
              ver: base.ver,
              branch: base.branch,
              commitHash: base.commitHash,
              // The backends are this process's own indexers: no network hop, so no response times are kept.
              backends: [...s.indexers.values()].map((ix) => ({ name: ix.chain.name, chainId: ix.chain.chainId, responseTime: { percentiles: {}, average: 0 } })),
            },
          };
        },
      }),
      GetChains: method({
        input: z.object({ networkType: Scope.networkType }),
        handler: async (a, ctx) => ({ chains: chainsOf({ networkType: a.networkType }, ctx).map((ix) => ({ chainId: ix.chain.chainId, chainName: ix.chain.name })) }),
      }),

      GetNativeTokenBalance: method({
        input: AccountArgs.extend(Scope),
        handler: async (a, ctx) => {
          const account = a.accountAddress;
          if (!account) throw bad('accountAddress: required');
          const parts = await across(chainsOf(a, ctx), (ix) => nativeBalance(s, ix, account, a.omitPrices), ctx);
          // A chain that failed has no balance to show: `result` is null (Go's nil), never a made-up zero.
          return { balances: parts.map((p) => (p.ok ? { chainId: p.ix.chain.chainId, result: p.value } : { chainId: p.ix.chain.chainId, errorReason: p.reason, result: null })) };
        },
      }),
      GetTokenBalances: method({
        input: GetTokenBalancesArgs.extend(Scope),
        handler: async (a, ctx) => listAnswer('balances', await across(chainsOf(a, ctx), (ix) => tokenBalances(s, ix, a), ctx), a),
      }),
      GetTokenBalancesSummary: byFilter(true),
      GetTokenBalancesDetails: byFilter(false),
      GetTokenBalancesByContract: method({
        input: ByContractArgs.extend(Scope),
        handler: async (a, ctx) => listAnswer('balances', await across(chainsOf(a, ctx), (ix) => balancesByContract(s, ix, a), ctx), a),
      }),
      GetBalanceUpdates: method({
        input: BalanceUpdatesArgs.extend(Scope),
        handler: async (a, ctx) => listAnswer('balances', await across(chainsOf(a, ctx), (ix) => balanceUpdates(s, ix, a), ctx), a),
      }),
      GetTransactionHistory: method({
        input: HistoryArgs.extend(Scope),
        handler: async (a, ctx) => listAnswer('transactions', await across(chainsOf(a, ctx), (ix) => transactionHistory(s, ix, a), ctx), a),
      }),

      GetTokenPrice: method({
        input: z.object({ q: GatewayPriceQuery }),
        handler: async (a, ctx) => ({ price: (await gatewayPrices(s, [a.q], ctx))[0] }),
      }),
      GetTokenPrices: method({
        input: z.object({ q: z.array(GatewayPriceQuery).max(100, 'at most 100 chains') }),
        handler: async (a, ctx) => ({ prices: await gatewayPrices(s, a.q, ctx) }),
      }),
    },
  };
}

/** `chainID` as the schema has it (a number), or a chain's name or number as a string, as every other chainID here (docs/api.md). */
const GatewayPriceQuery = z.object({
  chainID: z.union([z.number().int().positive(), z.string().trim().min(1, 'chainID: a chain id or name')]),
  queries: z.array(PriceQueryArg).max(MAP_LIMITS.prices, `at most ${MAP_LIMITS.prices} queries per chain`),
});

/**
 * The Sequence GatewayPrice per chain queried, concurrently: `results` are the priced queries; those
 * without a price are left out and listed in metarelay's `unpriced` with the reason; a chain whose
 * prices cannot be read (its node down) has `errorReason` and no results.
 */
async function gatewayPrices(s: GatewayDeps, qs: Array<z.infer<typeof GatewayPriceQuery>>, ctx: RpcContext) {
  const allowed = ctx.project?.allowedChainIds;
  // Names resolved to ids first: the answer's chainID is the schema's number whatever was sent.
  const resolved = qs.map((q) => {
    const found = s.networks.lookup(q.chainID);
    if (!found.ok) throw bad(`q.chainID: ${found.message}`);
    if (allowed && !allowed.includes(found.chain.chainId)) throw new RpcError(E.networkNotAllowed, `network ${found.chain.name} is not enabled for this access key's project`);
    return { chainID: found.chain.chainId, queries: q.queries };
  });
  return Promise.all(
    resolved.map(async (q) => {
      try {
        const { prices, unpriced } = await queryPrices(s, q.chainID, q.queries);
        return { chainID: q.chainID, results: prices, unpriced };
      } catch (err) {
        const outage = chainOutageOf(err, s.chains.values());
        return {
          chainID: q.chainID,
          errorReason: outage ? `chain ${outage.chain} (${outage.chainId}): its node cannot be reached (${outage.cause})` : `the price read failed: ${(err as Error).message.split('\n')[0]}`,
          results: [],
        };
      }
    }),
  );
}
