import { createPublicClient, fallback, http, type PublicClient } from 'viem';
import type { ChainConfig } from '../config/schema.ts';
import type { Metrics } from '../telemetry/metrics.ts';

/** What domain code needs from a chain; wired once in createServices. */
export interface ChainClient {
  readonly chainId: number;
  readonly name: string;
  readonly rpcUrls: readonly string[];
  readonly public: PublicClient;
}

/** The JSON-RPC methods in a request body (one, or several for a batch). */
function methodsOf(body: unknown): string[] {
  if (typeof body !== 'string') return ['unknown'];
  const found = [...body.matchAll(/"method"\s*:\s*"([A-Za-z0-9_]+)"/g)].map((m) => m[1]);
  return found.length ? found : ['unknown'];
}

export function createChainClient(
  chain: Pick<ChainConfig, 'chainId' | 'name' | 'rpcUrls' | 'rpcBatchSize'> & { rpcTimeoutMs?: number },
  opts: { metrics?: Metrics; timeoutMs?: number; pollingIntervalMs?: number } = {},
): ChainClient {
  const transports = chain.rpcUrls.map((url) =>
    http(url, {
      timeout: opts.timeoutMs ?? chain.rpcTimeoutMs ?? 10_000,
      retryCount: 1,
      // Requests issued in the same tick share one HTTP round trip.
      batch: chain.rpcBatchSize > 1 ? { batchSize: chain.rpcBatchSize, wait: 0 } : false,
      onFetchRequest: (_req, init) => {
        if (!opts.metrics) return;
        opts.metrics.chainRpcRequests.inc({ chain: chain.name });
        for (const method of methodsOf(init.body)) opts.metrics.chainRpcCalls.inc({ chain: chain.name, method });
      },
    }),
  );
  const transport = transports.length === 1 ? transports[0] : fallback(transports, { retryCount: 1 });
  const client = createPublicClient({
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
  });
  return { chainId: chain.chainId, name: chain.name, rpcUrls: chain.rpcUrls, public: client as PublicClient };
}
