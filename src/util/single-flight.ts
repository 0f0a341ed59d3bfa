/**
 * Batched single-flight: each key is worked on by at most one batch at a time; callers asking
 * for keys already in flight share that work instead of starting their own.
 */
export class KeyedFlight<V> {
  private readonly inflight = new Map<string, Promise<V | undefined>>();

  run(keys: string[], start: (missing: string[]) => Promise<Map<string, V>>): Promise<Map<string, V>> {
    return Promise.all([...this.runEach(keys, (missing) => start(missing))].map(async ([k, p]) => [k, await p] as const)).then(
      (pairs) => new Map(pairs.filter((x): x is readonly [string, Awaited<V>] => x[1] !== undefined) as [string, V][]),
    );
  }

  /**
   * `run`, answering each key as soon as its value is known: `start` may call `settle` for keys it
   * finishes early (the rest are taken from the map it returns). Callers get one promise per key, so
   * a slow key does not hold back the others.
   */
  runEach(keys: string[], start: (missing: string[], settle: (key: string, value: V) => void) => Promise<Map<string, V>>): Map<string, Promise<V | undefined>> {
    const perKey = new Map<string, Promise<V | undefined>>();
    const missing: string[] = [];
    for (const k of new Set(keys)) {
      const p = this.inflight.get(k);
      if (p) perKey.set(k, p);
      else missing.push(k);
    }
    if (!missing.length) return perKey;
    const deferred = new Map<string, { resolve: (v: V | undefined) => void; reject: (e: unknown) => void }>();
    for (const k of missing) {
      const p = new Promise<V | undefined>((resolve, reject) => deferred.set(k, { resolve, reject }));
      this.inflight.set(k, p);
      p.finally(() => {
        if (this.inflight.get(k) === p) this.inflight.delete(k);
      }).catch(() => undefined);
      perKey.set(k, p);
    }
    const settle = (k: string, v: V | undefined) => {
      deferred.get(k)?.resolve(v);
      deferred.delete(k);
    };
    start(missing, settle).then(
      (m) => {
        for (const k of [...deferred.keys()]) settle(k, m.get(k));
      },
      (err) => {
        for (const d of deferred.values()) d.reject(err);
        deferred.clear();
      },
    );
    return perKey;
  }

  /** `run` for ids that are unique within a scope (a chain, a contract): keys are scope and id. */
  runScoped(scope: string, ids: string[], start: (missing: string[]) => Promise<Map<string, V>>): Promise<Map<string, V>> {
    const cut = scope.length + 1;
    const key = (id: string) => `${scope}|${id}`;
    return this.run(ids.map(key), async (keys) => {
      const found = await start(keys.map((k) => k.slice(cut)));
      return new Map([...found].map(([id, v]) => [key(id), v]));
    }).then((m) => new Map([...m].map(([k, v]) => [k.slice(cut), v])));
  }

  get size(): number {
    return this.inflight.size;
  }
}

/**
 * `fn`, with concurrent calls of the same key sharing one call: a call made while one of its key is under
 * way gets that one's answer (or error) instead of starting its own. For reads where an answer begun a
 * moment before the call is as good as one begun after it (what a caller reads it acts on later anyway).
 */
export function shareInFlight<A extends unknown[], V>(key: (...args: A) => string, fn: (...args: A) => Promise<V>): (...args: A) => Promise<V> {
  const underWay = new Map<string, Promise<V>>();
  return (...args: A) => {
    const k = key(...args);
    const running = underWay.get(k);
    if (running) return running;
    const p = fn(...args).finally(() => underWay.delete(k));
    underWay.set(k, p);
    return p;
  };
}
