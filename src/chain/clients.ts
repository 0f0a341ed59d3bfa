// The configured chains as the domains use them: one client per chain (its node pool, its shared head)
// and the registry that resolves the chainID a caller names.
import type { Common } from '../common.ts';
import { createChainClient, type ChainClient } from './client.ts';
import { NetworkRegistry } from './registry.ts';

export interface Chains {
  networks: NetworkRegistry;
  chains: ReadonlyMap<number, ChainClient>;
}

export function createChains({ config, metrics, log, shutdown }: Common, opts: { pollingIntervalMs?: number } = {}): Chains {
  const chains = new Map<number, ChainClient>();
  for (const c of config.chains) chains.set(c.chainId, createChainClient(c, { metrics, log, pollingIntervalMs: opts.pollingIntervalMs }));
  // The shared head readers poll while the watchers and followers listen; none is left by now.
  shutdown.add(() => Promise.all([...chains.values()].map((c) => c.head.stop())));
  return { networks: new NetworkRegistry(config.chains), chains };
}
