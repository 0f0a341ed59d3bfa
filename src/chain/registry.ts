import { chainKey, lookupKnownNetwork } from './networks.ts';

/** What the registry needs of a configured chain. */
export interface ChainRef {
  chainId: number;
  name: string;
}

export type ChainLookup = { ok: true; chain: ChainRef } | { ok: false; reason: 'unknown' | 'not-configured'; message: string };

/** Resolves `chainID` strings ("1", "mainnet", "0x89", "polygon") to a configured chain. */
export class NetworkRegistry {
  private readonly byKey = new Map<string, ChainRef>();

  constructor(readonly chains: readonly ChainRef[]) {
    for (const c of chains) {
      this.byKey.set(String(c.chainId), c);
      this.byKey.set(c.name, c);
      const known = lookupKnownNetwork(String(c.chainId));
      // Aliases of the well-known network with this id also reach the configured chain.
      if (known) for (const a of [known.name, ...(known.aliases ?? [])]) if (!this.byKey.has(a)) this.byKey.set(a, c);
    }
  }

  lookup(input: string | number): ChainLookup {
    const raw = String(input ?? '').trim();
    if (raw === '') return { ok: false, reason: 'unknown', message: 'chainID is empty' };
    const chain = this.byKey.get(chainKey(raw));
    if (chain) return { ok: true, chain };
    const known = lookupKnownNetwork(raw);
    if (known) {
      return {
        ok: false,
        reason: 'not-configured',
        message: `chain ${known.name} (${known.chainId}) is not configured on this server (no RPC URL)`,
      };
    }
    return { ok: false, reason: 'unknown', message: `unknown chain "${raw}"` };
  }

  /** A configured chain's id, else a well-known network's (e.g. for rules kept for chains not served yet). */
  chainIdOf(input: string): number | undefined {
    const found = this.lookup(input);
    return found.ok ? found.chain.chainId : lookupKnownNetwork(String(input).trim())?.chainId;
  }

  list(): readonly ChainRef[] {
    return this.chains;
  }
}
