import { createPublicClient, fallback, http, type PublicClient } from 'viem';
import type { ChainConfig } from '../config/schema.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { batchSplittingFetch } from './batch-split.ts';
import { BACKGROUND, CallBudget, methodsIn, RECEIPTS, URGENT, type CallClass } from './call-budget.ts';
import { ChainHealth, observedFetch } from './health.ts';
import { ChainHead } from './head.ts';
import { nodeFetch } from './node-fetch.ts';
import type { Logger } from '../telemetry/logger.ts';

/**
 * Who is calling the node. Each role has its own viem client (same URLs, its own transports), so its
 * calls are batched only with its own: a caller's FeeOptions with many bundles can no longer share, and
 * sink, a JSON-RPC batch with the dispatcher's, the indexer's or the watcher's reads.
 * - intake: user-triggered relayer work (FeeOptions, Simulate, SendMetaTxn's probes, nonce reads)
 * - keyless: the simulations FeeOptions and Simulate run for callers without an access key, apart from
 *   intake's, so a keyed caller's reads never wait in a batch behind a keyless caller's heavy run
 * - engine: the dispatcher, its sweeps and sender refills
 * - indexer: the chain indexer
 * `public` serves everything else (metadata reads, the watcher, health); the shared head (head.ts) has its own.
 */
export type NodeRole = 'intake' | 'keyless' | 'engine' | 'indexer';

/** What domain code needs from a chain; wired once in createServices. */
export interface ChainClient {
  readonly chainId: number;
  readonly name: string;
  readonly rpcUrls: readonly string[];
  readonly public: PublicClient;
  /** The node's state as every role's calls see it (one per chain, shared by the roles). */
  readonly health: ChainHealth;
  /** The chain's head and recent headers, read once for every reader of the process (one per chain, shared by the roles). */
  readonly head: ChainHead;
  /** The client of one role (made on first use, then kept). */
  forRole(role: NodeRole): PublicClient;
}

/** The same chain, whose `public` is the client of `role`: for a component that should only call the node as that role. */
export function withRole(chain: ChainClient, role: NodeRole): ChainClient {
  return {
    chainId: chain.chainId,
    name: chain.name,
    rpcUrls: chain.rpcUrls,
    public: chain.forRole(role),
    health: chain.health,
    head: chain.head,
    forRole: (r) => chain.forRole(r),
  };
}

/** The JSON-RPC methods in a request body (one, or several for a batch). */
function methodsOf(body: unknown): string[] {
  const found = methodsIn(body);
  return found.length ? found : ['unknown'];
}

/**
 * How long a client's call (intake: FeeOptions, SendMetaTxn, Simulate) waits for a slot of a
 * rate-limited node before its request is refused 503 with Retry-After: a few seconds, well within a
 * client's own timeout, rather than a refusal at the first 429. viem tries a failed call once more
 * (retryCount 1 below), so a client waits at most about twice this.
 */
export const CLIENT_WAIT_MS = 2_000;

/** How long a call waits for a slot of a rate-limited node before it tries the chain's next RPC URL. */
const FAILOVER_WAIT_MS = 1_000;

/** The engine's sender reads, which wait for everything else (the sweep reads them again at the next head anyway). */
const SENDER_READS = new Set(['eth_getTransactionCount', 'eth_getBalance']);

/** How each caller's calls wait on a rate-limited node: see call-budget.ts for the order. */
function callClass(role: NodeRole | 'head' | 'public'): (methods: string[]) => CallClass {
  switch (role) {
    case 'intake':
      return () => ({ priority: URGENT, maxWaitMs: CLIENT_WAIT_MS });
    case 'engine':
      return (methods) => (methods.includes('eth_sendRawTransaction') ? { priority: URGENT } : methods.every((m) => SENDER_READS.has(m)) ? { priority: BACKGROUND } : { priority: RECEIPTS });
    case 'head':
      return () => ({ priority: RECEIPTS });
    default:
      // The indexer, the watcher, metadata reads: they wait for the rest.
      return () => ({ priority: BACKGROUND });
  }
}

export function createChainClient(
  chain: Pick<ChainConfig, 'chainId' | 'name' | 'rpcUrls' | 'rpcBatchSize'> & { rpcTimeoutMs?: number; blockTimeMs?: number },
  opts: { metrics?: Metrics; timeoutMs?: number; pollingIntervalMs?: number; log?: Logger } = {},
): ChainClient {
  const timeoutMs = opts.timeoutMs ?? chain.rpcTimeoutMs ?? 10_000;
  const health = new ChainHealth(chain.chainId, chain.name, opts.log, chain.rpcUrls);
  // Re-sent members of a refused batch are HTTP requests of their own; their calls were counted with the batch.
  const split = batchSplittingFetch({
    fetchFn: nodeFetch,
    onSplit: () => opts.metrics?.chainRpcBatchSplits.inc({ chain: chain.name }),
    onResend: () => opts.metrics?.chainRpcRequests.inc({ chain: chain.name }),
  });
  // One budget per node (RPC URL), whoever calls: each caller waits for its slot by its class. Health
  // sees what came of a call after its waits: a 429 the budget waited out is not an outage.
  const budgets = new Map(chain.rpcUrls.map((url) => [url, new CallBudget(chain.chainId, chain.name)]));
  const make = (role: NodeRole | 'head' | 'public'): PublicClient => {
    const classOf = callClass(role);
    // With another URL to fall back on, a call waits for a slot briefly, then goes there.
    const waitOf = chain.rpcUrls.length > 1 ? (methods: string[]) => ({ ...classOf(methods), maxWaitMs: Math.min(classOf(methods).maxWaitMs ?? FAILOVER_WAIT_MS, FAILOVER_WAIT_MS) }) : classOf;
    // Separate http() instances: viem queues batches per instance, so each client batches only its own calls.
    const transports = chain.rpcUrls.map((url) =>
      http(url, {
        timeout: timeoutMs,
        retryCount: 1,
        // Requests issued in the same tick share one HTTP round trip.
        batch: chain.rpcBatchSize > 1 ? { batchSize: chain.rpcBatchSize, wait: 0 } : false,
        fetchFn: observedFetch(budgets.get(url)!.fetch(split, waitOf), health, timeoutMs),
        onFetchRequest: (_req, init) => {
          if (!opts.metrics) return;
          opts.metrics.chainRpcRequests.inc({ chain: chain.name });
          for (const method of methodsOf(init.body)) opts.metrics.chainRpcCalls.inc({ chain: chain.name, method });
        },
      }),
    );
    const transport = transports.length === 1 ? transports[0] : fallback(transports, { retryCount: 1 });
    return createPublicClient({
      chain: {
        id: chain.chainId,
        name: chain.name,
        nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
        rpcUrls: { default: { http: [...chain.rpcUrls] } },
      },
      transport,
      // Local chains mine every second: viem's 4 s default polling would look stuck.
      pollingInterval: opts.pollingIntervalMs ?? 1_000,
      cacheTime: 0,
    }) as PublicClient;
  };
  const roles = new Map<NodeRole, PublicClient>();
  // Its own client: a head read never waits in a batch behind another role's calls.
  const head = new ChainHead(make('head'), { blockTimeMs: chain.blockTimeMs, health, log: opts.log, name: chain.name });
  return {
    chainId: chain.chainId,
    name: chain.name,
    rpcUrls: chain.rpcUrls,
    public: make('public'),
    health,
    head,
    forRole(role) {
      let c = roles.get(role);
      if (!c) roles.set(role, (c = make(role)));
      return c;
    },
  };
}
