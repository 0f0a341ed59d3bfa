import { NetworkRegistry } from './chain/registry.ts';
import { createChainClient, withRole, type ChainClient } from './chain/client.ts';
import type { AppConfig } from './config/schema.ts';
import { Authenticator } from './access/authenticator.ts';
import { RateLimiter } from './access/rate-limiter.ts';
import { tokenResponseCache, type ResponseCache } from './access/response-cache.ts';
import { openDb, type Db } from './store/db.ts';
import { connectionBudget, connectionWarning } from './store/connection-budget.ts';
import { migrate } from './store/migrate.ts';
import { Leadership } from './store/leadership.ts';
import { accessKeyRepo, type AccessKeyRepo } from './store/access-keys.ts';
import { projectRepo, type ProjectRepo } from './store/projects.ts';
import { ecosystemRepo, type EcosystemRepo } from './store/ecosystems.ts';
import { createLogger, type Logger } from './telemetry/logger.ts';
import { createMetrics, type Metrics } from './telemetry/metrics.ts';
import { maintenanceReporter } from './telemetry/db-maintenance.ts';
import { createFetcher, type Fetcher } from './metadata/fetch/fetch.ts';
import { TokenMetadataService } from './metadata/tokens/resolver.ts';
import { tokenStore, type TokenStore } from './metadata/tokens/token-store.ts';
import { ContractInfoService } from './metadata/contracts/contracts.ts';
import { contractStore, type ContractStore } from './metadata/contracts/contract-store.ts';
import { TokenDirectory } from './metadata/contracts/directory.ts';
import { directoryStore } from './metadata/contracts/directory-store.ts';
import { RefreshService } from './metadata/refresh/refresh.ts';
import { taskStore, type TaskStore } from './metadata/refresh/task-store.ts';
import { MintMonitorService, mintMonitorStore } from './metadata/refresh/mint-monitors.ts';
import { TaskWorker } from './metadata/refresh/worker.ts';
import { PostingsCache } from './metadata/search/postings-cache.ts';
import { postingsStore } from './metadata/search/postings-store.ts';
import { searchStore } from './metadata/search/search-store.ts';
import { TokenSearchService } from './metadata/search/token-search.ts';
import { ChainWatcher } from './metadata/refresh/watcher.ts';
import { MediaOrphanSweep, MediaStoreRetry, createMediaService, createMediaUploads, mediaMetrics, type MediaService } from './media/index.ts';
import { ChangeFanout, CollectionsService, collectionStore, localFirstFetcher, type ContractLink } from './collections/index.ts';
import type { TokenMediaHooks } from './metadata/tokens/resolver.ts';
import { randomBytes } from 'node:crypto';
import { ChainRelayer } from './relayer/chain-relayer.ts';
import { feeModelFor } from './relayer/index.ts';
import { Dispatcher } from './relayer/engine/dispatcher.ts';
import { SenderRefill } from './relayer/engine/refill.ts';
import { RelayEvents } from './relayer/events.ts';
import { metaTxnRepo, type MetaTxnRepo } from './relayer/store.ts';
import { barRepo, type BarRepo } from './relayer/bars.ts';
import { ReceiptWaiters } from './relayer/receipt-waiters.ts';
import { PreconditionChecker } from './relayer/preconditions/checker.ts';
import { waitRepo } from './relayer/preconditions/store.ts';
import { sponsorRepo, type SponsorRepo } from './relayer/intake/sponsors.ts';
import { spendCaps, type Charge, type SpendCaps } from './relayer/intake/spend-caps.ts';
import { projectBalances, type ProjectBalances } from './relayer/balances/index.ts';
import { BackfillRunner, ChainIndexer, ContractInfoCache, backfillWorkerFor, type IndexerMetadata } from './indexer/index.ts';
import { EventBell, outbox, type Outbox } from './events/outbox.ts';
import { webhookStore, type WebhookStore } from './events/webhook-store.ts';
import { listenerStore, type ListenerStore } from './events/listener-store.ts';
import { listenerHooks } from './events/listener-events.ts';
import { DeliveryWorker } from './events/delivery.ts';
import { EventStreamHub } from './events/stream-hub.ts';
import { createPoster, type Poster } from './untrusted/post.ts';
import { metaTxnStatusEvents } from './events/metatxn-events.ts';
import { approvalClient } from './events/approval-client.ts';
import { balanceEvents } from './events/balance-events.ts';
import { tokenDocumentEvents } from './events/token-events.ts';
import { senderBalanceEvents } from './events/sender-events.ts';
import { taskFinishedEvents } from './events/task-events.ts';
import { contractInfoEvents } from './events/contract-events.ts';
import { contractToWire } from './metadata/contracts/contract-view.ts';
import { UsdPrices, effectivePrices } from './prices/index.ts';
import { RequestJournal } from './access/request-journal.ts';
import { AlertWatch, type AlertDeps } from './relayer/alerts.ts';
import { projectRequestRepo } from './store/project-requests.ts';

/** Everything the HTTP layer and workers need, built once from the config. */
export interface Services {
  config: AppConfig;
  log: Logger;
  metrics: Metrics;
  db: Db;
  networks: NetworkRegistry;
  chains: ReadonlyMap<number, ChainClient>;
  projects: ProjectRepo;
  /** Groups of projects whose ecosystem sponsorship rules cover them all. */
  ecosystems: EcosystemRepo;
  accessKeys: AccessKeyRepo;
  auth: Authenticator;
  /** Each project's recent requests, for the console's request log (written in batches, bounded per project). */
  requestJournal: RequestJournal;
  rateLimiter: RateLimiter;
  /** Whole answers to repeated token reads, REST and RPC alike; looked up only after the access check. */
  responses: ResponseCache;
  fetcher: Fetcher;
  tokens: TokenMetadataService;
  /** The media pipeline (cached originals, renditions, `assets`); undefined when media.enabled is false. */
  media?: MediaService;
  /** Collections: a project's token metadata and media hosted here (needs the media pipeline). */
  collections?: CollectionsService;
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
  watchers: ChainWatcher[];
  /** One relayer per chain configured with `relayer`, by chain id. */
  relayers: ReadonlyMap<number, ChainRelayer>;
  dispatchers: Dispatcher[];
  relayEvents: RelayEvents;
  metaTxns: MetaTxnRepo;
  sponsors: SponsorRepo;
  spendCaps: SpendCaps;
  /** Project balances (gas tanks): their ledger, intake's holds, the debits of mined sponsored meta-transactions. */
  balances: ProjectBalances;
  /** What the alerts read (the console's project alerts; the background check is started with the rest). */
  alerts: AlertDeps;
  /** Wallets, keys and client addresses barred from fee-paid relaying after a fee did not arrive. */
  bars: BarRepo;
  /** GetMetaTxnReceipt's held requests: one reader per meta-transaction, capped per client address. */
  receiptWaiters: ReceiptWaiters;
  /** One indexer per chain configured with `indexer` (scope not 'off'), by chain id. */
  indexers: ReadonlyMap<number, ChainIndexer>;
  /** Token metadata and contract info for the indexer's answers, from the metadata service. */
  indexerMetadata: IndexerMetadata;
  /** USD prices per chain configured with `prices` (the indexer's priceUSD, GetTokenPrice(s), ListTokenPrices), by chain id. */
  prices: ReadonlyMap<number, UsdPrices>;
  /** Works running backfills (those a watchlist addition schedules) in the background; none without indexed chains. */
  indexerBackfills: BackfillRunner | undefined;
  /** Push: the events outbox, webhook endpoints and their delivery worker (started with the dispatchers or the background workers). */
  events: { outbox: Outbox; webhooks: WebhookStore; listeners: ListenerStore; bell: EventBell; delivery: DeliveryWorker; post: Poster; streams: EventStreamHub };
  /** Which process of the fleet follows each chain and sweeps media (store/leadership.ts); run by startBackground. */
  leadership: Leadership;
  /** Starts the relayer dispatchers (what `metarelay relayer` runs, and `serve`/`dev` by default). */
  startDispatchers(): void;
  /** Starts the refresh worker and the chain watchers (what `worker` runs, and `serve`/`dev` by default). */
  startBackground(): void;
  startedAt: Date;
  /** Set by drain(): HTTP refuses new work (503), readiness says no. */
  readonly draining: boolean;
  /** Stops taking work: dispatchers finish their pass and hand their senders back, the worker and watchers stop. */
  drain(): Promise<void>;
  close(): Promise<void>;
}

export interface CreateServicesOptions {
  log?: Logger;
  /** An already-open database (tests share a prepared one); otherwise config.database is opened. */
  db?: Db;
  /** Apply pending migrations at start (default true). */
  migrate?: boolean;
  pollingIntervalMs?: number;
}

/** Connections of the dispatchers' own pool (PostgreSQL): a pass runs one transaction per sender at a time. */
const ENGINE_CONNECTIONS = 5;

export async function createServices(config: AppConfig, opts: CreateServicesOptions = {}): Promise<Services> {
  const log = opts.log ?? createLogger(config.logLevel);
  const metrics = createMetrics();
  const db = opts.db ?? (await openDb(config.database, config.postgres));
  db.onMaintenance?.(maintenanceReporter(log, metrics.dbMaintenance));
  // Once per outage, as a chain node's: the calls that meet it answer 503 without a line each.
  db.onHealth?.((e) => (e.state === 'down' ? log.warn({ cause: e.cause }, 'database unavailable') : log.info({ downMs: e.downMs, cause: e.cause }, 'database reachable again')));
  try {
    if (opts.migrate !== false) {
      const applied = await migrate(db);
      if (applied.length) log.info({ applied }, 'database migrated');
    }
  } catch (err) {
    if (!opts.db) await db.close();
    throw err;
  }
  const chains = new Map<number, ChainClient>();
  for (const c of config.chains) {
    chains.set(c.chainId, createChainClient(c, { metrics, log, pollingIntervalMs: opts.pollingIntervalMs }));
  }
  const accessKeys = accessKeyRepo(db);
  const auth = new Authenticator(accessKeys, log, { cacheMs: config.auth.keyCacheMs });
  const requestJournal = new RequestJournal(projectRequestRepo(db), log, config.console.requestLog, metrics);
  const m = config.metadata;
  const remoteFetcher = createFetcher({
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
  const media = config.media.enabled ? createMediaService(config, { db, fetcher: remoteFetcher, log, metrics: mediaMetrics(metrics.registry) }) : undefined;
  // A collection edit refreshes the linked contracts' cached metadata (bound below, once the refresh service exists).
  let collectionChanged = async (_links: ContractLink[], _projectId: number, _ids: string[] | null): Promise<void> => undefined;
  const collections =
    media &&
    new CollectionsService({
      store: collectionStore(db),
      uploads: createMediaUploads(config, db, media),
      blobUrl: (b) => media.blobUrl(b),
      publicUrl: () => media.publicUrl,
      quotas: config.collections.quotas,
      uploadRate: config.collections.uploads,
      // A link is proven by reading the contract (link-proof.ts) on a configured chain.
      linkChain: (chainId) => {
        const c = chains.get(chainId);
        return c && { readContract: (a) => c.public.readContract(a as never), verifyMessage: (a) => c.public.verifyMessage(a) };
      },
      onChanged: (links, projectId, ids) => collectionChanged(links, projectId, ids),
    });
  // Token and contract URIs pointing at this service's own collections are answered from the database.
  const fetcher = collections ? localFirstFetcher(remoteFetcher, collections, () => media.publicUrl) : remoteFetcher;
  const mediaSweep = media && config.media.orphanSweepSec > 0 ? new MediaOrphanSweep(media, { intervalSec: config.media.orphanSweepSec, graceSec: config.media.orphanGraceSec }, log) : undefined;
  const mediaHooks: TokenMediaHooks | undefined = media && {
    onResolved: (chainId, contract, list, via) => {
      const mode = via === 'read' && config.media.eager ? 'eager' : 'recheck';
      media.onTokensResolved(chainId, contract, list, mode);
    },
    assetsFor: (chainId, contract, ids) => media.assetsFor(chainId, contract, ids),
    rewriteImage: config.media.rewriteImage,
  };
  const bell = new EventBell();
  // Token documents whose content changes record a token.metadata_updated event on the same transaction (tokensRepo below).
  // A contract whose stored ContractInfo changes records a contract.info_updated event on the same transaction.
  const contractsRepo = contractStore(db, {
    onInfoChanged: contractInfoEvents(bell, (chainId, row) => contractToWire(chainId, row.address, row, 'AVAILABLE', null, contracts.mediaUrl)),
  });
  // Contract logos and og:images go through the media pipeline; answers carry their cached URLs (cachedMedia).
  const contractMedia = media && ((chainId: number, items: Parameters<MediaService['contractMedia']>[1], eager: boolean) => media.contractMedia(chainId, items, eager));
  const contracts: ContractInfoService = new ContractInfoService({ store: contractsRepo, fetcher, config, log, metrics, media: contractMedia });
  const tokensRepo = tokenStore(db, { onDocumentChanged: tokenDocumentEvents(bell) });
  const tokens = new TokenMetadataService({
    store: tokensRepo,
    fetcher,
    config,
    log,
    metrics,
    // One read classifies a new contract and makes it searchable.
    detectStandard: (chain, address) => contracts.detect(chain, address),
    media: mediaHooks,
  });
  // A refresh task reaching DONE or FAILED records a refresh.task_finished event on the same transaction.
  const tasks = taskStore(db, { onFinished: taskFinishedEvents(bell) });
  const refresh = new RefreshService({ tasks, config });
  const mintMonitors = new MintMonitorService({ store: mintMonitorStore(db), tasks, refresh, config });
  const worker = new TaskWorker({ tasks, tokens, tokenStore: tokensRepo, contracts, chains, config, log, metrics });
  // Collection edits queue their refreshes in the background, merged per contract (collections/change-fanout.ts):
  // per chain and project, a refresh of each whole contract (joined to one still pending), of the changed
  // tokens, and one contract-info task for all the contracts of the batch.
  const fanout = new ChangeFanout(
    async (batch) => {
      const whole = new Map<string, { chain: ChainClient; projectId: number; contracts: `0x${string}`[] }>();
      for (const c of batch) {
        const chain = chains.get(c.link.chainId);
        if (!chain) continue;
        const contract = c.link.contractAddress as `0x${string}`;
        try {
          if (c.tokenIds) await refresh.enqueueTokens(c.projectId, chain, contract, c.tokenIds, { source: 'collections' });
          else {
            await refresh.enqueueAllTokens(c.projectId, chain, contract, { source: 'collections' });
            const key = `${chain.chainId}:${c.projectId}`;
            const group = whole.get(key) ?? { chain, projectId: c.projectId, contracts: [] };
            group.contracts.push(contract);
            whole.set(key, group);
          }
        } catch (err) {
          log.warn({ err, chainId: c.link.chainId, contract }, 'could not queue the refresh of a collection-linked contract');
        }
      }
      for (const g of whole.values()) await refresh.enqueueContracts(g.projectId, g.chain, g.contracts);
      if (batch.length) worker.nudge();
    },
    (err) => log.warn({ err }, 'could not queue the refreshes of a collection edit'),
  );
  collectionChanged = async (links, projectId, ids) => fanout.add(links, projectId, ids);
  const directoryRepo = directoryStore(db);
  const directory = new TokenDirectory({
    store: directoryRepo,
    contracts: contractsRepo,
    chains,
    configured: config.chains,
    mediaUrl: contracts.mediaUrl,
    media: contractMedia,
    learn: (chain, addresses) => contracts.learn(chain, addresses),
  });
  const postings = new PostingsCache({ store: postingsStore(db), log, budgetBytes: config.metadata.searchMemoryMB * 1024 * 1024, metrics });
  const tokenSearch = new TokenSearchService({ store: searchStore(db), postings, refresh, log, onEnqueued: () => worker.nudge() });
  const watchers = config.chains.filter((c) => c.watch).map((c) => new ChainWatcher(chains.get(c.chainId)!, c, { db, refresh, config, log, metrics, onEnqueued: () => worker.nudge() }));
  const relayEvents = new RelayEvents();
  const w = config.webhooks;
  // One SSRF-guarded client for webhook deliveries and sponsorship approvals.
  const post = createPoster({ allowPrivateNetworks: config.allowPrivateNetworks, allowedPrivateHosts: w.allowedPrivateHosts, maxSockets: Math.max(64, w.concurrency) });
  const webhooks = webhookStore(db);
  const events = {
    outbox: outbox(db),
    webhooks,
    listeners: listenerStore(db, webhooks),
    bell,
    post,
    delivery: undefined as unknown as DeliveryWorker,
    streams: undefined as unknown as EventStreamHub,
  };
  events.delivery = new DeliveryWorker({ store: events.webhooks, outbox: events.outbox, post, bell, log, settings: w });
  const lanes = DeliveryWorker.caps(w);
  for (const [limit, v] of Object.entries({
    concurrency: w.concurrency,
    maxInFlightPerEndpoint: lanes.endpoint,
    maxInFlightPerProject: lanes.project,
    maxListenerDeliveriesPerBlock: w.maxListenerDeliveriesPerBlock,
    maxListeners: w.maxListeners,
  }))
    metrics.webhookShares.set({ limit }, v);
  events.streams = new EventStreamHub({ outbox: events.outbox, bell, log });
  // Every status the relayer writes records a metatxn.status event on the same transaction; a sponsored
  // one's project balance is debited (or reversed, or its hold released) and a DROPPED one's sponsorship
  // charges are given back there too.
  const balances = projectBalances(db, chains, config.chains);
  const sponsors = sponsorRepo(db);
  const caps = spendCaps(db, { shards: config.relayer.sponsorSpendShards });
  // Sponsorship caps and project balances near their limits: one check a minute, logged as each begins and ends.
  const alertDeps: AlertDeps = {
    sponsors,
    tanks: balances.tanks,
    chains: new Map(config.chains.filter((c) => c.relayer).map((c) => [c.chainId, c.name])),
  };
  const alertWatch = alertDeps.chains.size > 0 ? new AlertWatch(alertDeps, config.console.alerts, log, metrics) : undefined;
  const statusEvents = metaTxnStatusEvents(() => metaTxns, bell);
  const metaTxnHooks: Parameters<typeof metaTxnRepo>[1] = {
    onStatus: async (q, rows, cause, known) => {
      await balances.onStatus(q, rows, known);
      await statusEvents(q, rows, cause, known);
      await caps.onStatus(q, rows);
    },
    chargeAtCommit: (tx, charges) => caps.chargeMany(tx, charges as Charge[]),
  };
  const metaTxns: MetaTxnRepo = metaTxnRepo(db, metaTxnHooks);
  const bars = barRepo(db);
  const waits = waitRepo(db);
  // The dispatchers' own connections (PostgreSQL): with every pooled connection busy with intake and
  // reads, a pass's statements queued behind hundreds of requests and nothing was sent while intake
  // ran (bench/relayer-sustained.ts: SENT 0 for a minute at 100 SendMetaTxn/s).
  const engineDb = config.chains.some((c) => c.relayer) ? ((await db.dedicated?.(ENGINE_CONNECTIONS)) ?? db) : db;
  const engineMetaTxns: MetaTxnRepo = engineDb === db ? metaTxns : metaTxnRepo(engineDb, metaTxnHooks);
  const engineBars = engineDb === db ? bars : barRepo(engineDb);
  if (db.kind === 'postgres') {
    // One line at start when processes × pools may pass max_connections: past it, calls answer 503.
    // The leader election's one connection counted in.
    const own = (db.connections ?? 0) + (engineDb === db ? 0 : (engineDb.connections ?? 0)) + 1;
    const budget = await connectionBudget(db, own).catch(() => undefined);
    const warning = budget && connectionWarning(budget);
    if (warning) log.warn({ connections: budget }, warning);
  }
  const receiptWaiters = new ReceiptWaiters(relayEvents, (chainId, id) => metaTxns.find(chainId, id), {
    max: config.relayer.maxReceiptWaiters,
    perAddress: config.relayer.maxReceiptWaitersPerAddress,
  });
  const relayers = new Map<number, ChainRelayer>();
  const dispatchers: Dispatcher[] = [];
  const relayed = config.chains.filter((c) => c.relayer);
  let quoteSecret = config.relayer.quoteSecret;
  if (relayed.length && !quoteSecret) {
    // Quotes then only verify in this process: fine for one process, wrong for a fleet.
    quoteSecret = randomBytes(32).toString('hex');
    log.warn('relayer.quoteSecret is not set (METARELAY_QUOTE_SECRET): fee quotes are valid only in this process');
  }
  for (const c of relayed) {
    const relayer: ChainRelayer = new ChainRelayer({
      // Intake's node calls batch only with other intake calls; the dispatcher takes the engine client (forRole).
      chain: withRole(chains.get(c.chainId)!, 'intake'),
      config: c.relayer!,
      feeModel: feeModelFor(c.chainId, c.feeModel),
      quoteSecret: quoteSecret!,
      metaTxns,
      sponsors,
      spendCaps: caps,
      balances: balances.holds,
      bars,
      log,
      metrics,
      onQueued: () => {
        preconditions.poke();
        dispatcher.nudge();
      },
      approveSponsorship: approvalClient(post, w.approvalDeadlineMs, log),
      waits,
    });
    const preconditions = new PreconditionChecker(relayer, { db, metaTxns, waits, events: relayEvents, log });
    const refill = c.relayer!.refill
      ? new SenderRefill(withRole(chains.get(c.chainId)!, 'engine'), engineDb, { ...c.relayer!.refill, minSenderBalance: c.relayer!.minSenderBalance }, log, metrics)
      : undefined;
    const dispatcher = new Dispatcher(relayer, {
      db: engineDb,
      metaTxns: engineMetaTxns,
      bars: engineBars,
      events: relayEvents,
      log,
      metrics,
      onHead: (head) => preconditions.check(head),
      refill,
      onSenderBalance: senderBalanceEvents(bell),
    });
    relayers.set(c.chainId, relayer);
    dispatchers.push(dispatcher);
  }
  const indexers = new Map<number, ChainIndexer>();
  // Every indexed chain tells its webhook listeners (a chain nobody listens on: one small read a step).
  const listening = listenerHooks(bell, events.listeners, {
    maxPerBlock: w.maxListenerDeliveriesPerBlock,
    dropped: (chainId, n) => metrics.listenerLogsDropped.inc({ chain: chains.get(chainId)?.name ?? String(chainId) }, n),
  });
  for (const c of config.chains) {
    if (!c.indexer || c.indexer.scope === 'off') continue;
    // Watchlist chains record balance.updated events; a chain-wide scan would flood the outbox.
    const onBalances = c.indexer.scope === 'watchlist' ? balanceEvents(bell) : undefined;
    const hooks = { onBalances, ...listening };
    indexers.set(c.chainId, new ChainIndexer(withRole(chains.get(c.chainId)!, 'indexer'), { ...c.indexer, scope: c.indexer.scope, logReads: config.logReads }, db, log, metrics, hooks));
  }
  // A poll every 2 s is two small statements; a new backfill wakes it at once.
  const indexerBackfills = indexers.size ? new BackfillRunner(backfillWorkerFor(db, indexers, config.indexer.leaseSec), log, 2_000) : undefined;
  // No wait: the indexer answers with what the metadata service holds; the rest resolves in the background.
  // Contract info is kept serialised as long as token records stay hot: a page is then one query.
  // The Indexer's reads need an access key unless auth.rpc says otherwise: only then do they queue logos.
  const contractInfo = new ContractInfoCache(async (chain, addresses) => (await contracts.get(chain, addresses as `0x${string}`[], { waitMs: 0, eager: config.auth.rpc === 'required' })).infos, {
    size: m.hotCacheSize,
    ttlMs: m.hotCacheTtlMs,
  });
  const indexerMetadata: IndexerMetadata = {
    contracts: (chain, addresses) => contractInfo.get(chain, addresses),
    tokens: async (chain, contract, ids) => (await tokens.getTokens(chain, contract as `0x${string}`, ids, { waitMs: 0 })).json,
    // Verified means curated: listed in the token directory (token lists, admins), not removed from it.
    verified: (chainId) => directoryRepo.addressesOn(chainId),
  };
  // Read only when asked (a price method, a page of balances): no background polling.
  const prices = new Map<number, UsdPrices>();
  for (const c of config.chains) {
    // The operator's sources over the built-in table of well-known feeds for the chain id.
    const p = effectivePrices(c.chainId, c.prices);
    if (p) prices.set(c.chainId, new UsdPrices(withRole(chains.get(c.chainId)!, 'indexer'), p.config, log, p.builtin));
  }
  // One process of the fleet follows each chain (its watcher and indexer followers) and sweeps media:
  // the others would read the same heads and logs from the node only to drop their step at the cursor.
  const pg = config.postgres;
  const leadership = new Leadership(db.lockSession ? () => db.lockSession!(pg.leaderSessionTimeoutMs) : undefined, {
    checkMs: pg.leaderCheckMs,
    log,
    onChange: (role, leading) => metrics.leader.set({ role }, leading ? 1 : 0),
  });
  for (const c of config.chains) {
    const followers = [...watchers.filter((w) => w.chainId === c.chainId), ...[...indexers.values()].filter((i) => i.chain.chainId === c.chainId).map((i) => i.follower)];
    if (!followers.length) continue;
    leadership.add(`chain:${c.chainId}`, {
      start: () => {
        for (const f of followers) f.start();
      },
      stop: async () => {
        await Promise.all(followers.map((f) => f.stop()));
      },
    });
  }
  if (mediaSweep) leadership.add('media-orphan-sweep', mediaSweep);
  if (media) leadership.add('media-store-retry', new MediaStoreRetry(media, config.media.storeRetrySec, log));
  // One process checks the alerts, so each begins and ends once in the fleet's log.
  if (alertWatch) leadership.add('alerts', alertWatch);
  let background = false;
  let dispatching = false;
  let closed = false;
  let draining = false;
  return {
    config,
    log,
    metrics,
    db,
    networks: new NetworkRegistry(config.chains),
    chains,
    projects: projectRepo(db),
    ecosystems: ecosystemRepo(db),
    accessKeys,
    auth,
    requestJournal,
    rateLimiter: new RateLimiter(db, config.auth.rateLimit),
    responses: tokenResponseCache(config),
    fetcher,
    tokens,
    media,
    collections,
    contracts,
    contractStore: contractsRepo,
    tokenStore: tokensRepo,
    directory,
    tokenSearch,
    tasks,
    refresh,
    mintMonitors,
    worker,
    watchers,
    relayers,
    dispatchers,
    relayEvents,
    metaTxns,
    sponsors,
    spendCaps: caps,
    balances,
    alerts: alertDeps,
    bars,
    receiptWaiters,
    indexers,
    indexerMetadata,
    prices,
    indexerBackfills,
    events,
    leadership,
    startDispatchers() {
      dispatching = true;
      events.delivery.start();
      for (const d of dispatchers) d.start();
    },
    startBackground() {
      background = true;
      events.delivery.start();
      worker.start();
      leadership.start();
      indexerBackfills?.start();
    },
    startedAt: new Date(),
    get draining() {
      return draining;
    },
    async drain() {
      draining = true;
      // Open receipt long polls answer now with the current status; the client polls again elsewhere.
      receiptWaiters.release();
      // Dispatchers first: their senders go back now, so another process signs with them on its next tick.
      if (dispatching) await Promise.all(dispatchers.map((d) => d.stop()));
      dispatching = false;
      if (background) await Promise.all([worker.stop(), leadership.stop()]);
      background = false;
      // Deliveries in flight finish and are recorded; what is left is claimed by another process.
      await events.delivery.stop();
    },
    async close() {
      if (closed) return;
      closed = true;
      // Refreshes a collection edit noted are queued before the database goes.
      await fanout.idle();
      if (background) {
        await Promise.all([worker.stop(), leadership.stop(), indexerBackfills?.stop()]);
      }
      if (dispatching) await Promise.all(dispatchers.map((d) => d.stop()));
      // The shared head readers poll while the watchers and followers listen; none is left now.
      await Promise.all([...chains.values()].map((c) => c.head.stop()));
      await events.delivery.stop();
      await events.streams.close();
      post.close();
      await auth.flush();
      await requestJournal.flush();
      await media?.close();
      remoteFetcher.close();
      if (engineDb !== db) await engineDb.close();
      if (!opts.db) await db.close();
    },
  };
}
