import { createPublicClient, createWalletClient, defineChain, http, type Account, type Chain } from 'viem';
import { MULTICALL3_ADDRESS } from './multicall.ts';

/** A viem chain for a dev anvil, with Multicall3 where installMulticall3 puts it. */
export function devChainDefinition(chainId: number, rpcUrl: string): Chain {
  return defineChain({
    id: chainId,
    name: 'anvil',
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
    contracts: { multicall3: { address: MULTICALL3_ADDRESS, blockCreated: 0 } },
  });
}

// viem's defaults (4 s polling, cached block number) make one-second blocks look stuck.
const FAST = { pollingInterval: 50, cacheTime: 0 } as const;

export function devPublicClient(rpcUrl: string, chainId: number) {
  return createPublicClient({ chain: devChainDefinition(chainId, rpcUrl), transport: http(rpcUrl), ...FAST });
}

export function devWalletClient(rpcUrl: string, chainId: number, account: Account) {
  return createWalletClient({ account, chain: devChainDefinition(chainId, rpcUrl), transport: http(rpcUrl), ...FAST });
}
