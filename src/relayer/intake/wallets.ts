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

/** Proxies remembered at most; past that the memory starts over (a cache, not a record). */
const MAX_REMEMBERED = 100_000;

/**
 * What recognising wallets need not ask the node twice. A wallet proxy's code never changes (it has no
 * way to replace itself), so it is remembered for good once seen; its implementation slot can (a
 * wallet may switch modules), so it is remembered only for the block it was read in: `observe` a newer
 * block and the slots are read again.
 */
export class WalletCache {
  private readonly proxies = new Set<Address>();
  /** Reads in flight, shared by concurrent requests for one address. */
  private readonly codeReads = new Map<Address, Promise<Hex | undefined>>();
  private slots = new Map<Address, Promise<Hex | undefined>>();
  private block = -1n;

  observe(block: bigint | number) {
    const b = BigInt(block);
    if (b <= this.block) return;
    this.block = b;
    this.slots = new Map();
  }

  code(a: Address, read: () => Promise<Hex | undefined>): Promise<Hex | undefined> {
    if (this.proxies.has(a)) return Promise.resolve(WALLET_PROXY_CODE);
    let p = this.codeReads.get(a);
    if (!p) {
      p = read().finally(() => this.codeReads.delete(a));
      this.codeReads.set(a, p);
    }
    return p;
  }

  rememberProxy(a: Address) {
    if (this.proxies.size >= MAX_REMEMBERED) this.proxies.clear();
    this.proxies.add(a);
  }

  slot(a: Address, read: () => Promise<Hex | undefined>): Promise<Hex | undefined> {
    const slots = this.slots;
    let p = slots.get(a);
    if (!p) {
      p = read();
      p.catch(() => slots.get(a) === p && slots.delete(a));
      slots.set(a, p);
    }
    return p;
  }

  /** Not a wallet proxy (yet): its slot means nothing and must not outlive this request (it may be deployed next block). */
  forget(a: Address) {
    this.slots.delete(a);
  }
}

/**
 * Recognises Sequence wallets by their code, never by the selectors their calldata uses: the proxy's
 * code, and its implementation slot naming the context's main module (or its upgradable form). Two
 * node reads per address, issued together so they travel in one JSON-RPC batch; with a cache, a known
 * proxy's code is not read again and its slot once per block.
 */
export async function recogniseWallets(client: PublicClient, context: SequenceContext, addresses: readonly Address[], cache?: WalletCache): Promise<Map<Address, WalletKind>> {
  const modules = new Set([context.mainModule, context.mainModuleUpgradable].map((a) => a.toLowerCase()));
  const unique = [...new Set(addresses.map((a) => a.toLowerCase() as Address))];
  const kinds = await Promise.all(
    unique.map(async (address): Promise<WalletKind> => {
      const readCode = () => client.getCode({ address });
      const readSlot = () => client.getStorageAt({ address, slot: padHex(address, { size: 32 }) });
      const [code, slot] = await Promise.all([cache ? cache.code(address, readCode) : readCode(), cache ? cache.slot(address, readSlot) : readSlot()]);
      if (!code || code === '0x' || code.toLowerCase() !== WALLET_PROXY_CODE) {
        cache?.forget(address);
        return !code || code === '0x' ? 'empty' : 'other';
      }
      cache?.rememberProxy(address);
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
