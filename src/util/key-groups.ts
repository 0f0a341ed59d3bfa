/**
 * Runs concurrent calls together, in groups that share their costs (one transaction, one COMMIT), with
 * no waiting window: a call made while fewer than `running` groups are under way starts at once (a group
 * beside one under way, once `more` calls wait), and the calls made meanwhile wait for the next group,
 * which takes all of them up to `size`. Under no load a
 * call runs alone, as without groups; under load, groups grow with the load.
 *
 * Two calls that share a key never go in one group (the later waits for a later group, in its turn), so
 * whatever the keys serialize (a wallet's advisory lock) still runs one call after the other.
 *
 * `many` runs a group of two or more and gives each call its outcome. When it throws, the group is run
 * again one call at a time with `one`: a group that fails for one call's reason (a constraint, a budget
 * spent at the COMMIT) is rolled back whole, and each call then gets what it alone would have got.
 */
export type Outcome<R> = { ok: true; value: R } | { ok: false; error: unknown };

interface Waiting<T, R, K> {
  item: T;
  keys: readonly K[];
  resolve: (r: R) => void;
  reject: (e: unknown) => void;
}

export class KeyGroups<T, R, K = string> {
  private readonly waiting: Waiting<T, R, K>[] = [];
  private underWay = 0;
  /** The keys of the groups under way: a call that shares one waits for a later group (it would only wait on their locks). */
  private readonly busy = new Set<K>();
  /** Groups of two or more run, and groups run again one by one (for the tests and the bench). */
  readonly counts = { groups: 0, grouped: 0, fallbacks: 0 };

  constructor(
    private readonly o: {
      keys: (item: T) => readonly K[];
      one: (item: T) => Promise<R>;
      many: (items: T[]) => Promise<Outcome<R>[]>;
      size: number;
      running: number;
      /**
       * A group beyond the first starts only once this many calls wait for it (default 1: at once). The
       * calls made while one group is under way then wait for it to end and go together, rather than
       * going at once as a group of one or two: what a process with little of the traffic (one of a
       * fleet) sees. Enough of them waiting, the next group starts beside it as before, so one group
       * waiting on a lock does not hold up every call of the process.
       */
      more?: number;
    },
  ) {}

  run(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.waiting.push({ item, keys: this.o.keys(item), resolve, reject });
      this.pump();
    });
  }

  private pump() {
    while (this.underWay < this.o.running && this.waiting.length > 0) {
      if (this.underWay > 0 && this.waiting.length < (this.o.more ?? 1)) return;
      const group = this.take();
      if (group.length === 0) return;
      this.underWay++;
      for (const w of group) for (const k of w.keys) this.busy.add(k);
      void this.exec(group).then((outcomes) => {
        // The next group starts before this one's callers go on: whatever they send next waits its turn.
        this.underWay--;
        for (const w of group) for (const k of w.keys) this.busy.delete(k);
        this.pump();
        group.forEach((w, i) => {
          const o = outcomes[i];
          if (o.ok) w.resolve(o.value);
          else w.reject(o.error);
        });
      });
    }
  }

  /**
   * The next group: the waiting calls, in order, that share no key with a group under way nor with a call
   * taken before them, nor with an earlier call left waiting (calls of one key run in the order made).
   */
  private take(): Waiting<T, R, K>[] {
    const taken = new Set<K>(this.busy);
    const group: Waiting<T, R, K>[] = [];
    for (let i = 0; i < this.waiting.length && group.length < this.o.size; ) {
      const w = this.waiting[i];
      if (w.keys.some((k) => taken.has(k))) {
        // Left waiting: its keys stay out of this group, so no later call of them overtakes it.
        for (const k of w.keys) taken.add(k);
        i++;
        continue;
      }
      for (const k of w.keys) taken.add(k);
      group.push(w);
      this.waiting.splice(i, 1);
    }
    return group;
  }

  /** Every call's outcome; never throws. */
  private async exec(group: Waiting<T, R, K>[]): Promise<Outcome<R>[]> {
    const alone = (w: Waiting<T, R, K>): Promise<Outcome<R>> =>
      this.o.one(w.item).then(
        (value) => ({ ok: true, value }),
        (error: unknown) => ({ ok: false, error }),
      );
    if (group.length === 1) return [await alone(group[0])];
    try {
      const outcomes = await this.o.many(group.map((w) => w.item));
      this.counts.groups++;
      this.counts.grouped += group.length;
      return outcomes;
    } catch {
      this.counts.fallbacks++;
      // One after the other, in the order they came: what each would have got alone.
      const outcomes: Outcome<R>[] = [];
      for (const w of group) outcomes.push(await alone(w));
      return outcomes;
    }
  }
}
