import type { Address } from 'viem';
import type { ChainClient } from '../../chain/client.ts';
import { lookupKnownNetwork } from '../../chain/networks.ts';
import type { ContractStore } from './contract-store.ts';
import { contractToWire, withCachedMedia, type ContractInfoWire, type ContractMediaLookup, type MediaUrl } from './contract-view.ts';
import type { DirectoryEntry, DirectoryStore } from './directory-store.ts';

/** Sequence's featureIndex is a uint8. */
export const MAX_FEATURE_INDEX = 255;

export interface DirectoryFilter {
  /** An explicit chain is answered even when it is a testnet. */
  chainId?: number;
  includeTestnets: boolean;
  onlyFeatured: boolean;
  /** A project held to some networks sees only those; null: no limit. */
  allowed: number[] | null;
  page: number;
  pageSize: number;
}

export interface DirectoryPage {
  contracts: ContractInfoWire[];
  more: boolean;
}

interface Deps {
  store: DirectoryStore;
  contracts: ContractStore;
  chains: ReadonlyMap<number, ChainClient>;
  /** Configured chains: their names and testnet flags win over the well-known list. */
  configured: readonly { chainId: number; name: string; testnet?: boolean }[];
  mediaUrl: MediaUrl;
  /** Cached logos for the cachedMedia extra (the console shows them: its page loads images from its own origin only). */
  media?: ContractMediaLookup;
  /** Starts a background read of contracts on a chain this server reads. */
  learn: (chain: ChainClient, addresses: Address[]) => void;
}

/**
 * The token directory: the curated contracts per network that wallets and marketplaces list
 * (token lists feed it, admins curate it, `featureIndex` orders the featured ones first).
 */
export class TokenDirectory {
  constructor(private readonly d: Deps) {}

  isTestnet(chainId: number): boolean {
    const own = this.d.configured.find((c) => c.chainId === chainId);
    return own?.testnet ?? lookupKnownNetwork(String(chainId))?.testnet ?? false;
  }

  networkName(chainId: number): string {
    return this.d.configured.find((c) => c.chainId === chainId)?.name ?? lookupKnownNetwork(String(chainId))?.name ?? String(chainId);
  }

  /** Chains with entries, as the filter allows; null when no chain is left to look at. */
  private async chainsFor(f: Pick<DirectoryFilter, 'chainId' | 'includeTestnets' | 'onlyFeatured' | 'allowed'>): Promise<number[]> {
    const mayLook = (id: number) => !f.allowed || f.allowed.includes(id);
    if (f.chainId !== undefined) return mayLook(f.chainId) ? [f.chainId] : [];
    return (await this.d.store.chainIds(f.onlyFeatured)).filter((id) => mayLook(id) && (f.includeTestnets || !this.isTestnet(id)));
  }

  async networks(f: Pick<DirectoryFilter, 'includeTestnets' | 'onlyFeatured' | 'allowed'>): Promise<{ chainId: number; name: string }[]> {
    return (await this.chainsFor(f)).map((chainId) => ({ chainId, name: this.networkName(chainId) }));
  }

  async list(f: DirectoryFilter): Promise<DirectoryPage> {
    const chainIds = await this.chainsFor(f);
    if (!chainIds.length) return { contracts: [], more: false };
    const { entries, more } = await this.d.store.list({ chainIds, onlyFeatured: f.onlyFeatured, page: f.page, pageSize: f.pageSize });
    return { contracts: await this.decorated(entries.map((e) => this.toWire(e))), more };
  }

  /** Ranked text search (as contract search ranks) within the directory. */
  async search(q: string, f: DirectoryFilter): Promise<DirectoryPage> {
    const chainIds = await this.chainsFor(f);
    if (!chainIds.length) return { contracts: [], more: false };
    const { rows, more } = await this.d.contracts.search({
      q,
      chainIds,
      types: null,
      page: f.page,
      pageSize: f.pageSize,
      directory: { onlyFeatured: f.onlyFeatured },
    });
    const indexes = await this.d.store.featureIndexes(rows.map((r) => ({ chainId: r.chain_id, address: r.address })));
    return {
      contracts: rows.map((row) => this.toWire({ chainId: row.chain_id, address: row.address as Address, featureIndex: indexes.get(`${row.chain_id}:${row.address}`) ?? 0, row })),
      more,
    };
  }

  /** The entry's feature index, or null when the contract is not in the directory. */
  async featureIndexOf(chainId: number, address: Address): Promise<number | null> {
    return (await this.d.store.featureIndexes([{ chainId, address }])).get(`${chainId}:${address}`) ?? null;
  }

  /** Adds a contract (an admin's add; revives one an admin removed) and reads it if this server reads its chain. */
  async add(chainId: number, addresses: Address[], featureIndex?: number): Promise<void> {
    await this.d.store.add(chainId, addresses, 'admin', featureIndex);
    const chain = this.d.chains.get(chainId);
    if (chain) this.d.learn(chain, addresses);
  }

  remove(chainId: number, address: Address): Promise<boolean> {
    return this.d.store.remove(chainId, address);
  }

  setFeatureIndex(chainId: number, address: Address, featureIndex: number): Promise<boolean> {
    return this.d.store.setFeatureIndex(chainId, address, featureIndex);
  }

  /** Listed contracts on each chain this server reads, for a refresh of the directory. */
  async readableEntries(): Promise<{ chain: ChainClient; addresses: Address[] }[]> {
    const out: { chain: ChainClient; addresses: Address[] }[] = [];
    for (const chainId of await this.d.store.chainIds(false)) {
      const chain = this.d.chains.get(chainId);
      if (chain) out.push({ chain, addresses: await this.d.store.addressesOn(chainId) });
    }
    return out;
  }

  private async decorated(infos: ContractInfoWire[]): Promise<ContractInfoWire[]> {
    const byChain = new Map<number, ContractInfoWire[]>();
    for (const i of infos) byChain.set(i.chainId, [...(byChain.get(i.chainId) ?? []), i]);
    await Promise.all([...byChain].map(([chainId, list]) => withCachedMedia(this.d.media, chainId, list, true)));
    return infos;
  }

  private toWire(e: DirectoryEntry): ContractInfoWire {
    const info = contractToWire(e.chainId, e.address, e.row, e.row ? 'AVAILABLE' : 'NOT_AVAILABLE', null, this.d.mediaUrl);
    // The directory's own curation shows in the Sequence extension fields, whatever the layers say.
    return { ...info, extensions: { ...info.extensions, featured: e.featureIndex > 0, featureIndex: e.featureIndex } };
  }
}
