/** A size- and age-bounded map; Map keeps insertion order, so the first key is the least recently used. */
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
    this.map.delete(key);
    this.map.set(key, e);
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
