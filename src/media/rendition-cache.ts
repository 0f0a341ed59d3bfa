// The rendition stage of the media pipeline: a stored image's renditions, rendered on first request
// (once, however many ask; a render at a time per slot), kept in the blob store, and the recently
// served ones held in memory by bytes.

import { originalKey, renditionKey, type BlobStore } from './blob-store.ts';
import { ByteCache } from './byte-cache.ts';
import type { BlobInfo } from './media-store.ts';
import type { MediaMetrics } from './metrics.ts';
import type { ProbeLimits } from './probe.ts';
import { FORMAT_TYPES, render, renditionName, type Rendition } from './renditions.ts';
import { isImage, type RenditionResult } from './service-types.ts';
import { Limiter } from '../util/limiter.ts';

export class RenditionCache {
  private readonly limiter: Limiter;
  private readonly rendering = new Map<string, Promise<Buffer>>();
  /** Recently served renditions, bounded by bytes: the hot thumbnails skip the blob store. */
  private readonly hot = new ByteCache(64 * 1024 * 1024, 16 * 1024 * 1024);

  constructor(private readonly d: { blobs: BlobStore; limits: ProbeLimits; concurrency: number; metrics?: MediaMetrics }) {
    // Decoding is CPU- and memory-bound: a render at a time per core is what keeps RSS flat.
    this.limiter = new Limiter(d.concurrency);
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
      p = this.limiter
        .run(async () => {
          const source = await this.d.blobs.get(originalKey(blob.sha256));
          if (!source) throw Object.assign(new Error('original missing from the blob store'), { reason: 'BLOB_MISSING' });
          const bytes = await render({ bytes: source, mimeType: blob.mimeType, width: blob.width, frames: blob.frames }, r, this.d.limits);
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

  /** A rendition already in memory, by its canonical name (no database or blob-store read). */
  hotRendition(sha256: string, name: string): Buffer | undefined {
    const bytes = this.hot.get(`r/${sha256}/${name}`);
    if (bytes) this.d.metrics?.served.inc({ source: 'memory' });
    return bytes;
  }

  /** Forgets the in-memory renditions of a blob that was collected. */
  forget(sha256: string): void {
    this.hot.dropPrefix(`r/${sha256}/`);
  }
}
