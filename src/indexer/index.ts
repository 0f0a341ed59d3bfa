// The indexer's door: what the wiring, the HTTP layer and the CLI use.
import { withRole, type ChainClient } from '../chain/client.ts';
import type { Common } from '../common.ts';
import type { ContractInfoService, TokenMetadataService } from '../metadata/index.ts';
import type { Role } from '../store/leadership.ts';
import { BackfillRunner } from './backfill-runner.ts';
import { ChainIndexer, backfillWorkerFor, type IndexerMetadata } from './chain-indexer.ts';
import { ContractInfoCache } from './contract-info-cache.ts';
import type { BalanceHook, IndexHooks } from './transfer-store.ts';
export { ChainIndexer, backfillWorkerFor, type IndexerMetadata } from './chain-indexer.ts';
export { BackfillWorker, backfillStore, type BackfillProgress } from './backfill.ts';
export { readHistory, type HistoryTxn } from './history-reader.ts';
export type { BalanceRow } from './balance-reader.ts';
export { addressFilter, type IndexScope } from './watchlist.ts';
export type { TokenType } from './decode.ts';
export { metadataFor, tokenBalanceJson, tokenSupplyJson, transactionJson, type MetadataPage, type PriceFields, type PriceSourceWire } from './view.ts';
export { forgetIndexedChain } from './forget-chain.ts';
export { syncBalance } from './sync-balance.ts';
export { fetchReceipt, receiptWire } from './receipt.ts';
export { eventTopic, findReceipt, receiptMatches, type ReceiptFilter } from './receipt-filter.ts';
export { ContractInfoCache } from './contract-info-cache.ts';
export { watchContract, deploymentBlock, type WatchOutcome } from './watch.ts';
export { BackfillRunner } from './backfill-runner.ts';
export type { BalanceChange, BalanceHook } from './transfer-store.ts';
export { StreamTail, type TailBlock, type TailSubscriber } from './stream-tail.ts';
export { logFrames, type StreamLogFilter } from './stream-logs.ts';
export { receiptFrames } from './stream-receipts.ts';

/** The events the indexer records (events/index.ts): balance.updated, and what webhook listeners asked to hear. */
export interface IndexerEventHooks {
  onBalances: BalanceHook;
  listening: Omit<IndexHooks, 'onBalances'>;
}

export interface Indexer {
  /** One indexer per chain configured with `indexer` (scope not 'off'), by chain id. */
  indexers: ReadonlyMap<number, ChainIndexer>;
  /** Token metadata and contract info for the indexer's answers, from the metadata service. */
  indexerMetadata: IndexerMetadata;
  /** Works running backfills (those a watchlist addition schedules) in the background; none without indexed chains. */
  indexerBackfills: BackfillRunner | undefined;
}

export function createIndexer(
  { config, db, log, metrics }: Common,
  deps: {
    chains: ReadonlyMap<number, ChainClient>;
    metadata: { contracts: Pick<ContractInfoService, 'get'>; tokens: Pick<TokenMetadataService, 'getTokens'>; curatedOn(chainId: number): Promise<string[]> };
    events: IndexerEventHooks;
  },
): Indexer & { indexerFollowers: Array<[chainId: number, follower: Role]> } {
  const { chains, metadata, events } = deps;
  const indexers = new Map<number, ChainIndexer>();
  for (const c of config.chains) {
    if (!c.indexer || c.indexer.scope === 'off') continue;
    // Watchlist chains record balance.updated events; a chain-wide scan would flood the outbox.
    const hooks = { onBalances: c.indexer.scope === 'watchlist' ? events.onBalances : undefined, ...events.listening };
    indexers.set(c.chainId, new ChainIndexer(withRole(chains.get(c.chainId)!, 'indexer'), { ...c.indexer, scope: c.indexer.scope, logReads: config.logReads }, db, log, metrics, hooks));
  }
  // No wait: the indexer answers with what the metadata service holds; the rest resolves in the background.
  // Contract info is kept serialised as long as token records stay hot: a page is then one query.
  // The Indexer's reads need an access key unless auth.rpc says otherwise: only then do they queue logos.
  const m = config.metadata;
  const contractInfo = new ContractInfoCache(
    async (chain, addresses) => (await metadata.contracts.get(chain, addresses as `0x${string}`[], { waitMs: 0, eager: config.auth.rpc === 'required' })).infos,
    {
      size: m.hotCacheSize,
      ttlMs: m.hotCacheTtlMs,
    },
  );
  return {
    indexers,
    indexerMetadata: {
      contracts: (chain, addresses) => contractInfo.get(chain, addresses),
      tokens: async (chain, contract, ids) => (await metadata.tokens.getTokens(chain, contract as `0x${string}`, ids, { waitMs: 0 })).json,
      // Verified means curated: listed in the token directory (token lists, admins), not removed from it.
      verified: (chainId) => metadata.curatedOn(chainId),
    },
    // A poll every 2 s is two small statements; a new backfill wakes it at once.
    indexerBackfills: indexers.size ? new BackfillRunner(backfillWorkerFor(db, indexers, config.indexer.leaseSec), log, 2_000) : undefined,
    indexerFollowers: [...indexers.values()].map((i) => [i.chain.chainId, i.follower]),
  };
}
