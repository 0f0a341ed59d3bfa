import { getAddress, padHex, type Address, type Hex, type PublicClient } from 'viem';
import type { SequenceContext } from '../context.ts';

/**
 * The runtime code every Sequence v2 wallet has: a proxy that delegates to the address stored at the
 * storage slot equal to its own address (WALLET_CREATION_CODE returns these 26 bytes).
 */
export const WALLET_PROXY_CODE: Hex = '0x363d3d373d3d3d363d30545af43d82803e903d91601857fd5bf3';

/** What an address is, as far as relaying goes. */
export type WalletKind =
  /** The v2 wallet proxy pointing at a known main module: its execute checks signatures and nonces. */
  | 'wallet'
  /** No code yet: a counterfactual wallet, usable only when the same call deploys it. */
  | 'empty'
  /** Code that is not a Sequence wallet of this relayer's context (or a wallet switched to unknown code). */
  | 'other';

/**
 * Recognises Sequence wallets by their code, never by the selectors their calldata uses: the proxy's
 * code, and its implementation slot naming the context's main module (or its upgradable form). Two
 * node reads per address, issued together so they travel in one JSON-RPC batch.
 */
export async function recogniseWallets(client: PublicClient, context: SequenceContext, addresses: readonly Address[]): Promise<Map<Address, WalletKind>> {
  const modules = new Set([context.mainModule, context.mainModuleUpgradable].map((a) => a.toLowerCase()));
  const unique = [...new Set(addresses.map((a) => a.toLowerCase() as Address))];
  const kinds = await Promise.all(
    unique.map(async (address): Promise<WalletKind> => {
      const [code, slot] = await Promise.all([
        client.getCode({ address }),
        client.getStorageAt({ address, slot: padHex(address, { size: 32 }) }),
      ]);
      if (!code || code === '0x') return 'empty';
      if (code.toLowerCase() !== WALLET_PROXY_CODE) return 'other';
      const implementation = slot ? (`0x${slot.slice(-40)}` as Address).toLowerCase() : '';
      return modules.has(implementation) ? 'wallet' : 'other';
    }),
  );
  return new Map(unique.map((a, i) => [a, kinds[i]]));
}

export function describeKind(address: Address, kind: WalletKind): string {
  const a = getAddress(address);
  if (kind === 'empty') return `${a} is not deployed (it has no code): an undeployed wallet must be deployed by the same call, through the guest module`;
  return `${a} is not a Sequence v2 wallet of this relayer (its code is not the wallet proxy of a known main module)`;
}
