/** A map of buffers bounded by their total size (oldest out first); entries above `maxEntry` are not kept. */
export class ByteCache {
  private readonly map = new Map<string, Buffer>();
  private total = 0;

  constructor(
    private readonly maxTotal: number,
    private readonly maxEntry: number,
  ) {}

  get(key: string): Buffer | undefined {
    return this.map.get(key);
  }

  set(key: string, value: Buffer): void {
    if (value.length > this.maxEntry || this.map.has(key)) return;
    this.map.set(key, value);
    this.total += value.length;
    for (const [k, v] of this.map) {
      if (this.total <= this.maxTotal) break;
      this.map.delete(k);
      this.total -= v.length;
    }
  }

  dropPrefix(prefix: string): void {
    for (const [k, v] of this.map) {
      if (k.startsWith(prefix)) {
        this.map.delete(k);
        this.total -= v.length;
      }
    }
  }
}
