// The fetch stage of the media pipeline: one field's file fetched through the SSRF-safe fetcher,
// established from its bytes (probe), stored once by SHA-256 and its asset row saved READY; or the
// asset recorded FAILED with its reason, STORE_FAILED when the blob store refused the bytes.

import { createHash } from 'node:crypto';
import type { Logger } from '../telemetry/logger.ts';
import { causeOf } from '../util/cause.ts';
import { FailureStreak } from '../util/failure-streak.ts';
import { originalKey, type BlobStore } from './blob-store.ts';
import type { AssetKey, BlobInfo, MediaAsset, MediaStore } from './media-store.ts';
import type { MediaMetrics } from './metrics.ts';
import { probeMedia } from './probe.ts';
import type { BytesFetcher, MediaOptions } from './service-types.ts';

/** A blob store write (or the size check before it) failed: the store's fault, not the media's. */
class BlobWriteFailed extends Error {
  constructor(readonly cause: unknown) {
    super(causeOf(cause));
  }
}

export class MediaIngest {
  /** The blob store's refused writes, logged once when they begin (with the cause) and once when writes work again. */
  private readonly storeWrites: FailureStreak;

  constructor(
    private readonly d: {
      store: MediaStore;
      blobs: BlobStore;
      fetcher: BytesFetcher;
      options: MediaOptions;
      log: Logger;
      metrics?: MediaMetrics;
      /** After a save: collects the blob the field let go of (if any), forgets cached answers, reads the asset back. */
      settled: (k: AssetKey, released: string | null) => Promise<MediaAsset>;
    },
  ) {
    this.storeWrites = new FailureStreak(d.log, 'media blob store writes');
  }

  async run(k: AssetKey, sourceUrl: string): Promise<MediaAsset> {
    const o = this.d.options;
    const retryAfter = (ms = 0) => new Date(Date.now() + Math.max(o.failureRetrySec * 1000, ms));
    const fail = async (reason: string, message: string, ms?: number) => {
      const released = await this.d.store.saveFailed(k, sourceUrl, reason, message, retryAfter(ms));
      this.d.log.info({ chainId: k.chainId, contract: k.contract, tokenId: k.tokenId, field: k.field, reason }, 'media failed');
      return this.d.settled(k, released);
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
    return this.d.settled(k, released);
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
    return this.d.settled(k, released);
  }
}
