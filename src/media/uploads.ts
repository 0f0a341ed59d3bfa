// Files uploaded to this service (a collection's assets) rather than fetched: the same rules as
// fetched media (type from the bytes, the byte cap, pixel and frame limits, SVG made safe), the
// same content-addressed blob store and the same collection of blobs nothing references.

import { createHash } from 'node:crypto';
import type { Queryable } from '../store/db.ts';
import { originalKey, type BlobStore } from './blob-store.ts';
import type { BlobInfo, MediaStore } from './media-store.ts';
import { probeMedia, type ProbeLimits } from './probe.ts';

export type UploadRefusal = { ok: false; reason: string; message: string };
export type Uploaded = { ok: true; blob: BlobInfo };

// Scripts, event handlers, script URLs and foreign HTML: the pipeline strips them from fetched SVG;
// an uploader is told instead, so what is served is exactly what they sent.
const ACTIVE_SVG = /<script[\s>]|\son[a-z]+\s*=|javascript:|<foreignObject[\s>]/i;

export interface MediaUploadsDeps {
  store: MediaStore;
  blobs: BlobStore;
  limits: ProbeLimits & { maxBytes: number };
  /** Collects a blob when nothing references it any more (MediaService.release). */
  release: (sha256: string | null) => Promise<boolean>;
}

export class MediaUploads {
  constructor(private readonly d: MediaUploadsDeps) {}

  get maxBytes(): number {
    return this.d.limits.maxBytes;
  }

  /**
   * Probes and stores an uploaded file; `link` points the uploader's row at the blob on the
   * transaction that holds the blob row's lock (so a concurrent collection cannot take it), and
   * returns the hash the row pointed at before, which is released here.
   */
  async store(bytes: Buffer, link: (tx: Queryable, blob: BlobInfo) => Promise<string | null>): Promise<Uploaded | UploadRefusal> {
    const o = this.d.limits;
    if (bytes.length === 0) return { ok: false, reason: 'EMPTY', message: 'the upload has no bytes' };
    if (bytes.length > o.maxBytes) return { ok: false, reason: 'TOO_LARGE', message: `the file is ${bytes.length} bytes; the limit is ${o.maxBytes}` };
    if (ACTIVE_SVG.test(bytes.subarray(0, 1_000_000).toString('utf8')) && /<svg[\s>]/i.test(bytes.subarray(0, 4096).toString('utf8'))) {
      return { ok: false, reason: 'SVG_SCRIPT', message: 'the SVG has scripts, event handlers, javascript: URLs or foreignObject; upload a static SVG' };
    }
    const probed = await probeMedia(bytes, o);
    if (!probed.ok) return probed;
    const sha256 = createHash('sha256').update(probed.bytes).digest('hex');
    const blob: BlobInfo = { sha256, mimeType: probed.mimeType, filesize: probed.bytes.length, width: probed.width, height: probed.height, frames: probed.frames };
    const put = async () => {
      if ((await this.d.blobs.size(originalKey(sha256))) !== probed.bytes.length) await this.d.blobs.put(originalKey(sha256), probed.bytes, probed.mimeType);
    };
    // Bytes first, outside the transaction; checked again under the blob row's lock (media-store.ts).
    await put();
    const previous = await this.d.store.saveUpload(blob, put, (tx) => link(tx, blob));
    await this.d.release(previous);
    return { ok: true, blob };
  }

  /** Blobs an asset let go of (a deleted asset, token or collection): collected unless still referenced. */
  async releaseAll(sha256s: Iterable<string | null>): Promise<void> {
    for (const sha of new Set(sha256s)) await this.d.release(sha);
  }
}
