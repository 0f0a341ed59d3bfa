/**
 * A size- and age-bounded map. Eviction is by insertion order (Map keeps it), not recency: entries
 * live for a short TTL anyway, and re-inserting on every hit cost more than the lookup itself.
 */
export class LruCache<V> {
  private readonly map = new Map<string, { v: V; at: number }>();

  constructor(
    private readonly max: number,
    private readonly ttlMs: number,
  ) {}

  get(key: string): V | undefined {
    const e = this.map.get(key);
    if (!e) return undefined;
    if (Date.now() - e.at > this.ttlMs) {
      this.map.delete(key);
      return undefined;
    }
    return e.v;
  }

  set(key: string, v: V): void {
    if (this.max <= 0 || this.ttlMs <= 0) return;
    this.map.delete(key);
    this.map.set(key, { v, at: Date.now() });
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
