// The metadata domain's front door: createMetadata for the wiring, and what the other domains
// (collections, media, events, indexer) may use of it. The faces may reach further in.
import type { Address } from 'viem';
import type { ChainClient } from '../chain/client.ts';
import type { Common } from '../common.ts';
import { contractStore, type ContractChangeHook, type ContractRow, type ContractStore } from './contracts/contract-store.ts';
import { contractToWire, type ContractMediaLookup } from './contracts/contract-view.ts';
import { ContractInfoService } from './contracts/contracts.ts';
import { TokenDirectory } from './contracts/directory.ts';
import { directoryStore } from './contracts/directory-store.ts';
import { createFetcher, type Fetcher } from './fetch/fetch.ts';
import { MintMonitorService, mintMonitorStore } from './refresh/mint-monitors.ts';
import { RefreshService } from './refresh/refresh.ts';
import { taskStore, type TaskFinishedHook, type TaskStore } from './refresh/task-store.ts';
import { ChainWatcher } from './refresh/watcher.ts';
import { TaskWorker } from './refresh/worker.ts';
import { PostingsCache } from './search/postings-cache.ts';
import { postingsStore } from './search/postings-store.ts';
import { searchStore } from './search/search-store.ts';
import { TokenSearchService } from './search/token-search.ts';
import { TokenMetadataService, type TokenMediaHooks } from './tokens/resolver.ts';
import { tokenStore, type DocumentHook, type TokenStore } from './tokens/token-store.ts';

export type { Fetcher, FetchJsonOptions, FetchResult } from './fetch/fetch.ts';
export { GATEWAY_SHARE } from './fetch/uri.ts';
export type { ContractChange, ContractRow } from './contracts/contract-store.ts';
export type { ContractMediaLookup } from './contracts/contract-view.ts';
export type { ContractInfoService } from './contracts/contracts.ts';
export type { RefreshService } from './refresh/refresh.ts';
export type { TaskRow } from './refresh/task-store.ts';
export type { DocumentChange } from './tokens/token-store.ts';
export type { TokenMediaHooks, TokenMetadataService } from './tokens/resolver.ts';

/** How the media pipeline is reached (none without media): tokens' media queued and their `assets`, contracts' logos. */
export interface MediaHooks {
  tokens?: TokenMediaHooks;
  contracts?: ContractMediaLookup;
}

/** The events recorded on the transactions that change documents, contract info and tasks (events/index.ts). */
export interface MetadataEvents {
  onDocumentChanged: DocumentHook;
  /** `view`: the ContractInfo a GetContractInfo would answer for the stored row. */
  onContractChanged(view: (chainId: number, row: ContractRow) => unknown): ContractChangeHook;
  onTaskFinished: TaskFinishedHook;
}

export interface Metadata {
  tokens: TokenMetadataService;
  tokenStore: TokenStore;
  contracts: ContractInfoService;
  contractStore: ContractStore;
  directory: TokenDirectory;
  tokenSearch: TokenSearchService;
  tasks: TaskStore;
  refresh: RefreshService;
  /** The legacy mint monitor: contracts projects asked the watchers to follow the mints of. */
  mintMonitors: MintMonitorService;
  worker: TaskWorker;
  /** One per chain configured with `watch`; one process of the fleet runs them (the wiring's leadership). */
  watchers: ChainWatcher[];
  /** Contracts listed in the token directory on a chain (token lists, admins), not removed from it: the curated ones. */
  curatedOn(chainId: number): Promise<Address[]>;
}

/** The SSRF-guarded fetcher of token and contract documents (and of media's originals), closed last. */
export function createRemoteFetcher({ config, shutdown }: Common): Fetcher {
  const m = config.metadata;
  const fetcher = createFetcher({
    allowPrivateNetworks: config.allowPrivateNetworks,
    allowedPrivateHosts: m.allowedPrivateHosts,
    maxBytes: m.maxBytes,
    connectTimeoutMs: m.connectTimeoutMs,
    totalTimeoutMs: m.fetchTimeoutMs,
    stallTimeoutMs: m.stallTimeoutMs,
    maxRedirects: m.maxRedirects,
    hedgeDelayMs: m.hedgeDelayMs,
    ipfsGateways: config.ipfsGateways,
    arweaveGateway: config.arweaveGateway,
  });
  shutdown.add(() => fetcher.close());
  return fetcher;
}

export function createMetadata({ config, db, log, metrics, fleet }: Common, deps: { chains: ReadonlyMap<number, ChainClient>; fetcher: Fetcher; media: MediaHooks; events: MetadataEvents }): Metadata {
  const { chains, fetcher, media, events } = deps;
  // A contract whose stored ContractInfo changes records a contract.info_updated event on the same transaction.
  const contractsRepo = contractStore(db, {
    onInfoChanged: events.onContractChanged((chainId, row) => contractToWire(chainId, row.address, row, 'AVAILABLE', null, contracts.mediaUrl)),
  });
  const contracts: ContractInfoService = new ContractInfoService({ store: contractsRepo, fetcher, config, log, metrics, media: media.contracts });
  // Token documents whose content changes record a token.metadata_updated event on the same transaction.
  const tokensRepo = tokenStore(db, { onDocumentChanged: events.onDocumentChanged });
  const tokens = new TokenMetadataService({
    store: tokensRepo,
    fetcher,
    config,
    log,
    metrics,
    // One read classifies a new contract and makes it searchable.
    detectStandard: (chain, address) => contracts.detect(chain, address),
    media: media.tokens,
    fleet,
  });
  // A refresh task reaching DONE or FAILED records a refresh.task_finished event on the same transaction.
  const tasks = taskStore(db, { onFinished: events.onTaskFinished });
  const refresh = new RefreshService({ tasks, config });
  const worker = new TaskWorker({ tasks, tokens, tokenStore: tokensRepo, contracts, chains, config, log, metrics });
  const directoryRepo = directoryStore(db);
  const directory = new TokenDirectory({
    store: directoryRepo,
    contracts: contractsRepo,
    chains,
    configured: config.chains,
    mediaUrl: contracts.mediaUrl,
    media: media.contracts,
    learn: (chain, addresses) => contracts.learn(chain, addresses),
  });
  const postings = new PostingsCache({ store: postingsStore(db), log, budgetBytes: config.metadata.searchMemoryMB * 1024 * 1024, metrics });
  const nudge = () => worker.nudge();
  return {
    tokens,
    tokenStore: tokensRepo,
    contracts,
    contractStore: contractsRepo,
    directory,
    tokenSearch: new TokenSearchService({ store: searchStore(db), postings, refresh, log, onEnqueued: nudge }),
    tasks,
    refresh,
    mintMonitors: new MintMonitorService({ store: mintMonitorStore(db), tasks, refresh, config }),
    worker,
    watchers: config.chains.filter((c) => c.watch).map((c) => new ChainWatcher(chains.get(c.chainId)!, c, { db, refresh, config, log, metrics, onEnqueued: nudge })),
    curatedOn: (chainId) => directoryRepo.addressesOn(chainId),
  };
}
