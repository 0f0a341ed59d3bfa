/**
 * Group commit: results are saved as they arrive, gathered for at most `FLUSH_MS` so that fetches
 * finishing one after another (the fetch limiter spaces them out) share a write instead of each
 * paying a transaction. Fast tokens of a batch are stored (and answered) without waiting for its
 * slowest fetch; the end of the batch flushes at once.
 */
const FLUSH_MS = 100;

export function groupSaver<K, V, R>(save: (batch: Map<K, V>) => Promise<Map<K, R>>) {
  let waiting = new Map<K, V>();
  const done = new Map<K, R>();
  let running: Promise<void> | null = null;
  let timer: NodeJS.Timeout | null = null;
  let failure: { err: unknown } | null = null;
  const flush = (): Promise<void> => {
    if (timer) clearTimeout(timer);
    timer = null;
    running ??= (async () => {
      try {
        while (waiting.size) {
          const batch = waiting;
          waiting = new Map();
          for (const [k, r] of await save(batch)) done.set(k, r);
        }
      } catch (err) {
        failure ??= { err };
      } finally {
        running = null;
      }
    })();
    return running;
  };
  return {
    add(k: K, v: V): void {
      waiting.set(k, v);
      if (!running && !timer) timer = setTimeout(() => void flush(), FLUSH_MS);
    },
    async drain(): Promise<Map<K, R>> {
      while (running || waiting.size) await (running ?? flush());
      if (failure) throw failure.err;
      return done;
    },
  };
}
