/**
 * Collects keys asked for within a short window and loads them with one call: many concurrent requests
 * that each need a value cost one round trip together. A key asked twice in a window is loaded once.
 */
export class WindowBatch<K, V> {
  private pending = new Map<K, { resolve: (v: V) => void; reject: (e: unknown) => void }[]>();
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly load: (keys: K[]) => Promise<V[]>,
    private readonly windowMs = 2,
    private readonly maxKeys = 256,
  ) {}

  get(key: K): Promise<V> {
    return new Promise((resolve, reject) => {
      const waiting = this.pending.get(key);
      if (waiting) waiting.push({ resolve, reject });
      else this.pending.set(key, [{ resolve, reject }]);
      if (this.pending.size >= this.maxKeys) this.flush();
      else this.timer ??= setTimeout(() => this.flush(), this.windowMs);
    });
  }

  private flush() {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    this.pending = new Map();
    const keys = [...batch.keys()];
    this.load(keys).then(
      (values) => keys.forEach((k, i) => batch.get(k)!.forEach((w) => w.resolve(values[i]))),
      (err) => batch.forEach((ws) => ws.forEach((w) => w.reject(err))),
    );
  }
}
