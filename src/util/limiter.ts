/** At most `limit` tasks at once; the rest wait in arrival order. */
export class Limiter {
  private active = 0;
  private readonly queue: (() => void)[] = [];

  constructor(private readonly limit: number) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    // A waiter is handed the finishing task's slot, never given it back to count again: a task that
    // arrived while the waiter was being woken would otherwise see a free slot and run beside it.
    if (this.active >= this.limit) await new Promise<void>((r) => this.queue.push(r));
    else this.active++;
    try {
      return await task();
    } finally {
      const next = this.queue.shift();
      if (next) next();
      else this.active--;
    }
  }
}
