import type { z } from 'zod';
import { metadataFor, readHistory, tokenBalanceJson, transactionJson, type BalanceRow, type ChainIndexer, type TokenType } from '../../indexer/index.ts';
import type { Services } from '../../services.ts';
import { balancePrices, priceFields, pricesOrWithdrawn, type PriceDeps } from './prices.ts';
import { bad, gradeOf, narrowToGrade, paging, type ByContractArgs, type GetTokenBalancesArgs, type Grade, type HistoryArgs, type TokenBalancesFilterArgs } from './args.ts';

/** What the indexer's answers use: the database (history), the metadata they carry, the relayer's meta-transactions (carriedBy) and prices. */
export type AnswerDeps = PriceDeps & Pick<Services, 'db' | 'indexerMetadata' | 'metaTxns'>;

// One chain's answers to the Indexer's read methods, as parts (a page and JSON text items): the
// per-chain service (indexer.ts) sends them as they are, the gateway (gateway.ts) gathers
// them across chains.

export type PageWire = ReturnType<ReturnType<typeof paging>['cut']>['page'];
export interface ListPart {
  page: PageWire;
  items: string[];
}

const nonEmpty = <T>(a: T[] | undefined): T[] | undefined => (a?.length ? a : undefined);
const merge = (one: string | undefined, many: string[] | undefined) => nonEmpty([...(one ? [one] : []), ...(many ?? [])]);

/** The query's contract filters narrowed to the contracts of a grade (one read of the chain's verified list, only when asked). */
async function graded<Q extends { contracts?: string[]; excludeContracts?: string[] }>(s: AnswerDeps, ix: ChainIndexer, q: Q, grade: Grade): Promise<Q> {
  return grade ? narrowToGrade(q, grade, await s.indexerMetadata.verified(ix.chain.chainId)) : q;
}

/** The Sequence NativeTokenBalance, read from the chain now, priced unless `omitPrices`. */
export async function nativeBalance(s: AnswerDeps, ix: ChainIndexer, account: `0x${string}`, omitPrices = false) {
  const [wei, prices] = await Promise.all([ix.chain.public.getBalance({ address: account }), omitPrices ? undefined : pricesOrWithdrawn(s, ix.chain.chainId, ['native'])]);
  const currency = ix.chain.public.chain?.nativeCurrency;
  const price = priceFields(prices?.get('native'), wei);
  return {
    accountAddress: account,
    chainId: ix.chain.chainId,
    name: currency?.name ?? 'Ether',
    symbol: currency?.symbol ?? 'ETH',
    balance: wei.toString(),
    balanceUSD: price?.balanceUSD ?? '0',
    priceUSD: price?.priceUSD ?? '0',
    ...(price?.priceUpdatedAt ? { priceUpdatedAt: price.priceUpdatedAt } : {}),
    ...(price?.priceUnavailable ? { priceUnavailable: price.priceUnavailable } : {}),
    ...(price?.priceSource ? { priceSource: price.priceSource } : {}),
  };
}

/** GetTokenBalances. */
export async function tokenBalances(s: AnswerDeps, ix: ChainIndexer, a: z.infer<typeof GetTokenBalancesArgs>): Promise<ListPart> {
  if (!a.accountAddress && !a.contractAddress) throw bad('accountAddress or contractAddress: at least one is required');
  if (a.tokenID !== undefined && !a.contractAddress) throw bad('tokenID needs a contractAddress');
  const pg = paging(a.page);
  const q = await graded(
    s,
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
  const [meta, prices] = await Promise.all([
    a.includeMetadata
      ? metadataFor(
          s.indexerMetadata,
          ix.chain,
          page.map((r) => ({ contract: r.contract, type: r.type, tokenIds: [r.tokenId] })),
          { tokens: !collapse },
        )
      : undefined,
    balancePrices(s, ix.chain.chainId, page),
  ]);
  return { page: pageWire, items: page.map((r, i) => tokenBalanceJson(ix.chain.chainId, r, meta, collapse && r.type !== 'ERC20' ? { unique: r.unique ?? 0 } : undefined, prices[i])) };
}

/** GetTokenBalancesSummary (one row per contract) and GetTokenBalancesDetails (one per token): the filter is shared. */
export async function balancesByFilter(s: AnswerDeps, ix: ChainIndexer, a: z.infer<typeof TokenBalancesFilterArgs>, summary: boolean) {
  const f = a.filter;
  const pg = paging(a.page);
  const q = await graded(
    s,
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
    f.omitNativeBalances ? Promise.resolve([]) : Promise.all(f.accountAddresses.map((acc) => nativeBalance(s, ix, acc, f.omitPrices))),
  ]);
  const { rows: page, page: pageWire } = pg.cut(rows as Array<(typeof rows)[number] & { unique?: number }>);
  const [meta, prices] = await Promise.all([
    a.omitMetadata
      ? undefined
      : metadataFor(
          s.indexerMetadata,
          ix.chain,
          page.map((r) => ({ contract: r.contract, type: r.type, tokenIds: [r.tokenId] })),
          { tokens: !summary },
        ),
    balancePrices(s, ix.chain.chainId, page, f.omitPrices),
  ]);
  return {
    page: pageWire,
    nativeBalances: natives,
    items: page.map((r, i) => tokenBalanceJson(ix.chain.chainId, r, meta, summary ? { unique: r.unique ?? 0 } : undefined, prices[i])),
  };
}

/** GetTokenBalancesByContract. */
export async function balancesByContract(s: AnswerDeps, ix: ChainIndexer, a: z.infer<typeof ByContractArgs>): Promise<ListPart> {
  const pg = paging(a.page);
  const rows = await ix.reads.balances(
    await graded(
      s,
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
  const [meta, prices] = await Promise.all([
    a.omitMetadata
      ? undefined
      : metadataFor(
          s.indexerMetadata,
          ix.chain,
          page.map((r) => ({ contract: r.contract, type: r.type, tokenIds: [r.tokenId] })),
          { tokens: true },
        ),
    balancePrices(s, ix.chain.chainId, page),
  ]);
  return { page: pageWire, items: page.map((r, i) => tokenBalanceJson(ix.chain.chainId, r, meta, undefined, prices[i])) };
}

/** GetBalanceUpdates: balances of a contract changed after a block (from the beginning when that block left the chain). */
export async function balanceUpdates(
  s: AnswerDeps,
  ix: ChainIndexer,
  a: { contractAddress: string; lastBlockNumber: number; lastBlockHash?: string; page?: Parameters<typeof paging>[0] },
): Promise<ListPart> {
  let since = a.lastBlockNumber;
  if (a.lastBlockHash) {
    // The caller's block left the chain (a reorg): everything it saw may have changed.
    const onChain = await ix.chain.public.getBlock({ blockNumber: BigInt(a.lastBlockNumber) }).catch(() => null);
    if (!onChain || onChain.hash.toLowerCase() !== a.lastBlockHash) since = -1;
  }
  const pg = paging(a.page);
  const rows = await ix.reads.updatesSince(a.contractAddress, since, pg.offset, pg.limit);
  const { rows: page, page: pageWire } = pg.cut(rows);
  const prices = await balancePrices(s, ix.chain.chainId, page);
  return { page: pageWire, items: page.map((r, i) => tokenBalanceJson(ix.chain.chainId, r, undefined, undefined, prices[i])) };
}

/** GetTransactionHistory. */
export async function transactionHistory(s: AnswerDeps, ix: ChainIndexer, a: z.infer<typeof HistoryArgs>): Promise<ListPart> {
  const f = a.filter;
  const accounts = merge(f.accountAddress, f.accountAddresses);
  const requested = merge(f.contractAddress, f.contractAddresses);
  const txHashes = await carriedBy(s, ix, nonEmpty(f.transactionHashes), nonEmpty(f.metaTransactionIDs));
  if (!accounts && !requested && !txHashes) throw bad('filter: name an account, a contract, transaction hashes or meta-transaction ids');
  const { contracts, excludeContracts } = await graded(s, ix, { contracts: requested } as { contracts?: string[]; excludeContracts?: string[] }, gradeOf(undefined, a.metadataOptions));
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
  return { page: pageWire, items: page.map((t) => transactionJson(ix.chain.chainId, t, who, meta, metaIds.get(t.txHash))) };
}

/**
 * History's transaction hashes: those asked, narrowed to the transactions that carried the meta-transactions
 * asked (the relayer's record). Meta-transaction ids that carried nothing yet leave an empty list: no rows.
 */
async function carriedBy(s: AnswerDeps, ix: ChainIndexer, hashes: string[] | undefined, metaIds: string[] | undefined): Promise<string[] | undefined> {
  if (!metaIds) return hashes;
  const carried = await s.metaTxns.txnHashesOf(ix.chain.chainId, metaIds);
  return hashes ? hashes.filter((h) => carried.includes(h)) : carried;
}
