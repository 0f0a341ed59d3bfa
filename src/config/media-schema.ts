import { z } from 'zod';
import { httpUrl } from './fields.ts';

// The config section of token media: fetching, probing and storing images and animations, and serving them at /media/.

export const MediaConfigSchema = z
  .object({
    /** Cache token media (image, image_data, animation_url) and serve renditions at /media/. */
    enabled: z.boolean().default(true),
    /** Largest media file fetched, in bytes. */
    maxBytes: z
      .number()
      .int()
      .positive()
      .default(50 * 1024 * 1024),
    fetchTimeoutMs: z.number().int().positive().default(60_000),
    /**
     * Fetch a token's media as soon as the token resolves through the API for a caller with an access
     * key (otherwise on first request). Keyless reads never queue media: they would fill the queue for free.
     */
    eager: z.boolean().default(true),
    /** Media files fetched and probed at once by one process (its own queue: documents never wait on it). */
    concurrency: z.number().int().min(1).max(256).default(4),
    /** Eager fetches waiting for a slot; past this new ones are dropped (fetched lazily later). */
    maxQueued: z.number().int().min(0).default(10_000),
    /**
     * Media fetches one origin host (host:port) runs at once; waiting fetches are served round-robin
     * across hosts, so a host whose files never finish holds this many slots, not the pool. The
     * configured IPFS and Arweave gateways together run gatewayConcurrency.
     */
    perHostConcurrency: z.number().int().min(1).max(256).default(2),
    /** A host earns a slot (up to concurrency) per file fetched within this, and halves them for each slower one. */
    fastHostMs: z.number().int().positive().default(2_000),
    gatewayConcurrency: z.number().int().min(1).max(256).default(3),
    /** A media body that sends nothing for this long mid-transfer is given up (TIMEOUT). */
    stallTimeoutMs: z.number().int().min(0).default(10_000),
    /** Images with more pixels than this (width × height × frames) are refused: decompression bombs. */
    maxInputPixels: z.number().int().positive().default(100_000_000),
    /** Animated images with more frames than this are refused. */
    maxFrames: z.number().int().min(1).default(1_000),
    /** A failed media fetch is tried again after this long. */
    failureRetrySec: z.number().int().min(0).default(3_600),
    /**
     * A field whose bytes the blob store refused (disk full, not writable, S3 errors) is fetched again
     * after this long, by the background process: the store's fault is local and usually brief.
     */
    storeRetrySec: z.number().int().min(1).max(86_400).default(60),
    /** How often the background process looks for blobs a crash left behind (unreferenced rows, bytes with no row); 0 turns it off. */
    orphanSweepSec: z.number().int().min(0).default(3_600),
    /** Stored bytes younger than this are never taken for orphans (an ingest may be committing them). */
    orphanGraceSec: z.number().int().min(60).default(3_600),
    /** Put the cached URL in `image` itself (the origin's URL stays in the raw document). */
    rewriteImage: z.boolean().default(false),
    /** Absolute base of the URLs put in `assets` (e.g. https://meta.example.com); default: the listening address. */
    publicUrl: httpUrl.optional(),
    /** Where blobs live: a folder (default `<data dir>/media`, next to the PGlite folder) or S3-compatible storage. */
    store: z
      .discriminatedUnion('type', [
        z.object({ type: z.literal('folder'), path: z.string().min(1).optional() }),
        z.object({
          type: z.literal('s3'),
          bucket: z.string().min(3),
          region: z.string().min(1).default('us-east-1'),
          /** For S3-compatible services (MinIO, R2, …); omitted for AWS. */
          endpoint: httpUrl.optional(),
          forcePathStyle: z.boolean().default(false),
          /** Key prefix inside the bucket. */
          prefix: z.string().default(''),
          // Credentials come from the environment (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the
          // SDK's other providers), never from this file.
        }),
      ])
      .default({ type: 'folder' }),
  })
  .prefault({});
