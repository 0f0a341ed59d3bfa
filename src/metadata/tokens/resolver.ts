import type { Address } from 'viem';
import type { ChainClient } from '../../chain/client.ts';
import { ChainUnreachableError } from '../../chain/outage.ts';
import type { AppConfig } from '../../config/schema.ts';
import type { Logger } from '../../telemetry/logger.ts';
import type { Metrics } from '../../telemetry/metrics.ts';
import { detectStandards, readTokenUris, type TokenStandard } from './chain-reader.ts';
import type { Fetcher } from '../fetch/fetch.ts';
import { FetchShareFull, FetchShares, type FetchCaller } from './fetch-shares.ts';
import { KeyedFlight } from '../../util/single-flight.ts';
import { within } from '../../util/deadline.ts';
import { LruCache } from '../../util/lru.ts';
import { normalizeTokenDocument } from './normalize.ts';
import type { Resolution, TokenRecord, TokenStore } from './token-store.ts';
import { StoredTokenMetadata, toWire, type ResourceStatus, type TokenMetadataWire } from './token-view.ts';
import { ID_VARIANTS } from './id-template.ts';
import { parseTokenUri } from '../fetch/uri.ts';
import { groupSaver } from './group-saver.ts';

export interface TokenMetadataDeps {
  store: TokenStore;
  fetcher: Fetcher;
  config: AppConfig;
  log: Logger;
  metrics: Metrics;
  /**
   * Reads the standard of a contract this service has not classified yet. Contract info provides it
   * (one read that also makes the contract searchable); plain ERC165 detection otherwise.
   */
  detectStandard?: (chain: ChainClient, address: Address) => Promise<string>;
  /** The media pipeline, when enabled (the wiring adapts it): told about resolutions, asked for `assets`. */
  media?: TokenMediaHooks;
}

/** Media URLs of one resolved token, by TokenMetadata field. */
export type TokenMediaUrls = { tokenId: string; urls: { image: string | null; image_data: string | null; animation_url: string | null } };

export interface TokenMediaHooks {
  /**
   * `read`: a token resolved for an API answer with an access key (media fetched eagerly if so configured);
   * `keylessRead` and `refresh`: re-check cached media only (a keyless read never queues media).
   */
  onResolved(chainId: number, contract: string, tokens: TokenMediaUrls[], via: Via): void;
  /** The `assets` entries of these tokens, with their JSON (serialised once by the media side; '' when none). */
  assetsFor(chainId: number, contract: string, tokenIds: string[]): Promise<Map<string, { list: Array<{ url: string; metadataField: string }>; json: string }>>;
  /** Rewrite `image` to the cached URL (config media.rewriteImage). */
  rewriteImage: boolean;
}

export interface GetTokensResult {
  /** Each token serialised, in request order: what responses are assembled from. */
  json: string[];
  statuses: ResourceStatus[];
  /** Some tokens are still being resolved in the background. */
  pending: boolean;
  /** The same tokens as objects (parsed on demand). */
  readonly tokens: TokenMetadataWire[];
  /**
   * Until when (epoch ms) this very answer may be given again without asking: no later than the
   * hot cache would keep any of its records, nor than any of them turns stale. 0 when some token
   * is not AVAILABLE or still resolving, since the next request must look again.
   */
  reusableUntil: number;
  /** False once a token of the contract has been re-resolved in this process since the answer was read. */
  isCurrent(): boolean;
}

const ONE_DAY_MS = 86_400_000;

/** Why a token is resolved: for a keyed read, a keyless one, or a refresh. */
export type Via = 'read' | 'keylessRead' | 'refresh';

/** Per contract: its standard and, for ERC1155, the `{id}` spelling its origin answers to. */
interface ContractKindState {
  standard: TokenStandard;
  idVariant: number | null;
}

function schemeOf(uri: string): string {
  const m = /^([a-z][a-z0-9+.-]*):/i.exec(uri.trim());
  return m ? m[1].toLowerCase() : uri.trim().startsWith('{') ? 'json' : 'none';
}

/**
 * Token metadata: served from the store, resolved on chain and at the origin when unknown or stale.
 * One resolution per token at a time (single-flight); a hot in-process cache sits in front of the store.
 */
export class TokenMetadataService {
  private readonly flight = new KeyedFlight<TokenRecord>();
  /** A settled record's serialised view, built once per record while the hot cache holds it. */
  private readonly serialised = new WeakMap<TokenRecord, string>();
  private readonly hot: LruCache<TokenRecord>;
  /**
   * Per contract, a stamp replaced whenever one of its tokens is re-resolved here, so an answer
   * assembled earlier can tell it is outdated. Values come from one counter and are never reused:
   * a stamp dropped to bound the map reads as "changed", never as "unchanged".
   */
  private readonly stamps = new Map<string, number>();
  private stampSeq = 0;
  private readonly kinds = new Map<string, Promise<ContractKindState>>();
  /** The fetch slots, shared by caller and by host (docs/metadata.md, "Fair shares"). */
  readonly shares: FetchShares;

  constructor(private readonly d: TokenMetadataDeps) {
    this.hot = new LruCache(d.config.metadata.hotCacheSize, d.config.metadata.hotCacheTtlMs);
    this.shares = new FetchShares(d.config.metadata);
    d.metrics.metadataFetchSlots.watch(() => this.shares.gate.reading());
  }

  private key(chainId: number, contract: string, id: string) {
    return `${chainId}:${contract}:${id}`;
  }

  private stampOf(scope: string): number {
    let st = this.stamps.get(scope);
    if (st === undefined) {
      st = ++this.stampSeq;
      this.stamps.set(scope, st);
      this.trimStamps();
    }
    return st;
  }

  private restamp(scope: string): void {
    this.stamps.delete(scope);
    this.stamps.set(scope, ++this.stampSeq);
    this.trimStamps();
  }

  /** Built outside getTokens so that a cached answer's check holds on to nothing of the request. */
  private currentCheck(scope: string, stamp: number): () => boolean {
    return () => this.stamps.get(scope) === stamp;
  }

  private trimStamps(): void {
    const max = Math.max(1024, this.d.config.metadata.hotCacheSize);
    while (this.stamps.size > max) this.stamps.delete(this.stamps.keys().next().value!);
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
    const stamp = this.stampOf(scope);
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
    if (toResolve.length && this.stampOf(scope) !== stamp) {
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
    if (this.d.media) await this.attachAssets(this.d.media, chain.chainId, contract, ids, statuses, json);
    return {
      json,
      statuses,
      pending: pending.size > 0 || refreshing.size > 0,
      get tokens() {
        return json.map((j) => JSON.parse(j) as TokenMetadataWire);
      },
      reusableUntil: reusableUntil > now ? reusableUntil : 0,
      isCurrent: this.currentCheck(scope, stamp),
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

  /** Adds `assets` (and, if configured, the cached `image`) to the serialised tokens that have stored media. */
  private async attachAssets(media: TokenMediaHooks, chainId: number, contract: string, ids: string[], statuses: ResourceStatus[], json: string[]): Promise<void> {
    const withMetadata = ids.filter((_, i) => statuses[i] !== 'NOT_AVAILABLE');
    if (!withMetadata.length) return;
    let assets: Awaited<ReturnType<TokenMediaHooks['assetsFor']>>;
    try {
      assets = await media.assetsFor(chainId, contract, withMetadata);
    } catch (err) {
      // Media is an extra: an answer without it beats no answer.
      this.d.log.warn({ err, chainId, contract }, 'token assets unavailable');
      return;
    }
    ids.forEach((id, i) => {
      const entry = statuses[i] !== 'NOT_AVAILABLE' ? assets.get(id) : undefined;
      if (!entry?.json) return;
      const image = media.rewriteImage ? entry.list.find((a) => a.metadataField === 'image') : undefined;
      if (image) {
        const obj = JSON.parse(json[i]) as Record<string, unknown>;
        json[i] = JSON.stringify({ ...obj, image: image.url, assets: entry.list });
      } else {
        // The view ends with "}": splicing keeps the cached serialisation of the record.
        json[i] = `${json[i].slice(0, -1)},"assets":${entry.json}}`;
      }
    });
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
        const saved = await this.resolveBatch(
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

  private kindOf(chain: ChainClient, contract: Address): Promise<ContractKindState> {
    const k = `${chain.chainId}:${contract}`;
    let p = this.kinds.get(k);
    if (!p) {
      p = (async () => {
        const known = await this.d.store.contractKind(chain.chainId, contract);
        const fresh = known?.typeCheckedAt && Date.now() - known.typeCheckedAt.getTime() < ONE_DAY_MS;
        if (known && fresh && (known.type === 'ERC721' || known.type === 'ERC1155')) {
          return { standard: known.type, idVariant: known.idVariant };
        }
        const answer = this.d.detectStandard ? await this.d.detectStandard(chain, contract) : (await detectStandards(chain, [contract])).get(contract);
        // ERC20 and plain contracts have no token URIs: read them as UNKNOWN (tokenURI, then uri).
        const detected: TokenStandard = answer === 'ERC721' || answer === 'ERC1155' ? answer : 'UNKNOWN';
        await this.d.store.saveContractKind(chain.chainId, contract, detected);
        return { standard: detected, idVariant: known?.idVariant ?? null };
      })();
      // An UNKNOWN answer is not pinned: an address without code yet (asked before its deployment,
      // or read from a lagging node) is detected again by the next resolution instead of being
      // treated as UNKNOWN for the life of the process.
      const entry = p;
      entry.then(
        (kind) => {
          if (kind.standard === 'UNKNOWN' && this.kinds.get(k) === entry) this.kinds.delete(k);
        },
        () => {
          if (this.kinds.get(k) === entry) this.kinds.delete(k);
        },
      );
      this.kinds.set(k, p);
    }
    return p;
  }

  private async resolveBatch(
    chain: ChainClient,
    contract: Address,
    ids: string[],
    via: Via,
    onSaved: (id: string, rec: TokenRecord) => void = () => undefined,
    caller?: FetchCaller,
  ): Promise<Map<string, TokenRecord>> {
    const cfg = this.d.config;
    const kind = await this.kindOf(chain, contract);
    const standard = kind.standard;
    const { reads, blockNumber } = await readTokenUris(
      chain,
      contract,
      standard,
      ids.map((id) => BigInt(id)),
    );
    const now = Date.now();
    const saver = groupSaver(async (batch: Map<string, Resolution>) => {
      const saved = await this.d.store.save(chain.chainId, contract, batch, new Date(now + cfg.metadata.failureRetrySec * 1000));
      for (const [id, rec] of saved) {
        this.hot.set(this.key(chain.chainId, contract, id), rec);
        onSaved(id, rec);
      }
      this.restamp(`${chain.chainId}:${contract}`);
      if (this.d.media) this.d.media.onResolved(chain.chainId, contract, mediaUrlsOf(saved), via);
      return saved;
    });
    const results = { set: (id: string, r: Resolution) => saver.add(id, r) };
    const uriOpts = { ipfsGateways: cfg.ipfsGateways, arweaveGateway: cfg.arweaveGateway };

    // Work of no caller (refreshes, background reads) queues as its own kind, beside the callers.
    const queue = caller?.queue ?? via;
    await Promise.all(
      ids.map(async (id, i) => {
        const read = reads[i];
        const base = { standard, method: read.method, block: blockNumber?.toString() ?? null };
        if (!read.ok) {
          this.d.metrics.metadataFetches.inc({ scheme: 'none', outcome: read.reason });
          results.set(id, {
            ok: false,
            tokenUri: null,
            reason: read.reason,
            message: read.message,
            retryAfter: new Date(now + cfg.metadata.notFoundRetrySec * 1000),
            trace: { ...base, uri: null, error: read.reason, message: read.message, attempts: [] },
          });
          return;
        }
        const scheme = schemeOf(read.uri);
        const decoder = parseTokenUri(read.uri, uriOpts).kind;
        // Only the fetch holds a slot: the slot is the origin's share, not the bookkeeping around it.
        const f = await this.shares.gate.run({ queue, host: this.d.fetcher.shareOf(read.uri), keyless: caller?.keyless }, async () => {
          const t0 = performance.now();
          const r = await this.d.fetcher.fetchJson(
            read.uri,
            // uri(id) is the ERC-1155 method: its `{id}` is expanded even when ERC165 did not say ERC1155.
            standard === 'ERC1155' || read.method === 'uri' ? { tokenId: BigInt(id), preferredIdVariant: kind.idVariant } : {},
          );
          this.d.metrics.metadataFetchDuration.observe({ scheme }, (performance.now() - t0) / 1000);
          return r;
        });
        this.d.metrics.metadataFetches.inc({ scheme, outcome: f.ok ? 'ok' : f.reason });
        const trace = {
          ...base,
          uri: read.uri,
          decoder,
          ...(f.ok && f.idVariant !== undefined ? { idVariant: ID_VARIANTS[f.idVariant] } : {}),
          attempts: f.trace,
          ...(f.ok ? { finalUrl: f.finalUrl, contentType: f.contentType } : { error: f.reason, message: f.message }),
        };
        if (!f.ok) {
          const wait = Math.max(cfg.metadata.failureRetrySec * 1000, f.retryAfterMs ?? 0);
          results.set(id, { ok: false, tokenUri: read.uri, reason: f.reason, message: f.message, retryAfter: new Date(now + wait), trace, ...(f.withdrawn ? { withdrawn: true } : {}) });
          return;
        }
        if (f.idVariant !== undefined && f.idVariant !== (kind.idVariant ?? 0)) {
          // Remember the spelling this origin answers to, so the next token skips the 404s.
          kind.idVariant = f.idVariant;
          await this.d.store.saveIdVariant(chain.chainId, contract, f.idVariant);
        }
        const n = normalizeTokenDocument(f.document, uriOpts);
        results.set(id, { ok: true, tokenUri: read.uri, metadata: n.metadata, raw: n.raw, trace, source: 'FETCHER_ON_CHAIN_TOKEN_URI' });
      }),
    );

    return saver.drain();
  }
}

function mediaUrlsOf(records: Map<string, TokenRecord>): TokenMediaUrls[] {
  const out: TokenMediaUrls[] = [];
  for (const [tokenId, rec] of records) {
    const parsed = rec.metadata ? StoredTokenMetadata.safeParse(rec.metadata) : undefined;
    if (!parsed?.success) continue;
    const m = parsed.data;
    const svg = m.imageData ? `data:image/svg+xml;base64,${Buffer.from(m.imageData, 'utf8').toString('base64')}` : null;
    out.push({ tokenId, urls: { image: m.image ?? null, image_data: svg, animation_url: m.animationUrl ?? null } });
  }
  return out;
}
