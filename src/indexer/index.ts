// The indexer's door: what the wiring, the HTTP layer and the CLI use.
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
