import type { AppConfig } from '../config/schema.ts';

/** A whole answer, already encoded, and how long it may be given again. */
export interface ReusableAnswer {
  readonly body: Buffer;
  /** Epoch ms after which the answer is not given again. */
  readonly until: number;
  /** Checked on every hit: false once what the answer was built from has changed in this process. */
  readonly isCurrent: () => boolean;
  /** How many tokens the answer holds, for the cache-lookup metric. */
  readonly tokens: number;
  /** REST: the validator the answer was sent with, so If-None-Match still gets 304 on a hit. */
  readonly etag?: string;
}

interface Entry extends ReusableAnswer {
  readonly size: number;
}

// A response holds serialised tokens (about 0.7 KB each), so the byte budget is tied to the hot
// cache's size: one slot of the hot cache may be held once more here, no more.
const BYTES_PER_HOT_SLOT = 1024;

/**
 * Whole answers to repeated reads, for a short time. Under load, the same request (the same body
 * from the same caller) comes again and again; assembling it each time from the hot cache was most
 * of the cost of the answer. Callers look answers up only after the request's access check passed,
 * and key them by caller. An entry lives no longer than the hot cache would keep the records it was
 * built from (so a change made by another process shows up no later than before) and is dropped
 * the moment its `isCurrent` says a token was re-resolved here. Bounded in entries and in bytes;
 * the oldest entries go first.
 */
export class ResponseCache {
  private readonly map = new Map<string, Entry>();
  private bytes = 0;
  /** Counters for benchmarks and tests; /metrics counts the tokens served instead. */
  readonly stats = { hits: 0, misses: 0, stores: 0 };

  constructor(
    private readonly maxEntries: number,
    private readonly maxBytes: number,
    private readonly ttlMs: number,
    /** Longer keys (large bodies, long URLs) are not cached: they are rarely repeated and cost memory. */
    readonly maxKeyLength = 16 * 1024,
  ) {}

  get enabled(): boolean {
    return this.maxEntries > 0 && this.maxBytes > 0 && this.ttlMs > 0;
  }

  get(key: string, now: number): ReusableAnswer | undefined {
    const e = this.map.get(key);
    if (!e) {
      this.stats.misses++;
      return undefined;
    }
    if (now >= e.until || !e.isCurrent()) {
      this.remove(key, e);
      this.stats.misses++;
      return undefined;
    }
    this.stats.hits++;
    return e;
  }

  /** `get` without counting a miss: for a lookup that hands misses on to one that counts them (`hit` counts a use). */
  peek(key: string, now: number): ReusableAnswer | undefined {
    const e = this.map.get(key);
    if (!e) return undefined;
    if (now >= e.until || !e.isCurrent()) {
      this.remove(key, e);
      return undefined;
    }
    return e;
  }

  hit(): void {
    this.stats.hits++;
  }

  set(key: string, answer: ReusableAnswer, now: number): void {
    if (!this.enabled || key.length > this.maxKeyLength) return;
    const until = Math.min(answer.until, now + this.ttlMs);
    if (until <= now || !answer.isCurrent()) return;
    // Keys are JS strings: two bytes a character is the worst case.
    const size = answer.body.length + 2 * key.length;
    if (size > this.maxBytes) return;
    const old = this.map.get(key);
    if (old) this.remove(key, old);
    this.map.set(key, { ...answer, until, size });
    this.bytes += size;
    this.stats.stores++;
    while (this.map.size > this.maxEntries || this.bytes > this.maxBytes) {
      const [k, e] = this.map.entries().next().value!;
      this.remove(k, e);
    }
  }

  clear(): void {
    this.map.clear();
    this.bytes = 0;
  }

  get size(): number {
    return this.map.size;
  }

  get byteSize(): number {
    return this.bytes;
  }

  private remove(key: string, e: Entry): void {
    this.map.delete(key);
    this.bytes -= e.size;
  }
}

/**
 * The one response cache for token metadata answers, REST and RPC alike, so they share one memory
 * budget; built once in the wiring. Sized from the hot cache's settings (metadata.hotCacheSize,
 * hotCacheTtlMs): a hot cache turned off turns this off too.
 */
export function tokenResponseCache(config: AppConfig): ResponseCache {
  const m = config.metadata;
  return new ResponseCache(m.hotCacheSize, m.hotCacheSize * BYTES_PER_HOT_SLOT, m.hotCacheTtlMs);
}
