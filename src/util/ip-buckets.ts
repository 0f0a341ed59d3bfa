import { burstShare, type FleetSize } from './fleet-share.ts';
import { LruCache } from './lru.ts';

/** Addresses tracked at once; past that the oldest are forgotten (a forgotten bucket is a full one). */
const MAX_TRACKED = 100_000;

/**
 * A token bucket per client address, in this process's memory: the bound on callers without an access
 * key, who have no bucket in the database. An entry idle long enough to have refilled is as good as
 * absent, so entries live only that long. With a `fleet`, the bucket holds this process's share of the
 * rate and burst (util/fleet-share.ts), so the configured ones hold across the processes.
 */
export class IpBuckets {
  private readonly buckets: LruCache<{ tokens: number; at: number }>;

  constructor(
    private readonly ratePerSec: number,
    private readonly burst: number,
    private readonly fleet?: FleetSize,
  ) {
    this.buckets = new LruCache(MAX_TRACKED, Math.ceil((burst / ratePerSec) * 1000) + 1_000);
  }

  /**
   * This process's rate and burst now, and how long an entry lives: until it would have refilled. That
   * is burst/rate for any share of both, but longer where a burst below the fleet is raised to one
   * request (forgotten sooner, a bucket would refill early).
   */
  private share(): { rate: number; burst: number; ttlMs: number } {
    const n = this.fleet?.size ?? 1;
    const rate = this.ratePerSec / n;
    const burst = burstShare(this.burst, n);
    return { rate, burst, ttlMs: Math.ceil((burst / rate) * 1000) + 1_000 };
  }

  /**
   * Takes `cost` tokens for `ip` (work, e.g. bundles simulated, not requests); says how long to wait when
   * there are not enough. A cost over the burst is charged as the burst, or it could never be admitted.
   */
  take(ip: string, now = Date.now(), cost = 1): { ok: true } | { ok: false; retryAfterSec: number } {
    const { rate, burst, ttlMs } = this.share();
    const need = Math.min(Math.max(cost, 0), burst);
    const b = this.buckets.get(ip, now) ?? { tokens: burst, at: now };
    const tokens = Math.min(burst, b.tokens + ((now - b.at) / 1000) * rate);
    if (tokens < need) {
      this.buckets.set(ip, { tokens, at: now }, now, ttlMs);
      return { ok: false, retryAfterSec: Math.max(1, Math.ceil((need - tokens) / rate)) };
    }
    this.buckets.set(ip, { tokens: tokens - need, at: now }, now, ttlMs);
    return { ok: true };
  }

  /** Gives back `amount` tokens taken for `ip` and not used (a reservation larger than the work done), up to the burst. */
  giveBack(ip: string, amount: number, now = Date.now()) {
    const b = this.buckets.get(ip, now);
    if (!b || amount <= 0) return;
    const { rate, burst, ttlMs } = this.share();
    const tokens = Math.min(burst, b.tokens + ((now - b.at) / 1000) * rate + amount);
    this.buckets.set(ip, { tokens, at: now }, now, ttlMs);
  }
}
