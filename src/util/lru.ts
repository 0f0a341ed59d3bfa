/**
 * A size- and age-bounded map. Eviction is by insertion order (Map keeps it), not recency: entries
 * live for a short TTL anyway, and re-inserting on every hit cost more than the lookup itself.
 *
 * Callers on hot paths pass `now` so that one clock read serves a whole batch of lookups.
 */
export class LruCache<V> {
  private readonly map = new Map<string, { v: V; until: number }>();

  constructor(
    private readonly max: number,
    private readonly ttlMs: number,
  ) {}

  get(key: string, now = Date.now()): V | undefined {
    return this.getEntry(key, now)?.v;
  }

  /** The value and the time (epoch ms) after which it is no longer served. */
  getEntry(key: string, now = Date.now()): { readonly v: V; readonly until: number } | undefined {
    const e = this.map.get(key);
    if (!e) return undefined;
    if (now > e.until) {
      this.map.delete(key);
      return undefined;
    }
    return e;
  }

  /** `ttlMs`: this entry's own, instead of the cache's. */
  set(key: string, v: V, now = Date.now(), ttlMs = this.ttlMs): void {
    if (this.max <= 0 || this.ttlMs <= 0) return;
    this.map.delete(key);
    this.map.set(key, { v, until: now + ttlMs });
    while (this.map.size > this.max) this.map.delete(this.map.keys().next().value!);
  }

  delete(key: string): void {
    this.map.delete(key);
  }

  clear(): void {
    this.map.clear();
  }

  get size(): number {
    return this.map.size;
  }
}
