import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { slotGauge } from './slot-gauge.ts';

/** One registry per service instance, so tests can run several apps in one process. */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return {
    registry,
    rpcRequests: new Counter({
      name: 'metarelay_rpc_requests_total',
      help: 'webrpc requests by service, method and outcome code',
      labelNames: ['service', 'method', 'code'] as const,
      registers: [registry],
    }),
    rpcDuration: new Histogram({
      name: 'metarelay_rpc_request_duration_seconds',
      help: 'webrpc request latency by service and method',
      labelNames: ['service', 'method'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    httpRequests: new Counter({
      name: 'metarelay_http_requests_total',
      help: 'HTTP requests by route and status',
      labelNames: ['route', 'status'] as const,
      registers: [registry],
    }),
    chainRpcRequests: new Counter({
      name: 'metarelay_chain_rpc_requests_total',
      help: 'HTTP round trips to chain nodes (a JSON-RPC batch counts once)',
      labelNames: ['chain'] as const,
      registers: [registry],
    }),
    chainRpcBatchSplits: new Counter({
      name: 'metarelay_chain_rpc_batch_splits_total',
      help: 'JSON-RPC batches a node refused as a whole (or answered short), re-sent member by member',
      labelNames: ['chain'] as const,
      registers: [registry],
    }),
    chainRpcCalls: new Counter({
      name: 'metarelay_chain_rpc_calls_total',
      help: 'JSON-RPC calls sent to chain nodes, by chain and method',
      labelNames: ['chain', 'method'] as const,
      registers: [registry],
    }),
    metadataFetches: new Counter({
      name: 'metarelay_metadata_fetches_total',
      help: 'token document fetches by scheme and outcome (ok or a failure reason)',
      labelNames: ['scheme', 'outcome'] as const,
      registers: [registry],
    }),
    metadataFetchDuration: new Histogram({
      name: 'metarelay_metadata_fetch_duration_seconds',
      help: 'token document fetch latency by scheme (gateway latency for ipfs)',
      labelNames: ['scheme'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20],
      registers: [registry],
    }),
    metadataCache: new Counter({
      name: 'metarelay_metadata_cache_lookups_total',
      help: 'token lookups by where they were answered from: hot (in-process), store, stale, miss',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    leader: new Gauge({
      name: 'metarelay_leader',
      help: 'whether this process leads a role of the fleet (chain:<id> follows that chain; media-orphan-sweep): 1 leading, 0 not',
      labelNames: ['role'] as const,
      registers: [registry],
    }),
    dbMaintenance: new Counter({
      name: 'metarelay_db_maintenance_total',
      help: "turns of the service's own vacuum and analysis (PGlite, or PostgreSQL with autovacuum off) that ran statements or failed",
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    refreshItems: new Counter({
      name: 'metarelay_refresh_items_total',
      help: 'refresh task items processed by this worker, by outcome (ok, retry, failed)',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    relayBroadcasts: new Counter({
      name: 'metarelay_relayer_broadcasts_total',
      help: 'signed transactions broadcast, by chain and kind (first, replacement, rebroadcast, filler, batch)',
      labelNames: ['chain', 'kind'] as const,
      registers: [registry],
    }),
    relayRefused: new Counter({
      name: 'metarelay_relayer_refused_total',
      help: 'broadcasts the node refused, by chain and what the refusal means',
      labelNames: ['chain', 'reason'] as const,
      registers: [registry],
    }),
    relayInclusionBlocks: new Histogram({
      name: 'metarelay_relayer_inclusion_blocks',
      help: 'blocks from SendMetaTxn to inclusion, by chain',
      labelNames: ['chain'] as const,
      buckets: [1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50],
      registers: [registry],
    }),
    relayReorgs: new Counter({
      name: 'metarelay_relayer_reorged_total',
      help: 'mined relay transactions a reorg removed or moved, by chain',
      labelNames: ['chain'] as const,
      registers: [registry],
    }),
    relayDeepReorgs: new Counter({
      name: 'metarelay_relayer_deep_reorged_total',
      help: "final (confirmed) relay transactions a reorg deeper than the confirmations removed, by chain: each is re-broadcast; raise the chain's confirmations",
      labelNames: ['chain'] as const,
      registers: [registry],
    }),
    indexerLogs: new Counter({
      name: 'metarelay_indexer_logs_total',
      help: 'transfer logs the indexer read, by chain and outcome (applied, malformed: skipped for not having its standard shape)',
      labelNames: ['chain', 'outcome'] as const,
      registers: [registry],
    }),
    webhookShares: new Gauge({
      name: 'metarelay_webhook_share_limits',
      help: 'the fair-share limits of webhook deliveries as configured: concurrency, maxInFlightPerEndpoint, maxInFlightPerProject (lanes of one process), maxListenerDeliveriesPerBlock, maxListeners',
      labelNames: ['limit'] as const,
      registers: [registry],
    }),
    listenerLogsDropped: new Counter({
      name: 'metarelay_webhook_listener_logs_dropped_total',
      help: "listener deliveries not made because the project had reached webhooks.maxListenerDeliveriesPerBlock in the log's block (counted on each listener too: droppedLogs)",
      labelNames: ['chain'] as const,
      registers: [registry],
    }),
    logBlocksSkipped: new Counter({
      name: 'metarelay_log_blocks_skipped_total',
      help: 'blocks whose logs could not be read after repeated tries, flagged and passed over (retried later), by chain and reader (indexer:<scope>, watcher)',
      labelNames: ['chain', 'reader'] as const,
      registers: [registry],
    }),
    logBlocksUnread: new Gauge({
      name: 'metarelay_log_blocks_unread',
      help: 'blocks passed over whose logs are still unread (waiting for a retry), by chain and reader: alert on > 0',
      labelNames: ['chain', 'reader'] as const,
      registers: [registry],
    }),
    indexerStreamBlocks: new Counter({
      name: 'metarelay_indexer_stream_blocks_total',
      help: "blocks the indexer streams' tail read with all their receipts (one eth_getBlockReceipts each, while a SubscribeReceipts or SubscribeEvents stream is open on the chain), by chain",
      labelNames: ['chain'] as const,
      registers: [registry],
    }),
    indexerReorgs: new Counter({
      name: 'metarelay_indexer_reorgs_total',
      help: 'reorgs the indexer rolled back, by chain',
      labelNames: ['chain'] as const,
      registers: [registry],
    }),
    relayCostShortfalls: new Counter({
      name: 'metarelay_relayer_cost_shortfalls_total',
      help: 'mined meta-transactions that cost more than their fee or sponsor hold covered (kind="gas": burnt more gas than priced, which bars its callers and contracts; kind="price": the gas price rose past the margin), by chain',
      labelNames: ['chain', 'kind'] as const,
      registers: [registry],
    }),
    relayCostShortfallWei: new Counter({
      name: 'metarelay_relayer_cost_shortfall_wei_total',
      help: 'wei the relayer paid beyond what fees and sponsor holds covered, by chain',
      labelNames: ['chain'] as const,
      registers: [registry],
    }),
    relayFeeShortfalls: new Counter({
      name: 'metarelay_relayer_fee_shortfalls_total',
      help: 'mined fee-paying meta-transactions whose fee did not reach the payment address (each bars its client network and wallet under its key, and the contracts it called), by chain',
      labelNames: ['chain'] as const,
      registers: [registry],
    }),
    relayKeyBars: new Counter({
      name: 'metarelay_relayer_key_bars_total',
      help: 'access keys barred whole from fee-paid relaying: fees did not arrive from keyBarAfterNetworks client networks of theirs within a day (alert on it: a dapp key is being abused), by chain',
      labelNames: ['chain'] as const,
      registers: [registry],
    }),
    relayPreconditionRefused: new Counter({
      name: 'metarelay_relayer_precondition_refused_total',
      help: "waiting (precondition) meta-transactions refused because a share of the pool was full, by chain and share: chain (maxPendingPreconditions), keyless, project, client (a client network's part of its project's or the keyless share), wallet",
      labelNames: ['chain', 'share'] as const,
      registers: [registry],
    }),
    relayQueue: new Gauge({
      name: 'metarelay_relayer_queue_depth',
      help: 'meta-transactions by chain and status (QUEUED waiting to be signed, SENT in flight)',
      labelNames: ['chain', 'status'] as const,
      registers: [registry],
    }),
    relaySenderBalance: new Gauge({
      name: 'metarelay_relayer_sender_balance_wei',
      help: 'sender balances as last read by the owning dispatcher',
      labelNames: ['chain', 'sender'] as const,
      registers: [registry],
    }),
    relaySenderStopped: new Gauge({
      name: 'metarelay_relayer_sender_stopped',
      help: '1 when an operator stopped a sender (StopSender): it settles what it has open and takes no new work',
      labelNames: ['chain', 'sender'] as const,
      registers: [registry],
    }),
    relaySenderBelowFloor: new Gauge({
      name: 'metarelay_relayer_sender_below_floor',
      help: '1 when a sender is below minSenderBalance and takes no new work',
      labelNames: ['chain', 'sender'] as const,
      registers: [registry],
    }),
    relayFeeTokenUnpriced: new Gauge({
      name: 'metarelay_relayer_fee_token_unpriced',
      help: '1 when a fee token has no trustworthy price (every source stale or failing): it is withdrawn from FeeOptions',
      labelNames: ['chain', 'token'] as const,
      registers: [registry],
    }),
    relayFeeTokenPrice: new Gauge({
      name: 'metarelay_relayer_fee_token_price',
      help: 'the price a fee token was last priced at, in the native currency per whole token',
      labelNames: ['chain', 'token'] as const,
      registers: [registry],
    }),
    relaySenderRefills: new Counter({
      name: 'metarelay_relayer_sender_refills_total',
      help: 'treasury top-ups of senders below minSenderBalance, by chain and outcome (sent, mined, failed: reverted, lost or refused by the node, unfunded: the treasury could not pay)',
      labelNames: ['chain', 'outcome'] as const,
      registers: [registry],
    }),
    relayTreasuryBalance: new Gauge({
      name: 'metarelay_relayer_treasury_balance_wei',
      help: 'the refill treasury balance as last read when a refill was due',
      labelNames: ['chain'] as const,
      registers: [registry],
    }),
    relayFeeCapped: new Gauge({
      name: 'metarelay_relayer_fee_capped',
      help: 'pending transactions of this chain that need a replacement the fee cap forbids',
      labelNames: ['chain'] as const,
      registers: [registry],
    }),
    metadataFetchSlots: slotGauge(
      registry,
      'metarelay_metadata_fetch_slots',
      'token document fetch slots (metadata.fetchConcurrency): running, keyless (running for keyless callers), waiting, hostsAtLimit (hosts holding their whole per-host share)',
    ),
    metadataFetchRefused: new Counter({
      name: 'metarelay_metadata_fetch_refused_total',
      help: 'token reads refused 429 because a share was full: keylessFetches (a keyless address out of unseen-token fetches) or callerQueue (too many waiting)',
      labelNames: ['share'] as const,
      registers: [registry],
    }),
    eventStreams: slotGauge(
      registry,
      'metarelay_event_streams',
      'GET /events and webrpc streams: open, keysFull (keys at maxStreamsPerKey), keyClientsFull (client networks at their share of a key), and the caps maxStreams, maxPerKey, maxPerKeyClient',
    ),
    streamsRefused: new Counter({
      name: 'metarelay_event_streams_refused_total',
      help: "streams refused 429 by the share that was full: server, key, keyClient (a client network's share of its key), address, reconnects (resumes of one address past streamShares.reconnectsPerMin)",
      labelNames: ['share'] as const,
      registers: [registry],
    }),
    streamResumes: new Counter({
      name: 'metarelay_event_stream_resumes_total',
      help: 'streams opened with a Last-Event-ID, by outcome: caughtUp (read from there), gap (too far back or too old: started at the head after a stream.gap event)',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    streamResumePages: new Counter({
      name: 'metarelay_event_stream_resume_pages_total',
      help: "outbox pages read to catch resumed streams up, by whether the page waited for its client network's read budget (streamShares.resumePagesPerSec): paced or not",
      labelNames: ['paced'] as const,
      registers: [registry],
    }),
    searchPostings: new Gauge({
      name: 'metarelay_search_postings',
      help: 'token search posting lists this process holds in memory: contracts, tokens and bytes (of metadata.searchMemoryMB)',
      labelNames: ['measure'] as const,
      registers: [registry],
    }),
  };
}
export type Metrics = ReturnType<typeof createMetrics>;
