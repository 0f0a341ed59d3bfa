// The media pipeline: fetch a token field's file through the SSRF-safe fetcher, establish what it
// is from its bytes, store it once by SHA-256, and derive renditions on first request. Failures
// are recorded per asset with their reason; nothing here throws at a caller for bad media.

import { createHash } from 'node:crypto';
import type { Logger } from '../telemetry/logger.ts';
import { GATEWAY_SHARE } from '../metadata/index.ts';
import { FairGate } from '../util/fair-gate.ts';
import { Limiter } from '../util/limiter.ts';
import { LruCache } from '../util/lru.ts';
import { originalKey, renditionKey, type BlobStore } from './blob-store.ts';
import type { AssetKey, BlobInfo, ContractMediaField, MediaAsset, MediaField, MediaStore } from './media-store.ts';
import { CONTRACT_TOKEN_ID, MEDIA_FIELDS } from './media-store.ts';
import type { MediaMetrics } from './metrics.ts';
import { probeMedia, type ProbeLimits } from './probe.ts';
import { FORMAT_TYPES, render, renditionName, type Rendition } from './renditions.ts';
import { toWire, type AssetWire } from './asset-wire.ts';
import { ByteCache } from './byte-cache.ts';
import { FailureStreak } from '../util/failure-streak.ts';
import { causeOf } from '../util/cause.ts';

/** A blob store write (or the size check before it) failed: the store's fault, not the media's. */
class BlobWriteFailed extends Error {
  constructor(readonly cause: unknown) {
    super(causeOf(cause));
  }
}

export type { AssetWire } from './asset-wire.ts';

/** The part of the metadata fetcher media needs (the wiring passes the real one). */
export type BytesFetcher = {
  /** Where fetching this URI sends requests: a host, the gateways' share, or '' (no request). */
  shareOf(uri: string): string;
  fetchBytes(
    uri: string,
    opts: { maxBytes: number; totalTimeoutMs?: number; stallTimeoutMs?: number },
  ): Promise<{ ok: true; bytes: Buffer; finalUrl: string } | { ok: false; reason: string; message: string; retryAfterMs?: number }>;
};

export type MediaOptions = ProbeLimits & {
  maxBytes: number;
  fetchTimeoutMs: number;
  concurrency: number;
  /** Fetches one origin host runs at once (waiting ones are served round-robin across hosts). */
  perHostConcurrency: number;
  /** A host earns a slot (up to `concurrency`) per file fetched within this, and halves them per slower one. */
  fastHostMs?: number;
  /** Fetches the IPFS and Arweave gateways run at once, together. */
  gatewayConcurrency: number;
  /** A body that sends nothing for this long mid-transfer is given up. */
  stallTimeoutMs: number;
  maxQueued: number;
  failureRetrySec: number;
  /** A field whose bytes the blob store refused is fetched again after this long (retryStoreFailures). */
  storeRetrySec: number;
  eager: boolean;
  publicUrl?: string;
};

export type RenditionResult = { ok: true; bytes: Buffer; contentType: string } | { ok: false; reason: string; message: string };

/** A token's assets and their JSON (empty string when there are none). */
export type TokenAssets = { list: AssetWire[]; json: string };

export type TokenMedia = { tokenId: string; urls: Partial<Record<MediaField, string | null>> };

/** A contract's media sources as its ContractInfo names them (logoURI, extensions.ogImage). */
export type ContractMediaSource = { address: string; logo: string | null; ogImage: string | null };
/** The cached URLs of a contract's media, where stored. */
export type ContractMediaUrls = { logo?: string; ogImage?: string };

export function isImage(mime: string): boolean {
  return mime.startsWith('image/');
}

export class MediaService {
  /** Fetch slots: a share per origin host, waiting fetches served round-robin across hosts. */
  private readonly fetchGate: FairGate;
  private readonly renderLimiter: Limiter;
  private readonly inflight = new Map<string, Promise<MediaAsset>>();
  private readonly rendering = new Map<string, Promise<Buffer>>();
  private readonly wireCache = new LruCache<TokenAssets>(50_000, 5_000);
  /** Blob rows never change; a short TTL bounds how long a collected one is still believed. */
  private readonly blobInfo = new LruCache<BlobInfo>(10_000, 60_000);
  /** Recently served renditions, bounded by bytes: the hot thumbnails skip the blob store. */
  private readonly hot = new ByteCache(64 * 1024 * 1024, 16 * 1024 * 1024);
  private queued = 0;
  private base: string;
  private readonly background = new Set<Promise<unknown>>();
  /** Contract media URLs by contract, with the sources they were looked up for (a changed logoURI misses). */
  private readonly contractCache = new LruCache<{ sig: string; urls: ContractMediaUrls }>(50_000, 5_000);
  /** The blob store's refused writes, logged once when they begin (with the cause) and once when writes work again. */
  private readonly storeWrites: FailureStreak;

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
    // Decoding is CPU- and memory-bound: a render at a time per core is what keeps RSS flat.
    this.renderLimiter = new Limiter(d.options.concurrency);
    this.base = (d.options.publicUrl ?? 'http://127.0.0.1').replace(/\/+$/, '');
    this.storeWrites = new FailureStreak(d.log, 'media blob store writes');
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
    const p = this.fetchGate.run({ queue: host, host }, () => this.ingest(k, sourceUrl)).finally(() => this.inflight.delete(id));
    this.inflight.set(id, p);
    return p;
  }

  private async ingest(k: AssetKey, sourceUrl: string): Promise<MediaAsset> {
    const o = this.d.options;
    const retryAfter = (ms = 0) => new Date(Date.now() + Math.max(o.failureRetrySec * 1000, ms));
    const fail = async (reason: string, message: string, ms?: number) => {
      const released = await this.d.store.saveFailed(k, sourceUrl, reason, message, retryAfter(ms));
      this.d.log.info({ chainId: k.chainId, contract: k.contract, tokenId: k.tokenId, field: k.field, reason }, 'media failed');
      await this.release(released);
      this.forgetCached(k);
      return (await this.d.store.asset(k))!;
    };
    const fetched = await this.d.fetcher.fetchBytes(sourceUrl, { maxBytes: o.maxBytes, totalTimeoutMs: o.fetchTimeoutMs, stallTimeoutMs: o.stallTimeoutMs });
    if (!fetched.ok) {
      this.d.metrics?.fetches.inc({ outcome: fetched.reason });
      return fail(fetched.reason, fetched.message, fetched.retryAfterMs);
    }
    const probed = await probeMedia(fetched.bytes, o);
    this.d.metrics?.fetches.inc({ outcome: probed.ok ? 'ok' : probed.reason });
    if (!probed.ok) return fail(probed.reason, probed.message);
    const sha256 = createHash('sha256').update(probed.bytes).digest('hex');
    const info: BlobInfo = { sha256, mimeType: probed.mimeType, filesize: probed.bytes.length, width: probed.width, height: probed.height, frames: probed.frames };
    const put = async () => {
      try {
        if ((await this.d.blobs.size(originalKey(sha256))) !== probed.bytes.length) {
          await this.d.blobs.put(originalKey(sha256), probed.bytes, probed.mimeType);
          this.d.metrics?.bytesStored.inc({ kind: 'original' }, probed.bytes.length);
        }
      } catch (err) {
        throw new BlobWriteFailed(err);
      }
    };
    // Bytes first, outside any transaction (the upload may be slow); then, under the blob row's lock,
    // checked again: a collection that ran in between took them, and they are put back.
    let released: string | null;
    try {
      await put();
      released = await this.d.store.saveReady(k, sourceUrl, info, put);
      this.storeWrites.succeeded();
    } catch (err) {
      if (!(err instanceof BlobWriteFailed)) throw err;
      return this.storeFailed(k, sourceUrl, err);
    }
    await this.release(released);
    this.forgetCached(k);
    return (await this.d.store.asset(k))!;
  }

  /**
   * The blob store refused the bytes (a full disk, a folder not writable, S3 answering errors): the
   * field is recorded FAILED with STORE_FAILED, due again after storeRetrySec, and retryStoreFailures
   * (run by the background process: store-retry.ts) fetches it again then, so the token gets its media
   * once the store takes writes again. A field that already has media keeps it (a refresh whose new
   * bytes could not be written); the next refresh tries again.
   */
  private async storeFailed(k: AssetKey, sourceUrl: string, err: BlobWriteFailed): Promise<MediaAsset> {
    this.d.metrics?.storeFailures.inc();
    this.storeWrites.failed(err.cause);
    const cur = await this.d.store.asset(k);
    if (cur?.status === 'READY') return cur;
    const message = `the blob store refused the write: ${causeOf(err.cause)}`;
    const released = await this.d.store.saveFailed(k, sourceUrl, 'STORE_FAILED', message, new Date(Date.now() + this.d.options.storeRetrySec * 1000));
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
      this.hot.dropPrefix(`r/${sha256}/`);
      if (gone) this.d.log.debug({ sha256 }, 'media blob collected');
      return gone;
    } catch (err) {
      this.d.log.warn({ err, sha256 }, 'media blob collection failed');
      return false;
    }
  }

  /**
   * What a crash can leave behind, collected (media/orphan-sweep.ts runs it periodically):
   * - blob rows no asset references (an asset let go of them, and the process stopped before `release`);
   * - originals in the blob store with no blob row (bytes put by an ingest whose transaction never
   *   committed), older than `graceSec` so an ingest in progress is never raced;
   * - renditions of a hash with no blob row (rendered while the blob was being collected), as old.
   * Safe to run in several processes at once: every deletion happens under the blob row's lock.
   */
  async sweepOrphans(graceSec: number, batch = 1_000): Promise<{ rows: number; originals: number; renditions: number }> {
    const out = { rows: 0, originals: 0, renditions: 0 };
    for (const sha of await this.d.store.unreferencedBlobs(batch)) if (await this.release(sha)) out.rows++;
    const before = Date.now() - graceSec * 1000;
    // One listing of the store for both kinds (the folder store walks the whole tree for any prefix).
    const aged = (await this.d.blobs.entries('')).filter((e) => e.modifiedAt.getTime() < before).map((e) => e.key);
    const old = (prefix: string) => aged.filter((k) => k.startsWith(prefix));
    const hashOf = (key: string) => key.split('/')[1];
    const originals = old('o/');
    const knownO = await this.d.store.knownBlobs(originals.map(hashOf));
    // Deleting an original deletes its renditions with it.
    const gone = new Set<string>();
    for (const key of originals) {
      const sha = hashOf(key);
      if (knownO.has(sha)) continue;
      if (await this.d.store.dropUnclaimed(sha, () => this.d.blobs.delete(key))) {
        gone.add(sha);
        out.originals++;
      }
    }
    const renditions = old('r/').filter((k) => !gone.has(hashOf(k)));
    const knownR = await this.d.store.knownBlobs([...new Set(renditions.map(hashOf))]);
    for (const key of renditions) {
      const sha = hashOf(key);
      if (knownR.has(sha)) continue;
      if (await this.d.store.dropUnclaimed(sha, () => this.d.blobs.delete(key))) {
        this.hot.dropPrefix(`r/${sha}/`);
        out.renditions++;
      }
    }
    if (out.rows + out.originals + out.renditions) this.d.log.info(out, 'media orphans collected');
    return out;
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
  async rendition(blob: BlobInfo, r: Rendition): Promise<RenditionResult> {
    if (!isImage(blob.mimeType)) return { ok: false, reason: 'NOT_AN_IMAGE', message: `${blob.mimeType} has no image renditions; ask for "original"` };
    const key = renditionKey(blob.sha256, renditionName(r));
    const contentType = FORMAT_TYPES[r.format];
    const hot = this.hot.get(key);
    if (hot) {
      this.d.metrics?.served.inc({ source: 'memory' });
      return { ok: true, bytes: hot, contentType };
    }
    const cached = await this.d.blobs.get(key);
    if (cached) {
      this.d.metrics?.served.inc({ source: 'store' });
      this.hot.set(key, cached);
      return { ok: true, bytes: cached, contentType };
    }
    let p = this.rendering.get(key);
    if (!p) {
      p = this.renderLimiter
        .run(async () => {
          const source = await this.d.blobs.get(originalKey(blob.sha256));
          if (!source) throw Object.assign(new Error('original missing from the blob store'), { reason: 'BLOB_MISSING' });
          const bytes = await render({ bytes: source, mimeType: blob.mimeType, width: blob.width, frames: blob.frames }, r, this.d.options);
          await this.d.blobs.put(key, bytes, contentType);
          this.d.metrics?.renditions.inc({ format: r.format });
          this.d.metrics?.bytesStored.inc({ kind: 'rendition' }, bytes.length);
          this.hot.set(key, bytes);
          return bytes;
        })
        .finally(() => this.rendering.delete(key));
      this.rendering.set(key, p);
    }
    try {
      const bytes = await p;
      this.d.metrics?.served.inc({ source: 'rendered' });
      return { ok: true, bytes, contentType };
    } catch (err) {
      const e = err as Error & { reason?: string };
      return { ok: false, reason: e.reason ?? 'RENDER_FAILED', message: (e.message ?? String(err)).split('\n')[0].slice(0, 200) };
    }
  }

  /**
   * A rendition already in memory, by its canonical name, without a database or blob-store read:
   * content-addressed URLs never change what they name, so a hit needs nothing else checked.
   */
  hotRendition(sha256: string, name: string): Buffer | undefined {
    const bytes = this.hot.get(`r/${sha256}/${name}`);
    if (bytes) this.d.metrics?.served.inc({ source: 'memory' });
    return bytes;
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
