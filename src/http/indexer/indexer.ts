import { z } from 'zod';
import { fetchReceipt, findReceipt, metadataFor, receiptWire, syncBalance, tokenSupplyJson, type ChainIndexer } from '../../indexer/index.ts';
import type { Services } from '../../services.ts';
import { APP_VERSION } from '../../version.ts';
import { IndexerErrors, RpcError, indexerErrorMap as E } from '../core/errors.ts';
import { RawJson, method, type RpcContext, type ServiceDef } from '../core/webrpc.ts';
import { AddressArg, TokenIdArg } from '../core/args.ts';
import {
  AccountArgs,
  BalanceUpdatesArgs,
  ByContractArgs,
  GetTokenBalancesArgs,
  HistoryArgs,
  INDEXER_PAGE,
  MAP_LIMITS,
  MAX_RECEIPT_WAIT_MS,
  PageArg,
  ReceiptFilterArg,
  PriceQueryArg,
  TokenBalancesFilterArgs,
  TxHash,
  bad,
  paging,
} from './args.ts';
import { balanceUpdates, balancesByContract, balancesByFilter, nativeBalance, tokenBalances, transactionHistory, type AnswerDeps } from './answers.ts';
import { balancePrices, listedPrices, listedWire, onePrice, queryPrices } from './prices.ts';
import { runtimeStatus, seesDetail, versionInfo, type StatusDeps } from '../health/status-methods.ts';
import { NoArgs } from '../core/args.ts';
import { indexerListenerMethods, type ListenerDeps } from './listeners.ts';
import { indexerStreamMethods } from './streams.ts';
import { withReadShares } from './read-shares.ts';
import type { OpenStreams } from '../core/stream-registry.ts';

/** What the Indexer service uses: the chains' indexers, the metadata they carry, the networks, the config and metrics, and what its answers, listeners and RuntimeStatus use. */
export type IndexerServiceDeps = AnswerDeps & StatusDeps & ListenerDeps & Pick<Services, 'config' | 'fleet' | 'indexerMetadata' | 'indexers' | 'metrics' | 'networks'>;

export const INDEXER_SCHEMA = 'sequence-indexer@v0.4.0';
const SCHEMA_HASH = '2bca559c4c590bce7d70c33df115a58399efec82';
/** GetTokenIDRanges answers at most this many runs (Sequence's limit); moreRanges says there are others after them. */
const MAX_ID_RANGES = 15_000;

/** Sequence answers a missing accountAddress with the wallet of the caller's session; metarelay keys belong to projects, not wallets. */
const NO_SESSION_ACCOUNT = 'accountAddress: required (Sequence takes the wallet of a signed-in session when it is left out; metarelay has no wallet sessions, so name the account)';

/** The indexer of the network in the path (`/indexer/<name or id>/rpc/Indexer/...`). */
function indexerFor(s: IndexerServiceDeps, ctx: RpcContext): ChainIndexer {
  const network = ctx.params.network ?? '';
  const found = s.networks.lookup(network);
  if (!found.ok) throw new RpcError(E.chainNotFound, found.message);
  const ix = s.indexers.get(found.chain.chainId);
  if (!ix) throw new RpcError(E.chainNotFound, `network ${found.chain.name} is not indexed (chains[].indexer in the config)`);
  return ix;
}

/** A response whose members are JSON text already (arrays of items built by the indexer's view). */
function raw(members: Record<string, unknown>, lists: Record<string, string[]>): RawJson {
  const parts = Object.entries(members).map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`);
  for (const [k, items] of Object.entries(lists)) parts.push(`${JSON.stringify(k)}:[${items.join(',')}]`);
  return new RawJson(`{${parts.join(',')}}`);
}

export function indexerService(s: IndexerServiceDeps, streams: OpenStreams): ServiceDef {
  /** Summary and Details share the filter; they differ in one row per token or per contract. */
  const byFilter = (summary: boolean) =>
    method({
      input: TokenBalancesFilterArgs,
      handler: async (a, ctx) => {
        const out = await balancesByFilter(s, indexerFor(s, ctx), a, summary);
        return raw({ page: out.page, nativeBalances: out.nativeBalances }, { balances: out.items });
      },
    });

  return {
    name: 'Indexer',
    schema: INDEXER_SCHEMA,
    errors: E,
    defaultAuth: (name) => (s.config.auth.publicMethods.includes(name) ? 'optional' : s.config.auth.rpc),
    // Reads run in their caller's share of the key (read-shares.ts).
    methods: withReadShares(
      {
        // Webhook listeners: a project's, on the chain of the path (access key, or admin token + projectId).
        ...indexerListenerMethods(s, (ctx) => indexerFor(s, ctx)),
        ...indexerStreamMethods(
          (ctx) => indexerFor(s, ctx),
          { open: streams, clientIpv6Prefix: s.config.clientIpv6Prefix, rateLimited: IndexerErrors.RateLimited },
          { priced: (chainId, rows) => balancePrices(s, chainId, rows), backlog: s.config.indexer.streamPriceBacklog },
        ),
        Ping: method({
          input: NoArgs,
          handler: async (_a, ctx) => {
            indexerFor(s, ctx);
            return { status: true };
          },
        }),
        Version: method({ input: NoArgs, handler: async () => ({ version: versionInfo('v0.4.0', SCHEMA_HASH) }) }),
        RuntimeStatus: method({
          input: NoArgs,
          handler: async (_a, ctx) => {
            const ix = indexerFor(s, ctx);
            const [base, cursor, head] = await Promise.all([runtimeStatus(s, seesDetail(ctx)), ix.cursor(), ix.chain.head.number().catch(() => null)]);
            const last = cursor ? Number(cursor.block) : 0;
            const target = head === null ? null : Number(head) - ix.cfg.confirmations;
            const percent = target === null || target <= 0 ? (cursor ? 100 : 0) : Math.min(100, Math.round((last / target) * 10_000) / 100);
            return {
              status: {
                healthOK: base.healthOK,
                indexerEnabled: true,
                startTime: base.startTime,
                uptime: base.uptime,
                ver: APP_VERSION,
                branch: base.branch,
                commitHash: base.commitHash,
                chainID: ix.chain.chainId,
                checks: {
                  // Following here, or the cursor moved lately (a worker process follows).
                  running: ix.follower.active || (cursor !== null && Date.now() - cursor.updatedAt.getTime() < 60_000),
                  runnables: base.runnable,
                  cgoEnabled: false,
                  quotaControlEnabled: false,
                  syncMode: target !== null && last >= target ? 'Synced' : 'Syncing',
                  percentIndexed: percent,
                  lastBlockNum: last,
                  lastBlockNumWithState: last,
                  bloomStatus: { enabled: false, initialized: false, bloomInitElapsedTime: '', stats: { hitRatio: '0', falsePositivesPercent: '0', hitCount: 0, missCount: 0, falsePositives: 0 } },
                  bond: {
                    pebble: { compactionCount: 0, compactionEstimatedDebt: 0, compactionInProgressBytes: 0, compactionNumInProgress: 0, compactionMarkedFiles: 0 },
                    estimatedDiskUsagePerTable: {},
                    estimatedDiskUsageTotal: '',
                  },
                  diskUsage: { humanReadable: '', used: 0, size: 0, percent: 0, dirs: {} },
                  metrics: { blocksPerSecond: 0, eventsPerSecond: 0 },
                  // metarelay's own: the scope and the malformed transfer logs skipped so far.
                  scope: ix.scope,
                  malformedLogs: cursor?.malformed ?? 0,
                },
              },
            };
          },
        }),
        GetChainID: method({ input: NoArgs, handler: async (_a, ctx) => ({ chainID: indexerFor(s, ctx).chain.chainId }) }),

        GetEtherBalance: method({
          input: AccountArgs,
          handler: async (a, ctx) => {
            const ix = indexerFor(s, ctx);
            if (!a.accountAddress) throw bad(NO_SESSION_ACCOUNT);
            const b = await nativeBalance(s, ix, a.accountAddress, true);
            return { balance: { accountAddress: a.accountAddress, balanceWei: b.balance } };
          },
        }),
        GetNativeTokenBalance: method({
          input: AccountArgs,
          handler: async (a, ctx) => {
            const ix = indexerFor(s, ctx);
            if (!a.accountAddress) throw bad(NO_SESSION_ACCOUNT);
            return { balance: await nativeBalance(s, ix, a.accountAddress, a.omitPrices) };
          },
        }),

        GetTokenBalances: method({
          input: GetTokenBalancesArgs,
          handler: async (a, ctx) => {
            const out = await tokenBalances(s, indexerFor(s, ctx), a);
            return raw({ page: out.page }, { balances: out.items });
          },
        }),
        GetTokenBalancesSummary: byFilter(true),
        GetTokenBalancesDetails: byFilter(false),
        GetTokenBalancesByContract: method({
          input: ByContractArgs,
          handler: async (a, ctx) => {
            const out = await balancesByContract(s, indexerFor(s, ctx), a);
            return raw({ page: out.page }, { balances: out.items });
          },
        }),

        GetTokenPrice: method({
          input: z.object({ q: PriceQueryArg }),
          handler: async (a, ctx) => ({ price: await onePrice(s, indexerFor(s, ctx).chain.chainId, a.q) }),
        }),
        GetTokenPrices: method({
          input: z.object({ q: z.array(PriceQueryArg).max(MAP_LIMITS.prices, `at most ${MAP_LIMITS.prices} queries`) }),
          // `unpriced` is metarelay's own: the queries left out of `prices`, and why.
          handler: async (a, ctx) => queryPrices(s, indexerFor(s, ctx).chain.chainId, a.q),
        }),
        ListTokenPrices: method({
          input: z.object({ page: PageArg }),
          handler: async (a, ctx) => {
            const ix = indexerFor(s, ctx);
            const pg = paging(a.page);
            const { rows, page } = pg.cut(await listedPrices(s, ix.chain.chainId, pg.offset, pg.limit));
            return { page, ...listedWire(rows) };
          },
        }),

        GetTokenSupplies: method({
          input: z.object({ contractAddress: AddressArg, includeMetadata: z.boolean().optional(), page: PageArg }),
          handler: async (a, ctx) => {
            const ix = indexerFor(s, ctx);
            const pg = paging(a.page);
            const [rows, type] = await Promise.all([ix.reads.supplies(a.contractAddress, undefined, pg.offset, pg.limit), ix.reads.contractType(a.contractAddress)]);
            const { rows: page, page: pageWire } = pg.cut(rows);
            const meta = a.includeMetadata
              ? await metadataFor(s.indexerMetadata, ix.chain, [{ contract: a.contractAddress, type: type ?? 'UNKNOWN', tokenIds: page.map((r) => r.tokenId) }], { tokens: true })
              : undefined;
            return raw({ page: pageWire, contractType: type ?? 'UNKNOWN' }, { tokenIDs: page.map((r) => tokenSupplyJson(ix.chain.chainId, a.contractAddress, r, meta)) });
          },
        }),
        GetTokenSuppliesMap: method({
          input: z.object({
            tokenMap: z
              .record(z.string(), z.array(TokenIdArg).max(MAP_LIMITS.ids, `at most ${MAP_LIMITS.ids} token ids per contract`))
              .refine((m) => Object.keys(m).length <= MAP_LIMITS.contracts, `at most ${MAP_LIMITS.contracts} contracts`),
            includeMetadata: z.boolean().optional(),
          }),
          handler: async (a, ctx) => {
            const ix = indexerFor(s, ctx);
            const entries = Object.entries(a.tokenMap).map(([k, ids]) => {
              const c = AddressArg.safeParse(k);
              if (!c.success) throw bad(`tokenMap: key "${k.slice(0, 60)}" is not a 20-byte 0x address`);
              return [c.data, ids] as const;
            });
            const found = await Promise.all(
              entries.map(async ([c, ids]) => {
                const [rows, type] = await Promise.all([ix.reads.supplies(c, ids.length ? ids : undefined, 0, ids.length ? ids.length : INDEXER_PAGE.max), ix.reads.contractType(c)]);
                return { c, rows, type: type ?? 'UNKNOWN' };
              }),
            );
            const meta = a.includeMetadata
              ? await metadataFor(
                  s.indexerMetadata,
                  ix.chain,
                  found.map((f) => ({ contract: f.c, type: f.type, tokenIds: f.rows.map((r) => r.tokenId) })),
                  { tokens: true },
                )
              : undefined;
            // Keys that differ only in case name one contract: their lists are joined.
            const supplies = new Map<string, string[]>();
            for (const f of found) supplies.set(f.c, [...(supplies.get(f.c) ?? []), ...f.rows.map((r) => tokenSupplyJson(ix.chain.chainId, f.c, r, meta))]);
            return new RawJson(`{"supplies":{${[...supplies].map(([c, items]) => `${JSON.stringify(c)}:[${items.join(',')}]`).join(',')}}}`);
          },
        }),
        GetTokenIDs: method({
          input: z.object({ contractAddress: AddressArg, page: PageArg }),
          handler: async (a, ctx) => {
            const ix = indexerFor(s, ctx);
            const pg = paging(a.page);
            const [rows, type] = await Promise.all([ix.reads.supplies(a.contractAddress, undefined, pg.offset, pg.limit), ix.reads.contractType(a.contractAddress)]);
            const { rows: page, page: pageWire } = pg.cut(rows);
            return { page: pageWire, contractType: type ?? 'UNKNOWN', tokenIDs: page.map((r) => r.tokenId) };
          },
        }),

        GetTokenIDRanges: method({
          input: z.object({ contractAddress: AddressArg, lastTokenID: TokenIdArg.optional() }),
          handler: async (a, ctx) => {
            const ix = indexerFor(s, ctx);
            const [ranges, type] = await Promise.all([ix.reads.idRanges(a.contractAddress, a.lastTokenID ?? null, MAX_ID_RANGES + 1), ix.reads.contractType(a.contractAddress)]);
            return { contractType: type ?? 'UNKNOWN', tokenIDRanges: ranges.slice(0, MAX_ID_RANGES), moreRanges: ranges.length > MAX_ID_RANGES };
          },
        }),

        GetBalanceUpdates: method({
          input: BalanceUpdatesArgs,
          handler: async (a, ctx) => {
            const out = await balanceUpdates(s, indexerFor(s, ctx), a);
            return raw({ page: out.page }, { balances: out.items });
          },
        }),

        FetchTransactionReceipt: method({
          input: z.object({ txnHash: TxHash, maxBlockWait: z.number().int().min(-1).max(1000).optional() }),
          handler: async (a, ctx) => {
            const ix = indexerFor(s, ctx);
            const r = await fetchReceipt(ix.chain, a.txnHash as `0x${string}`, a.maxBlockWait ?? 0, MAX_RECEIPT_WAIT_MS, Math.min(ix.cfg.pollMs, 500));
            if (!r) throw new RpcError(IndexerErrors.NotFound, `transaction ${a.txnHash} is not mined on ${ix.chain.name}`);
            const head = await ix.chain.head.number();
            return { receipt: receiptWire(r, head, ix.cfg.confirmations) };
          },
        }),

        FetchTransactionReceiptWithFilter: method({
          input: z.object({ filter: ReceiptFilterArg, maxBlockWait: z.number().int().min(-1).max(1000).optional() }),
          handler: async (a, ctx) => {
            const ix = indexerFor(s, ctx);
            const r = await findReceipt(ix.chain, a.filter, a.maxBlockWait ?? 0, MAX_RECEIPT_WAIT_MS, Math.min(ix.cfg.pollMs, 500));
            if (!r) throw new RpcError(IndexerErrors.NotFound, `no transaction matching the filter was mined on ${ix.chain.name} within ${Math.max(0, a.maxBlockWait ?? 0)} blocks of the head`);
            const head = await ix.chain.head.number();
            return { receipt: receiptWire(r, head, ix.cfg.confirmations) };
          },
        }),

        SyncBalance: method({
          input: z.object({ accountAddress: AddressArg, contractAddress: AddressArg, tokenID: TokenIdArg.optional() }),
          handler: async (a, ctx) => {
            const ix = indexerFor(s, ctx);
            const out = await syncBalance(ix, a.accountAddress, a.contractAddress, a.tokenID);
            if (!out.ok) {
              throw new RpcError(out.reason === 'unknownContract' ? IndexerErrors.NotFound : out.reason === 'needsTokenId' ? IndexerErrors.InvalidArgument : IndexerErrors.Unavailable, out.message);
            }
            return {};
          },
        }),

        GetTransactionHistory: method({
          input: HistoryArgs,
          handler: async (a, ctx) => {
            const out = await transactionHistory(s, indexerFor(s, ctx), a);
            return raw({ page: out.page }, { transactions: out.items });
          },
        }),
      },
      s.config,
      s.metrics,
      s.fleet,
    ),
  };
}
