import type { ChainClient } from '../chain/client.ts';
import { LruCache } from '../util/lru.ts';

/**
 * Contract info for the indexer's answers, serialised once and kept in the process as briefly as
 * the metadata service keeps token records (its hot cache TTL). Without it every page with
 * metadata read its contracts from the store: a second database round trip per request, where
 * token metadata already came from the hot cache. Only AVAILABLE infos are kept: one still
 * resolving is asked for again, as the metadata service's own answers are.
 */
export class ContractInfoCache {
  private readonly cache: LruCache<string>;

  constructor(
    private readonly source: (chain: ChainClient, addresses: string[]) => Promise<Map<string, unknown>>,
    opts: { size: number; ttlMs: number },
  ) {
    this.cache = new LruCache(opts.size, opts.ttlMs);
  }

  /** Each contract's info as JSON text, by address. */
  async get(chain: ChainClient, addresses: string[]): Promise<Map<string, string>> {
    const now = Date.now();
    const out = new Map<string, string>();
    const missing: string[] = [];
    for (const a of addresses) {
      const hit = this.cache.get(`${chain.chainId}:${a}`, now);
      if (hit !== undefined) out.set(a, hit);
      else missing.push(a);
    }
    if (!missing.length) return out;
    for (const [a, info] of await this.source(chain, missing)) {
      const text = JSON.stringify(info);
      out.set(a, text);
      if ((info as { status?: string }).status === 'AVAILABLE') this.cache.set(`${chain.chainId}:${a}`, text, now);
    }
    return out;
  }
}
