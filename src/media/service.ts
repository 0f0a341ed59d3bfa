// The media service: what a token's or a contract's media is (the stored asset, or a fetch started
// now, one at a time per field), the background queue that fetches it after tokens resolve, the
// cached answers that put it in token and contract reads, and collecting blobs nothing references.
// Its stages have their own files: fetching and storing (ingest.ts), renditions (rendition-cache.ts),
// what a crash left behind (orphans.ts). Failures are recorded per asset with their reason; nothing
// here throws at a caller for bad media.

import type { Logger } from '../telemetry/logger.ts';
import { GATEWAY_SHARE } from '../metadata/index.ts';
import { FairGate } from '../util/fair-gate.ts';
import { LruCache } from '../util/lru.ts';
import { originalKey, type BlobStore } from './blob-store.ts';
import type { AssetKey, BlobInfo, ContractMediaField, MediaAsset, MediaStore } from './media-store.ts';
import { CONTRACT_TOKEN_ID, MEDIA_FIELDS } from './media-store.ts';
import type { MediaMetrics } from './metrics.ts';
import type { Rendition } from './renditions.ts';
import { toWire, type AssetWire } from './asset-wire.ts';
import { MediaIngest } from './ingest.ts';
import { RenditionCache } from './rendition-cache.ts';
import { sweepOrphans, type OrphanCounts } from './orphans.ts';
import type { BytesFetcher, ContractMediaSource, ContractMediaUrls, MediaOptions, RenditionResult, TokenAssets, TokenMedia } from './service-types.ts';

export type { AssetWire } from './asset-wire.ts';
export { isImage, type BytesFetcher, type ContractMediaSource, type ContractMediaUrls, type MediaOptions, type RenditionResult, type TokenAssets, type TokenMedia } from './service-types.ts';

export class MediaService {
  /** Fetch slots: a share per origin host, waiting fetches served round-robin across hosts. */
  private readonly fetchGate: FairGate;
  private readonly inflight = new Map<string, Promise<MediaAsset>>();
  private readonly wireCache = new LruCache<TokenAssets>(50_000, 5_000);
  /** Blob rows never change; a short TTL bounds how long a collected one is still believed. */
  private readonly blobInfo = new LruCache<BlobInfo>(10_000, 60_000);
  private readonly ingest: MediaIngest;
  private readonly renditions: RenditionCache;
  private queued = 0;
  private base: string;
  private readonly background = new Set<Promise<unknown>>();
  /** Contract media URLs by contract, with the sources they were looked up for (a changed logoURI misses). */
  private readonly contractCache = new LruCache<{ sig: string; urls: ContractMediaUrls }>(50_000, 5_000);

  constructor(private readonly d: { store: MediaStore; blobs: BlobStore; fetcher: BytesFetcher; options: MediaOptions; log: Logger; metrics?: MediaMetrics }) {
    const gateways = this.d.options.gatewayConcurrency;
    this.fetchGate = new FairGate({
      limit: d.options.concurrency,
      perHost: d.options.perHostConcurrency,
      perHostMax: d.options.concurrency,
      fastMs: d.options.fastHostMs ?? 2_000,
      hostLimit: (host) => (host === GATEWAY_SHARE ? gateways : undefined),
    });
    d.metrics?.fetchSlots.watch(() => {
      const { running, waiting, hostsAtLimit } = this.fetchGate.reading();
      return { running, waiting, hostsAtLimit };
    });
    this.renditions = new RenditionCache({ blobs: d.blobs, limits: d.options, concurrency: d.options.concurrency, metrics: d.metrics });
    this.base = (d.options.publicUrl ?? 'http://127.0.0.1').replace(/\/+$/, '');
    this.ingest = new MediaIngest({ ...d, settled: (k, released) => this.settled(k, released) });
  }

  get blobs(): BlobStore {
    return this.d.blobs;
  }

  /** Where the service listens, unless `media.publicUrl` says where clients reach it. */
  setListeningUrl(url: string): void {
    if (!this.d.options.publicUrl) this.base = url.replace(/\/+$/, '');
  }

  get publicUrl(): string {
    return this.base;
  }

  asset(k: AssetKey): Promise<MediaAsset | undefined> {
    return this.d.store.asset(k);
  }

  async blob(sha256: string): Promise<BlobInfo | undefined> {
    const hit = this.blobInfo.get(sha256);
    if (hit) return hit;
    const b = await this.d.store.blob(sha256);
    if (b) this.blobInfo.set(sha256, b);
    return b;
  }

  /**
   * The field's asset for this source URL: the stored one when it is current (or failed and not
   * yet due again), otherwise fetched now. `force` re-fetches a current one (refresh: the bytes
   * behind an unchanged URL may have changed). `beforeFetch` is called when this call starts a fetch
   * (not when the asset is stored, nor when it joins a fetch under way): it charges the caller's share,
   * and may throw to refuse, before anything is fetched.
   */
  async ensure(k: AssetKey, sourceUrl: string, opts: { force?: boolean; beforeFetch?: () => void } = {}): Promise<MediaAsset> {
    const id = `${k.chainId}:${k.contract}:${k.tokenId}:${k.field}`;
    const joined = this.inflight.get(id);
    if (joined) return joined;
    const cur = await this.d.store.asset(k);
    if (cur && cur.sourceUrl === sourceUrl && !opts.force) {
      if (cur.status === 'READY') return cur;
      if (cur.retryAfter && cur.retryAfter.getTime() > Date.now()) return cur;
    }
    // Another call may have started the fetch while the stored asset was read.
    const started = this.inflight.get(id);
    if (started) return started;
    opts.beforeFetch?.();
    const host = this.d.fetcher.shareOf(sourceUrl);
    // Queued by host: each host's fetches wait in their own line, and the lines take turns.
    const p = this.fetchGate.run({ queue: host, host }, () => this.ingest.run(k, sourceUrl)).finally(() => this.inflight.delete(id));
    this.inflight.set(id, p);
    return p;
  }

  /** After a save: the blob the field let go of collected, the cached answers forgotten, the asset read back. */
  private async settled(k: AssetKey, released: string | null): Promise<MediaAsset> {
    await this.release(released);
    this.forgetCached(k);
    return (await this.d.store.asset(k))!;
  }

  /** Queues the fields whose bytes the blob store refused, once due (up to `limit`); how many were queued. */
  async retryStoreFailures(limit = 100): Promise<number> {
    let n = 0;
    for (const a of await this.d.store.dueStoreFailures(limit)) if (this.enqueue(a.key, a.sourceUrl)) n++;
    return n;
  }

  private forgetCached(k: AssetKey) {
    if (k.tokenId === CONTRACT_TOKEN_ID) this.contractCache.delete(`${k.chainId}:${k.contract}`);
    else this.wireCache.delete(`${k.chainId}:${k.contract}:${k.tokenId}`);
  }

  /** A contract's logo or og:image asset for this source: stored, or fetched now (the /contract/ media route). */
  ensureContract(chainId: number, contract: string, field: ContractMediaField, sourceUrl: string, opts: { beforeFetch?: () => void } = {}): Promise<MediaAsset> {
    return this.ensure({ chainId, contract, tokenId: CONTRACT_TOKEN_ID, field }, sourceUrl, opts);
  }

  /**
   * The cached URLs of these contracts' logos and og:images, for the contract answers' metarelay
   * extra. What is not stored yet for its current source is queued when `eager` (a keyed read, with
   * media.eager), and a field a contract no longer has loses its asset. Briefly cached per process: this
   * is on every contract read.
   */
  async contractMedia(chainId: number, items: ContractMediaSource[], eager = false): Promise<Map<string, ContractMediaUrls>> {
    const out = new Map<string, ContractMediaUrls>();
    const now = Date.now();
    const missing: ContractMediaSource[] = [];
    for (const it of items) {
      const hit = this.contractCache.get(`${chainId}:${it.address}`, now);
      if (hit && hit.sig === `${it.logo ?? ''}\n${it.ogImage ?? ''}`) out.set(it.address, hit.urls);
      else if (it.logo || it.ogImage || hit) missing.push(it);
    }
    if (!missing.length) return out;
    const rows = await this.d.store.contractAssets(
      chainId,
      missing.map((x) => x.address),
    );
    const have = new Map(rows.map((a) => [`${a.key.contract}:${a.key.field}`, a]));
    for (const it of missing) {
      const urls: ContractMediaUrls = {};
      // A keyless lookup that left a source unqueued is not remembered: the next keyed read must queue it.
      let unqueued = false;
      for (const [field, src, name] of [
        ['logo', it.logo, 'logo'],
        ['og_image', it.ogImage, 'ogImage'],
      ] as const) {
        const k: AssetKey = { chainId, contract: it.address, tokenId: CONTRACT_TOKEN_ID, field };
        const cur = have.get(`${it.address}:${field}`);
        if (!src) {
          if (cur) this.track(this.d.store.remove(k).then((sha) => this.release(sha)));
          continue;
        }
        if (cur?.sourceUrl === src && cur.status === 'READY' && cur.blob) urls[name] = this.blobUrl(cur.blob);
        else if (this.d.options.eager && (cur?.sourceUrl !== src || (cur.retryAfter && cur.retryAfter.getTime() <= now))) {
          if (eager) this.enqueue(k, src);
          else unqueued = true;
        }
      }
      out.set(it.address, urls);
      if (!unqueued) this.contractCache.set(`${chainId}:${it.address}`, { sig: `${it.logo ?? ''}\n${it.ogImage ?? ''}`, urls }, now);
    }
    return out;
  }

  /** Forgets a chain's assets (what `metarelay dev` does for its previous anvil) and collects their blobs. */
  async forgetChain(chainId: number): Promise<void> {
    for (const sha of await this.d.store.forgetChain(chainId)) await this.release(sha);
  }

  /** Garbage-collects a blob nothing references any more (originals and renditions). */
  async release(sha256: string | null): Promise<boolean> {
    if (!sha256) return false;
    try {
      const gone = await this.d.store.collect(sha256, () => this.d.blobs.delete(originalKey(sha256)));
      this.blobInfo.delete(sha256);
      this.renditions.forget(sha256);
      if (gone) this.d.log.debug({ sha256 }, 'media blob collected');
      return gone;
    } catch (err) {
      this.d.log.warn({ err, sha256 }, 'media blob collection failed');
      return false;
    }
  }

  /** What a crash can leave behind, collected (orphans.ts; media/orphan-sweep.ts runs it periodically). */
  sweepOrphans(graceSec: number, batch = 1_000): Promise<OrphanCounts> {
    const d = this.d;
    return sweepOrphans({ store: d.store, blobs: d.blobs, log: d.log, release: (sha) => this.release(sha), forgetRenditions: (sha) => this.renditions.forget(sha) }, graceSec, batch);
  }

  /**
   * After tokens resolve. `eager`: every media field is fetched (queued). `recheck` (refresh and
   * bulk enumeration): only fields already cached are looked at again, so a changed URL or changed
   * bytes make new renditions without a whole collection's media being pulled in.
   */
  onTokensResolved(chainId: number, contract: string, tokens: TokenMedia[], mode: 'eager' | 'recheck'): void {
    // Tracked from the start, so idle() also waits for the lookup that decides what to queue.
    if (tokens.length) this.track(this.schedule(chainId, contract, tokens, mode));
  }

  private async schedule(chainId: number, contract: string, tokens: TokenMedia[], mode: 'eager' | 'recheck'): Promise<void> {
    const existing = await this.d.store.assetsOf(
      chainId,
      contract,
      tokens.map((t) => t.tokenId),
    );
    const have = new Map(existing.map((a) => [`${a.key.tokenId}:${a.key.field}`, a]));
    for (const t of tokens) {
      for (const field of MEDIA_FIELDS) {
        const url = t.urls[field] ?? null;
        const k: AssetKey = { chainId, contract, tokenId: t.tokenId, field };
        const cur = have.get(`${t.tokenId}:${field}`);
        if (!url) {
          if (cur)
            this.track(
              this.d.store
                .remove(k)
                .then((sha) => this.release(sha))
                .then(() => this.wireCache.delete(`${chainId}:${contract}:${t.tokenId}`)),
            );
          continue;
        }
        if (mode === 'recheck' && !cur) continue;
        if (mode === 'eager' && cur && cur.sourceUrl === url) continue;
        this.enqueue(k, url, mode === 'recheck');
      }
    }
  }

  /** Background fetch through the bounded queue; past `maxQueued` it is dropped (fetched lazily later). */
  enqueue(k: AssetKey, url: string, force = false): boolean {
    if (this.queued >= this.d.options.maxQueued) {
      this.d.metrics?.dropped.inc();
      return false;
    }
    this.queued++;
    this.d.metrics?.queueDepth.set(this.queued);
    this.track(this.ensure(k, url, { force }).finally(() => this.d.metrics?.queueDepth.set(--this.queued)));
    return true;
  }

  private track(p: Promise<unknown>): void {
    const q = p.catch((err) => this.d.log.warn({ err }, 'background media work failed'));
    this.background.add(q);
    void q.finally(() => this.background.delete(q));
  }

  /** Waits for queued background work (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.background.size) await Promise.all([...this.background]);
  }

  /** A rendition's bytes: from the blob store, or rendered now (once, however many ask) and stored. */
  rendition(blob: BlobInfo, r: Rendition): Promise<RenditionResult> {
    return this.renditions.rendition(blob, r);
  }

  /**
   * A rendition already in memory, by its canonical name, without a database or blob-store read:
   * content-addressed URLs never change what they name, so a hit needs nothing else checked.
   */
  hotRendition(sha256: string, name: string): Buffer | undefined {
    return this.renditions.hotRendition(sha256, name);
  }

  /** Counts a content-addressed answer the HTTP layer sent without asking for bytes here (an original streamed, a 304). */
  noteServed(source: 'original' | 'not_modified'): void {
    this.d.metrics?.served.inc({ source });
  }

  /** The URL an asset entry points at: the original, except SVG which is only ever served rasterised. */
  blobUrl(blob: BlobInfo): string {
    return `${this.base}/media/b/${blob.sha256}/${blob.mimeType === 'image/svg+xml' ? '1024.webp' : 'original'}`;
  }

  /**
   * READY assets of these tokens in the Sequence shape, by token id, with their serialisation
   * (token answers splice it in as is). Briefly cached per process: this is on every token read.
   */
  async assetsFor(chainId: number, contract: string, tokenIds: string[]): Promise<Map<string, TokenAssets>> {
    const out = new Map<string, TokenAssets>();
    const now = Date.now();
    const missing: string[] = [];
    for (const id of new Set(tokenIds)) {
      const hit = this.wireCache.get(`${chainId}:${contract}:${id}`, now);
      if (hit) out.set(id, hit);
      else missing.push(id);
    }
    if (missing.length) {
      const rows = await this.d.store.assetsOf(chainId, contract, missing);
      const lists = new Map<string, AssetWire[]>(missing.map((id) => [id, []]));
      for (const a of rows) if (a.status === 'READY' && a.blob) lists.get(a.key.tokenId)!.push(toWire(this.blobUrl.bind(this), a, a.blob));
      for (const [id, list] of lists) {
        const entry: TokenAssets = { list, json: list.length ? JSON.stringify(list) : '' };
        out.set(id, entry);
        this.wireCache.set(`${chainId}:${contract}:${id}`, entry, now);
      }
    }
    return out;
  }

  async close(): Promise<void> {
    await this.idle();
    this.d.blobs.close();
  }
}
