import { LruCache } from '../util/lru.ts';

/** Addresses tracked at once; past that the oldest are forgotten (a forgotten bucket is a full one). */
const MAX_TRACKED = 100_000;

/**
 * A token bucket per client address, in this process's memory: the bound on callers without an access
 * key, who have no bucket in the database. An entry idle long enough to have refilled is as good as
 * absent, so entries live only that long.
 */
export class IpBuckets {
  private readonly buckets: LruCache<{ tokens: number; at: number }>;

  constructor(
    private readonly ratePerSec: number,
    private readonly burst: number,
  ) {
    this.buckets = new LruCache(MAX_TRACKED, Math.ceil((burst / ratePerSec) * 1000) + 1_000);
  }

  /** Takes one token for `ip`; says how long to wait when there is none. */
  take(ip: string, now = Date.now()): { ok: true } | { ok: false; retryAfterSec: number } {
    const b = this.buckets.get(ip, now) ?? { tokens: this.burst, at: now };
    const tokens = Math.min(this.burst, b.tokens + ((now - b.at) / 1000) * this.ratePerSec);
    if (tokens < 1) {
      this.buckets.set(ip, { tokens, at: now }, now);
      return { ok: false, retryAfterSec: Math.max(1, Math.ceil((1 - tokens) / this.ratePerSec)) };
    }
    this.buckets.set(ip, { tokens: tokens - 1, at: now }, now);
    return { ok: true };
  }
}
