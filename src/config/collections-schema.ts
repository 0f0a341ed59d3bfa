import { z } from 'zod';

// The config section of collections (docs/collections.md): per-project quotas and the upload rate.

/**
 * Collections (docs/collections.md): what one project may hold. A write past a quota is refused with
 * QuotaExceeded (1200, 429) naming it; bytes are those of the uploaded files its assets point at.
 */
export const CollectionsConfigSchema = z
  .object({
    quotas: z
      .object({
        collections: z.number().int().min(0).default(100),
        tokens: z.number().int().min(0).default(100_000),
        assets: z.number().int().min(0).default(100_000),
        links: z.number().int().min(0).default(100),
        bytes: z.number().int().min(0).default(1_073_741_824),
      })
      .strict()
      .prefault({}),
    /** Uploads per project, the fleet together: a token bucket (perMinute on average, burst at once); past it RateLimited with Retry-After. */
    uploads: z
      .object({ perMinute: z.number().positive().default(120), burst: z.number().int().min(1).default(30) })
      .strict()
      .prefault({}),
  })
  .strict()
  .prefault({});
