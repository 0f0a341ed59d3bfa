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

function firstMethod(body: unknown): string {
  if (typeof body !== 'string') return 'unknown';
  const m = /"method"\s*:\s*"([A-Za-z0-9_]+)"/.exec(body);
  if (!m) return 'unknown';
  return body.trimStart().startsWith('[') ? `batch:${m[1]}` : m[1];
}

export function createChainClient(
  chain: ChainConfig,
  opts: { metrics?: Metrics; timeoutMs?: number; pollingIntervalMs?: number } = {},
): ChainClient {
  const transports = chain.rpcUrls.map((url) =>
    http(url, {
      timeout: opts.timeoutMs ?? 10_000,
      retryCount: 1,
      onFetchRequest: (_req, init) => {
        opts.metrics?.chainRpcCalls.inc({ chain: chain.name, method: firstMethod(init.body) });
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
