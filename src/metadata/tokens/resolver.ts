// The token metadata service: a read's tokens served from the hot cache and the store, the unseen and
// the stale ones resolved (one resolution per token at a time, the unseen waited for up to a bound),
// and the answer assembled with its statuses and how long it may be given again. Its stages have
// their own files: what kind a contract is (contract-kind.ts), resolving a batch on chain and at the
// origin (resolve-batch.ts), the media of the answer (attach-assets.ts), whether it is still current
// (answer-stamps.ts).

import type { Address } from 'viem';
import type { ChainClient } from '../../chain/client.ts';
import { ChainUnreachableError } from '../../chain/outage.ts';
import { FetchShareFull, FetchShares, type FetchCaller } from './fetch-shares.ts';
import { KeyedFlight } from '../../util/single-flight.ts';
import { within } from '../../util/deadline.ts';
import { LruCache } from '../../util/lru.ts';
import type { TokenRecord } from './token-store.ts';
import { toWire, type ResourceStatus, type TokenMetadataWire } from './token-view.ts';
import { ContractStamps } from './answer-stamps.ts';
import { attachAssets } from './attach-assets.ts';
import { ContractKinds } from './contract-kind.ts';
import { TokenBatchResolver } from './resolve-batch.ts';
import type { GetTokensResult, TokenMetadataDeps, Via } from './resolver-types.ts';

export type { GetTokensResult, TokenMediaHooks, TokenMediaUrls, TokenMetadataDeps, Via } from './resolver-types.ts';

/**
 * Token metadata: served from the store, resolved on chain and at the origin when unknown or stale.
 * One resolution per token at a time (single-flight); a hot in-process cache sits in front of the store.
 */
export class TokenMetadataService {
  private readonly flight = new KeyedFlight<TokenRecord>();
  /** A settled record's serialised view, built once per record while the hot cache holds it. */
  private readonly serialised = new WeakMap<TokenRecord, string>();
  private readonly hot: LruCache<TokenRecord>;
  /** Per contract, a stamp replaced whenever one of its tokens is re-resolved here (answer-stamps.ts). */
  private readonly stamps: ContractStamps;
  private readonly batches: TokenBatchResolver;
  /** The fetch slots, shared by caller and by host (docs/metadata.md, "Fair shares"). */
  readonly shares: FetchShares;

  constructor(private readonly d: TokenMetadataDeps) {
    this.hot = new LruCache(d.config.metadata.hotCacheSize, d.config.metadata.hotCacheTtlMs);
    this.shares = new FetchShares(d.config.metadata, d.fleet);
    d.metrics.metadataFetchSlots.watch(() => this.shares.gate.reading());
    this.stamps = new ContractStamps(Math.max(1024, d.config.metadata.hotCacheSize));
    this.batches = new TokenBatchResolver(d, this.shares, new ContractKinds(d), this.hot, this.stamps);
  }

  /**
   * Tokens in request order (duplicates included), waiting at most `waitMs` for unknown ones. With a
   * `caller`, the unseen tokens are admitted to its share first (FetchShareFull when it is full).
   */
  async getTokens(chain: ChainClient, contract: Address, ids: string[], opts: { waitMs?: number; caller?: FetchCaller } = {}): Promise<GetTokensResult> {
    const cfg = this.d.config.metadata;
    const now = Date.now();
    // Taken before any record is read: a re-resolution that lands while this call runs makes the answer not current.
    const scope = `${chain.chainId}:${contract}`;
    const stamp = this.stamps.of(scope);
    const prefix = `${scope}:`;
    const hotTtl = cfg.hotCacheSize > 0 ? cfg.hotCacheTtlMs : 0;
    let reusableUntil = hotTtl > 0 ? now + hotTtl : 0;
    const unique = [...new Set(ids)];
    const records = new Map<string, TokenRecord>();
    const fromStore: string[] = [];
    // Counted here and added to the metrics once per request: a labelled inc per token costs more than the lookup.
    const counts = { hot: 0, store: 0, stale: 0, miss: 0 };
    for (const id of unique) {
      const h = this.hot.getEntry(prefix + id, now);
      if (h) {
        records.set(id, h.v);
        if (h.until < reusableUntil) reusableUntil = h.until;
        counts.hot++;
      } else fromStore.push(id);
    }
    const loadedFromStore = new Set(fromStore);
    if (fromStore.length) {
      for (const [id, rec] of await this.d.store.get(chain.chainId, contract, fromStore)) {
        records.set(id, rec);
        this.hot.set(prefix + id, rec, now);
      }
    }

    let toResolve: string[] = [];
    const refreshing = new Set<string>();
    // A stored outcome is tried again once its retryAfter has passed.
    const dueOf = (r: TokenRecord | undefined) => !r?.retryAfter || r.retryAfter.getTime() <= now;
    for (const id of unique) {
      const r = records.get(id);
      const due = dueOf(r);
      if (!r) {
        toResolve.push(id);
        counts.miss++;
      } else if (r.metadata) {
        if (loadedFromStore.has(id)) counts.store++;
        const staleAt = r.lastFetched ? r.lastFetched.getTime() + cfg.staleAfterSec * 1000 : 0;
        if (now > staleAt && due) {
          refreshing.add(id);
          counts.stale++;
        }
        // Given again after it turns stale, the answer would skip the re-read that staleness starts.
        if (staleAt < reusableUntil) reusableUntil = staleAt;
      } else if (due) {
        toResolve.push(id);
      }
    }
    for (const [result, n] of Object.entries(counts)) if (n) this.d.metrics.metadataCache.inc({ result }, n);
    if (refreshing.size) this.refreshStale(chain, contract, [...refreshing], opts.caller);

    // A resolution of this contract that ended while the store was read (its flight over, so no
    // longer joinable) restamped it: the tokens it saved are read again instead of fetched twice.
    if (toResolve.length && this.stamps.of(scope) !== stamp) {
      const again = await this.d.store.get(chain.chainId, contract, toResolve);
      toResolve = toResolve.filter((id) => {
        const r = again.get(id);
        if (!r || (!r.metadata && dueOf(r))) return true;
        records.set(id, r);
        return false;
      });
    }

    if (opts.caller) this.admitFetches(opts.caller, toResolve.length);
    const pending = new Set<string>();
    if (toResolve.length) {
      // Each token counts as soon as it is saved: one slow origin leaves only its own token pending.
      const settled = new Map<string, TokenRecord | undefined>();
      let failure: unknown;
      const all = Promise.all(
        [...this.resolveEach(chain, contract, toResolve, opts.caller?.keyless ? 'keylessRead' : 'read', opts.caller)].map(([id, p]) =>
          p.then(
            (rec) => void settled.set(id, rec),
            (err) => void (failure ??= err),
          ),
        ),
      );
      await within(all, opts.waitMs ?? cfg.inlineWaitMs);
      // A token never read, while the node is down: a 503 naming the chain tells the caller more than
      // NOT_AVAILABLE (and the outage is logged once by the chain's health, not here per request).
      if (!chain.health.ok && toResolve.some((id) => !settled.has(id) && !records.get(id)?.metadata)) throw new ChainUnreachableError(chain.chainId);
      if (failure && chain.health.ok) this.d.log.warn({ err: failure, chain: chain.name, contract }, 'token resolution failed');
      for (const id of toResolve) {
        if (!settled.has(id)) pending.add(id);
        else {
          const rec = settled.get(id);
          if (rec) records.set(id, rec);
        }
      }
    }

    const queuedAt = new Date(now);
    const json: string[] = [];
    const statuses: ResourceStatus[] = [];
    for (const id of ids) {
      const rec = records.get(id);
      if (rec && !pending.has(id) && !refreshing.has(id)) {
        let text = this.serialised.get(rec);
        if (text === undefined) {
          text = JSON.stringify(toWire(chain.chainId, contract, id, rec, 'AVAILABLE', null));
          this.serialised.set(rec, text);
        }
        json.push(text);
        if (rec.metadata) statuses.push('AVAILABLE');
        else {
          statuses.push('NOT_AVAILABLE');
          reusableUntil = 0;
        }
      } else {
        reusableUntil = 0;
        const status: ResourceStatus = rec?.metadata ? 'REFRESHING' : 'NOT_AVAILABLE';
        json.push(JSON.stringify(toWire(chain.chainId, contract, id, rec, status, queuedAt)));
        statuses.push(status);
      }
    }
    if (this.d.media) await attachAssets(this.d.media, this.d.log, chain.chainId, contract, ids, statuses, json);
    return {
      json,
      statuses,
      pending: pending.size > 0 || refreshing.size > 0,
      get tokens() {
        return json.map((j) => JSON.parse(j) as TokenMetadataWire);
      },
      reusableUntil: reusableUntil > now ? reusableUntil : 0,
      isCurrent: this.stamps.currentCheck(scope, stamp),
    };
  }

  /**
   * Admits `n` fetches for `caller` in its share (the media route charges the media it fetches for a
   * caller here too), or throws FetchShareFull, counted, with nothing charged.
   */
  admitFetches(caller: FetchCaller, n: number): void {
    try {
      this.shares.admit(caller, n);
    } catch (err) {
      if (err instanceof FetchShareFull) this.d.metrics.metadataFetchRefused.inc({ share: err.share });
      throw err;
    }
  }

  /** Re-reads tokens now, whatever their cache state; the refresh path. */
  async refresh(chain: ChainClient, contract: Address, ids: string[]): Promise<Map<string, TokenRecord>> {
    return this.resolve(chain, contract, ids, 'refresh');
  }

  /**
   * The stored record with its resolution trace, resolving first if the token was never seen. A
   * resolution that throws (chain or database trouble) is explained as such, not turned into a 500:
   * the record returned then is not stored.
   */
  async explain(chain: ChainClient, contract: Address, id: string): Promise<TokenRecord | undefined> {
    const existing = (await this.d.store.get(chain.chainId, contract, [id])).get(id);
    if (existing) return existing;
    try {
      return (await this.resolve(chain, contract, [id], 'read')).get(id);
    } catch (err) {
      this.d.log.warn({ err, chain: chain.name, contract, id }, 'token resolution failed while explaining');
      const now = new Date();
      const message = (err as Error)?.message?.split('\n')[0] ?? String(err);
      return {
        chainId: chain.chainId,
        contract,
        tokenId: id,
        source: 'FETCHER_ON_CHAIN_TOKEN_URI',
        tokenUri: null,
        metadata: null,
        raw: null,
        failureReason: 'RESOLUTION_FAILED',
        failureMessage: message,
        retryAfter: null,
        trace: null,
        fetchCount: 0,
        lastFetched: null,
        lastAttempt: now,
        updatedAt: now,
      };
    }
  }

  /**
   * Stale tokens re-read in the background, in the caller's share like unseen ones (a keyless caller
   * pays for each): when its share cannot take them, they are served stale and left for a read that can.
   */
  private refreshStale(chain: ChainClient, contract: Address, ids: string[], caller: FetchCaller | undefined): void {
    if (caller) {
      try {
        this.admitFetches(caller, ids.length);
      } catch (err) {
        if (err instanceof FetchShareFull) return;
        throw err;
      }
    }
    void this.resolve(chain, contract, ids, caller?.keyless ? 'keylessRead' : 'read', caller).catch(() => undefined);
  }

  private async resolve(chain: ChainClient, contract: Address, ids: string[], via: Via = 'read', caller?: FetchCaller): Promise<Map<string, TokenRecord>> {
    const pairs = await Promise.all([...this.resolveEach(chain, contract, ids, via, caller)].map(async ([id, p]) => [id, await p] as const));
    return new Map(pairs.filter((x): x is readonly [string, TokenRecord] => x[1] !== undefined));
  }

  /** One promise per id, each settled when that token is saved (tokens in flight elsewhere are joined). */
  private resolveEach(chain: ChainClient, contract: Address, ids: string[], via: Via = 'read', caller?: FetchCaller): Map<string, Promise<TokenRecord | undefined>> {
    const scope = `${chain.chainId}:${contract}|`;
    const cut = scope.length;
    const perKey = this.flight.runEach(
      ids.map((id) => scope + id),
      async (keys, settle) => {
        const saved = await this.batches.run(
          chain,
          contract,
          keys.map((k) => k.slice(cut)),
          via,
          (id, rec) => settle(scope + id, rec),
          caller,
        );
        return new Map([...saved].map(([id, rec]) => [scope + id, rec]));
      },
    );
    return new Map([...perKey].map(([k, p]) => [k.slice(cut), p]));
  }
}
