import { createPublicClient, fallback, http, type PublicClient } from 'viem';
import type { ChainConfig } from '../config/schema.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { batchSplittingFetch } from './batch-split.ts';
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
  return { chainId: chain.chainId, name: chain.name, rpcUrls: chain.rpcUrls, public: chain.forRole(role), health: chain.health, head: chain.head, forRole: (r) => chain.forRole(r) };
}

/** The JSON-RPC methods in a request body (one, or several for a batch). */
function methodsOf(body: unknown): string[] {
  if (typeof body !== 'string') return ['unknown'];
  const found = [...body.matchAll(/"method"\s*:\s*"([A-Za-z0-9_]+)"/g)].map((m) => m[1]);
  return found.length ? found : ['unknown'];
}

export function createChainClient(
  chain: Pick<ChainConfig, 'chainId' | 'name' | 'rpcUrls' | 'rpcBatchSize'> & { rpcTimeoutMs?: number; blockTimeMs?: number },
  opts: { metrics?: Metrics; timeoutMs?: number; pollingIntervalMs?: number; log?: Logger } = {},
): ChainClient {
  const timeoutMs = opts.timeoutMs ?? chain.rpcTimeoutMs ?? 10_000;
  const health = new ChainHealth(chain.chainId, chain.name, opts.log, chain.rpcUrls);
  // Re-sent members of a refused batch are HTTP requests of their own; their calls were counted with the batch.
  // Health sees what the split made of a batch: a refusal it recovered from is not an outage.
  const fetchFn = observedFetch(
    batchSplittingFetch({
      fetchFn: nodeFetch,
      onSplit: () => opts.metrics?.chainRpcBatchSplits.inc({ chain: chain.name }),
      onResend: () => opts.metrics?.chainRpcRequests.inc({ chain: chain.name }),
    }),
    health,
    timeoutMs,
  );
  const make = (): PublicClient => {
    // Separate http() instances: viem queues batches per instance, so each client batches only its own calls.
    const transports = chain.rpcUrls.map((url) =>
      http(url, {
        timeout: timeoutMs,
        retryCount: 1,
        // Requests issued in the same tick share one HTTP round trip.
        batch: chain.rpcBatchSize > 1 ? { batchSize: chain.rpcBatchSize, wait: 0 } : false,
        fetchFn,
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
  const head = new ChainHead(make(), { blockTimeMs: chain.blockTimeMs, health, log: opts.log, name: chain.name });
  return {
    chainId: chain.chainId,
    name: chain.name,
    rpcUrls: chain.rpcUrls,
    public: make(),
    health,
    head,
    forRole(role) {
      let c = roles.get(role);
      if (!c) roles.set(role, (c = make()));
      return c;
    },
  };
}
