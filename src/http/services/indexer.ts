import { z } from 'zod';
import {
  fetchReceipt,
  findReceipt,
  metadataFor,
  receiptWire,
  syncBalance,
  readHistory,
  tokenBalanceJson,
  tokenSupplyJson,
  transactionJson,
  type BalanceRow,
  type ChainIndexer,
  type TokenType,
} from '../../indexer/index.ts';
import type { Services } from '../../services.ts';
import { APP_VERSION } from '../../version.ts';
import { IndexerErrors, RpcError, indexerErrorMap as E } from '../errors.ts';
import { RawJson, method, type RpcContext, type ServiceDef } from '../webrpc.ts';
import { AddressArg, TokenIdArg } from './args.ts';
import {
  AccountArgs,
  BlockNumber,
  ByContractArgs,
  GetTokenBalancesArgs,
  HistoryArgs,
  INDEXER_PAGE,
  MAP_LIMITS,
  MAX_RECEIPT_WAIT_MS,
  PageArg,
  ReceiptFilterArg,
  TokenBalancesFilterArgs,
  TxHash,
  bad,
  gradeOf,
  narrowToGrade,
  paging,
  type Grade,
} from './indexer-args.ts';
import { NoArgs, runtimeStatus, versionInfo } from './common.ts';
import { refusedIndexerMethods } from './indexer-unsupported.ts';
import { indexerStreamMethods } from './indexer-streams.ts';
import type { OpenStreams } from '../stream-registry.ts';

export const INDEXER_SCHEMA = 'sequence-indexer@v0.4.0';
const SCHEMA_HASH = '2bca559c4c590bce7d70c33df115a58399efec82';
/** GetTokenIDRanges answers at most this many runs (Sequence's limit); moreRanges says there are others after them. */
const MAX_ID_RANGES = 15_000;

/** Sequence answers a missing accountAddress with the wallet of the caller's session; metarelay keys belong to projects, not wallets. */
const NO_SESSION_ACCOUNT = 'accountAddress: required (Sequence takes the wallet of a signed-in session when it is left out; metarelay has no wallet sessions, so name the account)';

/** The indexer of the network in the path (`/indexer/<name or id>/rpc/Indexer/...`). */
function indexerFor(s: Services, ctx: RpcContext): ChainIndexer {
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

const nonEmpty = <T>(a: T[] | undefined): T[] | undefined => (a?.length ? a : undefined);
const merge = (one: string | undefined, many: string[] | undefined) => nonEmpty([...(one ? [one] : []), ...(many ?? [])]);

export function indexerService(s: Services, streams: OpenStreams): ServiceDef {
  /** The query's contract filters narrowed to the contracts of a grade (one read of the chain's verified list, only when asked). */
  const graded = async <Q extends { contracts?: string[]; excludeContracts?: string[] }>(ix: ChainIndexer, q: Q, grade: Grade): Promise<Q> =>
    grade ? narrowToGrade(q, grade, await s.indexerMetadata.verified(ix.chain.chainId)) : q;

  /**
   * History's transaction hashes: those asked, narrowed to the transactions that carried the meta-transactions
   * asked (the relayer's record). Meta-transaction ids that carried nothing yet leave an empty list: no rows.
   */
  const carriedBy = async (ix: ChainIndexer, hashes: string[] | undefined, metaIds: string[] | undefined): Promise<string[] | undefined> => {
    if (!metaIds) return hashes;
    const carried = await s.metaTxns.txnHashesOf(ix.chain.chainId, metaIds);
    return hashes ? hashes.filter((h) => carried.includes(h)) : carried;
  };

  const nativeBalance = async (ix: ChainIndexer, account: `0x${string}`) => {
    const wei = await ix.chain.public.getBalance({ address: account });
    const currency = ix.chain.public.chain?.nativeCurrency;
    return {
      accountAddress: account,
      chainId: ix.chain.chainId,
      name: currency?.name ?? 'Ether',
      symbol: currency?.symbol ?? 'ETH',
      balance: wei.toString(),
      balanceUSD: '0',
      priceUSD: '0',
    };
  };

  /** Summary and Details share the filter; they differ in one row per token or per contract. */
  const balancesByFilter = (summary: boolean) =>
    method({
      input: TokenBalancesFilterArgs,
      handler: async (a, ctx) => {
        const ix = indexerFor(s, ctx);
        const f = a.filter;
        const pg = paging(a.page);
        const q = await graded(
          ix,
          {
            accounts: f.accountAddresses,
            contracts: nonEmpty(f.contractWhitelist),
            excludeContracts: f.contractBlacklist,
            tokenIds: nonEmpty(f.tokenIDs),
            types: nonEmpty(f.contractTypes) as TokenType[] | undefined,
            offset: pg.offset,
            limit: pg.limit,
          },
          gradeOf(f.contractStatus, undefined),
        );
        const [rows, natives] = await Promise.all([
          summary ? ix.reads.summary(q) : ix.reads.balances(q),
          f.omitNativeBalances ? Promise.resolve([]) : Promise.all(f.accountAddresses.map((acc) => nativeBalance(ix, acc))),
        ]);
        const { rows: page, page: pageWire } = pg.cut(rows as Array<(typeof rows)[number] & { unique?: number }>);
        const meta = a.omitMetadata
          ? undefined
          : await metadataFor(
              s.indexerMetadata,
              ix.chain,
              page.map((r) => ({ contract: r.contract, type: r.type, tokenIds: [r.tokenId] })),
              { tokens: !summary },
            );
        return raw({ page: pageWire, nativeBalances: natives }, { balances: page.map((r) => tokenBalanceJson(ix.chain.chainId, r, meta, summary ? { unique: r.unique ?? 0 } : undefined)) });
      },
    });

  return {
    name: 'Indexer',
    schema: INDEXER_SCHEMA,
    errors: E,
    defaultAuth: (name) => (s.config.auth.publicMethods.includes(name) ? 'optional' : s.config.auth.rpc),
    methods: {
      // Webhook listeners: refused, saying what serves meanwhile.
      ...refusedIndexerMethods(),
      ...indexerStreamMethods((ctx) => indexerFor(s, ctx), { hub: s.events.streams, open: streams, clientIpv6Prefix: s.config.clientIpv6Prefix, rateLimited: IndexerErrors.RateLimited }),
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
          const [base, cursor, head] = await Promise.all([runtimeStatus(s), ix.cursor(), ix.chain.public.getBlockNumber().catch(() => null)]);
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
          const b = await nativeBalance(ix, a.accountAddress);
          return { balance: { accountAddress: a.accountAddress, balanceWei: b.balance } };
        },
      }),
      GetNativeTokenBalance: method({
        input: AccountArgs,
        handler: async (a, ctx) => {
          const ix = indexerFor(s, ctx);
          if (!a.accountAddress) throw bad(NO_SESSION_ACCOUNT);
          return { balance: await nativeBalance(ix, a.accountAddress) };
        },
      }),

      GetTokenBalances: method({
        input: GetTokenBalancesArgs,
        handler: async (a, ctx) => {
          const ix = indexerFor(s, ctx);
          if (!a.accountAddress && !a.contractAddress) throw bad('accountAddress or contractAddress: at least one is required');
          if (a.tokenID !== undefined && !a.contractAddress) throw bad('tokenID needs a contractAddress');
          const pg = paging(a.page);
          const q = await graded(
            ix,
            {
              accounts: a.accountAddress ? [a.accountAddress] : undefined,
              contracts: a.contractAddress ? [a.contractAddress] : undefined,
              tokenIds: a.tokenID !== undefined ? [a.tokenID] : undefined,
              offset: pg.offset,
              limit: pg.limit,
            },
            gradeOf(undefined, a.metadataOptions),
          );
          // includeCollectionTokens false: a collection (ERC721/ERC1155) is one summary row per
          // holder (isSummary, uniqueCollectibles, the sum of its tokens); true or absent: its tokens.
          const collapse = a.includeCollectionTokens === false;
          const rows: Array<BalanceRow & { unique?: number }> = collapse ? await ix.reads.summary(q) : await ix.reads.balances(q);
          const { rows: page, page: pageWire } = pg.cut(rows);
          const meta = a.includeMetadata
            ? await metadataFor(
                s.indexerMetadata,
                ix.chain,
                page.map((r) => ({ contract: r.contract, type: r.type, tokenIds: [r.tokenId] })),
                { tokens: !collapse },
              )
            : undefined;
          return raw({ page: pageWire }, { balances: page.map((r) => tokenBalanceJson(ix.chain.chainId, r, meta, collapse && r.type !== 'ERC20' ? { unique: r.unique ?? 0 } : undefined)) });
        },
      }),
      GetTokenBalancesSummary: balancesByFilter(true),
      GetTokenBalancesDetails: balancesByFilter(false),
      GetTokenBalancesByContract: method({
        input: ByContractArgs,
        handler: async (a, ctx) => {
          const ix = indexerFor(s, ctx);
          const pg = paging(a.page);
          const rows = await ix.reads.balances(
            await graded(
              ix,
              {
                contracts: a.filter.contractAddresses,
                accounts: nonEmpty(a.filter.accountAddresses),
                tokenIds: nonEmpty(a.filter.tokenIDs),
                offset: pg.offset,
                limit: pg.limit,
              },
              gradeOf(a.filter.contractStatus, undefined),
            ),
          );
          const { rows: page, page: pageWire } = pg.cut(rows);
          const meta = a.omitMetadata
            ? undefined
            : await metadataFor(
                s.indexerMetadata,
                ix.chain,
                page.map((r) => ({ contract: r.contract, type: r.type, tokenIds: [r.tokenId] })),
                { tokens: true },
              );
          return raw({ page: pageWire }, { balances: page.map((r) => tokenBalanceJson(ix.chain.chainId, r, meta)) });
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
        input: z.object({
          contractAddress: AddressArg,
          lastBlockNumber: BlockNumber,
          lastBlockHash: z
            .string()
            .regex(/^0x[0-9a-fA-F]{64}$/, 'not a 32-byte block hash')
            .transform((h) => h.toLowerCase())
            .optional(),
          page: PageArg,
        }),
        handler: async (a, ctx) => {
          const ix = indexerFor(s, ctx);
          let since = a.lastBlockNumber;
          if (a.lastBlockHash) {
            // The caller's block left the chain (a reorg): everything it saw may have changed.
            const onChain = await ix.chain.public.getBlock({ blockNumber: BigInt(a.lastBlockNumber) }).catch(() => null);
            if (!onChain || onChain.hash.toLowerCase() !== a.lastBlockHash) since = -1;
          }
          const pg = paging(a.page);
          const rows = await ix.reads.updatesSince(a.contractAddress, since, pg.offset, pg.limit);
          const { rows: page, page: pageWire } = pg.cut(rows);
          return raw({ page: pageWire }, { balances: page.map((r) => tokenBalanceJson(ix.chain.chainId, r)) });
        },
      }),

      FetchTransactionReceipt: method({
        input: z.object({ txnHash: TxHash, maxBlockWait: z.number().int().min(-1).max(1000).optional() }),
        handler: async (a, ctx) => {
          const ix = indexerFor(s, ctx);
          const r = await fetchReceipt(ix.chain, a.txnHash as `0x${string}`, a.maxBlockWait ?? 0, MAX_RECEIPT_WAIT_MS, Math.min(ix.cfg.pollMs, 500));
          if (!r) throw new RpcError(IndexerErrors.NotFound, `transaction ${a.txnHash} is not mined on ${ix.chain.name}`);
          const head = await ix.chain.public.getBlockNumber();
          return { receipt: receiptWire(r, head, ix.cfg.confirmations) };
        },
      }),

      FetchTransactionReceiptWithFilter: method({
        input: z.object({ filter: ReceiptFilterArg, maxBlockWait: z.number().int().min(-1).max(1000).optional() }),
        handler: async (a, ctx) => {
          const ix = indexerFor(s, ctx);
          const r = await findReceipt(ix.chain, a.filter, a.maxBlockWait ?? 0, MAX_RECEIPT_WAIT_MS, Math.min(ix.cfg.pollMs, 500));
          if (!r) throw new RpcError(IndexerErrors.NotFound, `no transaction matching the filter was mined on ${ix.chain.name} within ${Math.max(0, a.maxBlockWait ?? 0)} blocks of the head`);
          const head = await ix.chain.public.getBlockNumber();
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
          const ix = indexerFor(s, ctx);
          const f = a.filter;
          const accounts = merge(f.accountAddress, f.accountAddresses);
          const requested = merge(f.contractAddress, f.contractAddresses);
          const txHashes = await carriedBy(ix, nonEmpty(f.transactionHashes), nonEmpty(f.metaTransactionIDs));
          if (!accounts && !requested && !txHashes) throw bad('filter: name an account, a contract, transaction hashes or meta-transaction ids');
          const { contracts, excludeContracts } = await graded(ix, { contracts: requested } as { contracts?: string[]; excludeContracts?: string[] }, gradeOf(undefined, a.metadataOptions));
          const pg = paging(a.page);
          const txns = await readHistory(s.db, ix.chain.chainId, {
            accounts,
            contracts,
            excludeContracts,
            txHashes,
            fromBlock: f.fromBlock,
            toBlock: f.toBlock,
            tokenId: f.tokenID,
            offset: pg.offset,
            limit: pg.limit,
          });
          const { rows: page, page: pageWire } = pg.cut(txns);
          const meta = a.includeMetadata
            ? await metadataFor(
                s.indexerMetadata,
                ix.chain,
                page.flatMap((t) => t.transfers.map((tr) => ({ contract: tr.contract, type: tr.type, tokenIds: tr.tokenIds }))),
                { tokens: true },
              )
            : undefined;
          const who = new Set(accounts ?? []);
          const metaIds = await s.metaTxns.idsByTxnHash(
            ix.chain.chainId,
            page.map((t) => t.txHash),
          );
          return raw({ page: pageWire }, { transactions: page.map((t) => transactionJson(ix.chain.chainId, t, who, meta, metaIds.get(t.txHash))) });
        },
      }),
    },
  };
}
