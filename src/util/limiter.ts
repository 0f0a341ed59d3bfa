/** A task refused because the limiter's waiting line is full (Limiter with `maxWaiting`). */
export class LimiterFull extends Error {
  constructor(
    readonly limit: number,
    readonly waiting: number,
  ) {
    super(`${limit} running and ${waiting} waiting: the waiting line is full`);
  }
}

/** At most `limit` tasks at once; the rest wait in arrival order (at most `maxWaiting` of them, else LimiterFull). */
export class Limiter {
  private active = 0;
  private readonly queue: (() => void)[] = [];

  constructor(
    private readonly limit: number,
    private readonly maxWaiting = Number.POSITIVE_INFINITY,
  ) {}

  /** Tasks running now. */
  get running(): number {
    return this.active;
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    // A waiter is handed the finishing task's slot, never given it back to count again: a task that
    // arrived while the waiter was being woken would otherwise see a free slot and run beside it.
    if (this.active >= this.limit) {
      if (this.queue.length >= this.maxWaiting) throw new LimiterFull(this.limit, this.queue.length);
      await new Promise<void>((r) => this.queue.push(r));
    } else this.active++;
    try {
      return await task();
    } finally {
      const next = this.queue.shift();
      if (next) next();
      else this.active--;
    }
  }
}
