import type { Counter } from 'prom-client';

/**
 * Per-request counts kept as plain numbers and added to a prom-client counter when it is read
 * (`/metrics`, `get()`): prom-client hashes and validates the label object on every `inc`, even
 * through a `labels(...)` child, and that ran for every request. Nothing is lost or late for a
 * reader: the counter's `collect` adds what was counted before any value is read.
 */
export class Tally<L extends string> {
  private readonly pending = new Map<string, { labels: Partial<Record<L, string>>; n: number }>();

  constructor(counter: Counter<L>) {
    // prom-client calls a metric's `collect` before every read; its typings leave it out.
    const c = counter as Counter<L> & { collect?: (this: Counter<L>) => unknown };
    const previous = c.collect;
    c.collect = function collect(this: Counter<L>) {
      // Several tallies may feed one counter: each adds its own, then the one before it runs.
      flush();
      return previous?.call(this);
    };
    const flush = () => {
      for (const e of this.pending.values()) {
        if (e.n > 0) counter.inc(e.labels, e.n);
        e.n = 0;
      }
    };
  }

  /**
   * Counts one under `key`; `labels(a, b)` is called only the first time a key is seen (a function
   * and its arguments, not a closure, so a count allocates nothing).
   */
  add<A, B>(key: string, labels: (a: A, b: B) => Partial<Record<L, string>>, a: A, b: B, n = 1): void {
    const e = this.pending.get(key);
    if (e) e.n += n;
    else this.pending.set(key, { labels: labels(a, b), n });
  }
}
