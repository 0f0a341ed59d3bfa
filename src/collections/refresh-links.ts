// What a batch of noted collection edits queues (change-fanout.ts runs it): per chain and project, a
// refresh of each whole contract (joined to one still pending), of the changed tokens, and one
// contract-info task for all the contracts of the batch; then the refresh worker is woken.
import type { ChainClient } from '../chain/client.ts';
import type { RefreshService } from '../metadata/index.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Change } from './change-fanout.ts';

/** The metadata domain's refresh queue and its worker's wake-up. */
export interface LinkedRefresh {
  refresh: Pick<RefreshService, 'enqueueTokens' | 'enqueueAllTokens' | 'enqueueContracts'>;
  nudge(): void;
}

export function refreshLinked(chains: ReadonlyMap<number, ChainClient>, to: () => LinkedRefresh, log: Logger) {
  return async (batch: Change[]): Promise<void> => {
    const { refresh, nudge } = to();
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
    if (batch.length) nudge();
  };
}
