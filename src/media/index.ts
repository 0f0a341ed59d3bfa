// The door the wiring uses: builds the blob store the config names, the media service on it, the loops
// one process of the fleet runs for it, and the hooks the metadata domain calls it through.

import { dirname, join, resolve } from 'node:path';
import type { AppConfig } from '../config/schema.ts';
import type { Common } from '../common.ts';
import type { MediaHooks } from '../metadata/index.ts';
import type { Role } from '../store/leadership.ts';
import type { Db } from '../store/db.ts';
import { isPostgresUrl } from '../store/db.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { BlobStore } from './blob-store.ts';
import { folderBlobStore } from './folder-store.ts';
import { mediaStore } from './media-store.ts';
import { s3BlobStore } from './s3-store.ts';
import { MediaService, type BytesFetcher } from './service.ts';
import type { MediaMetrics } from './metrics.ts';
import { MediaUploads } from './uploads.ts';
import { ownBlobsFirst } from './own-blobs.ts';
import { mediaMetrics } from './metrics.ts';
import { MediaOrphanSweep } from './orphan-sweep.ts';
import { MediaStoreRetry } from './store-retry.ts';

export { MediaService, isImage, type AssetWire, type TokenMedia, type ContractMediaSource, type ContractMediaUrls } from './service.ts';
export { MEDIA_FIELDS, CONTRACT_MEDIA_FIELDS, type MediaField, type ContractMediaField, type MediaAsset, type BlobInfo } from './media-store.ts';
export { mediaMetrics, type MediaMetrics } from './metrics.ts';
export { MediaOrphanSweep } from './orphan-sweep.ts';
export { MediaStoreRetry } from './store-retry.ts';
export { MediaUploads, type Uploaded, type UploadRefusal } from './uploads.ts';
export { parseRendition, snapWidth, formatFor, WIDTHS, type Rendition } from './renditions.ts';

/** The default folder: `media` beside the PGlite folder (`.metarelay/media` for `.metarelay/db`). */
export function defaultMediaFolder(database: string): string {
  if (isPostgresUrl(database) || database.startsWith('memory://')) return resolve('.metarelay/media');
  return join(dirname(resolve(database)), 'media');
}

export function createBlobStore(config: AppConfig): BlobStore {
  const s = config.media.store;
  if (s.type === 's3') {
    return s3BlobStore({ bucket: s.bucket, region: s.region, endpoint: s.endpoint, forcePathStyle: s.forcePathStyle, prefix: s.prefix });
  }
  return folderBlobStore(s.path ? resolve(s.path) : defaultMediaFolder(config.database));
}

export function createMediaService(config: AppConfig, deps: { db: Db; fetcher: BytesFetcher; log: Logger; blobs?: BlobStore; metrics?: MediaMetrics }): MediaService {
  const m = config.media;
  const blobs = deps.blobs ?? createBlobStore(config);
  const service: MediaService = new MediaService({
    store: mediaStore(deps.db),
    blobs,
    fetcher: ownBlobsFirst(deps.fetcher, blobs, () => service.publicUrl),
    log: deps.log,
    metrics: deps.metrics,
    options: {
      maxBytes: m.maxBytes,
      fetchTimeoutMs: m.fetchTimeoutMs,
      concurrency: m.concurrency,
      perHostConcurrency: m.perHostConcurrency,
      fastHostMs: m.fastHostMs,
      gatewayConcurrency: m.gatewayConcurrency,
      stallTimeoutMs: m.stallTimeoutMs,
      maxQueued: m.maxQueued,
      failureRetrySec: m.failureRetrySec,
      storeRetrySec: m.storeRetrySec,
      eager: m.eager,
      maxInputPixels: m.maxInputPixels,
      maxFrames: m.maxFrames,
      publicUrl: m.publicUrl,
    },
  });
  return service;
}

/** Uploaded files (collection assets) on the same blob store and blob rows as the media service. */
export function createMediaUploads(config: AppConfig, db: Db, media: MediaService): MediaUploads {
  const m = config.media;
  return new MediaUploads({
    store: mediaStore(db),
    blobs: media.blobs,
    limits: { maxBytes: m.maxBytes, maxInputPixels: m.maxInputPixels, maxFrames: m.maxFrames },
    release: (sha) => media.release(sha),
  });
}

export interface Media {
  /** The media pipeline (cached originals, renditions, `assets`); undefined when media.enabled is false. */
  media?: MediaService;
  /** What one process of the fleet runs for it, by leadership role: the orphan sweep (unless orphanSweepSec is 0) and the store retry. */
  mediaRoles: Array<[string, Role]>;
  /** The metadata domain's hooks into it: tokens' and contracts' media, queued and answered with their cached URLs. */
  mediaHooks: MediaHooks;
}

export function createMedia({ config, db, log, metrics, shutdown }: Common, deps: { fetcher: BytesFetcher }): Media {
  if (!config.media.enabled) return { mediaRoles: [], mediaHooks: {} };
  const m = config.media;
  const media = createMediaService(config, { db, fetcher: deps.fetcher, log, metrics: mediaMetrics(metrics.registry) });
  shutdown.add(() => media.close());
  const mediaRoles: Array<[string, Role]> = [];
  if (m.orphanSweepSec > 0) mediaRoles.push(['media-orphan-sweep', new MediaOrphanSweep(media, { intervalSec: m.orphanSweepSec, graceSec: m.orphanGraceSec }, log)]);
  mediaRoles.push(['media-store-retry', new MediaStoreRetry(media, m.storeRetrySec, log)]);
  return {
    media,
    mediaRoles,
    mediaHooks: {
      tokens: {
        onResolved: (chainId, contract, list, via) => media.onTokensResolved(chainId, contract, list, via === 'read' && m.eager ? 'eager' : 'recheck'),
        assetsFor: (chainId, contract, ids) => media.assetsFor(chainId, contract, ids),
        rewriteImage: m.rewriteImage,
      },
      // Contract logos and og:images go through the media pipeline; answers carry their cached URLs (cachedMedia).
      contracts: (chainId, items, eager) => media.contractMedia(chainId, items, eager),
    },
  };
}
