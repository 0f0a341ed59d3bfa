import type { FailureStreak } from './failure-streak.ts';

/**
 * The loop every background poller runs: call `tick`, sleep `intervalMs` (unless the tick says more
 * work is waiting, or `wake()` was called while it ran: that wake-up is not lost), wake early on
 * `wake()`, stop cleanly on `stop()` after the tick in progress.
 * A tick that throws is told to `failures` and the loop goes on: a FailureStreak logs the first
 * failure of a run of them, with its cause, and the tick that works again, not every failed tick.
 */
export class PollLoop {
  private running = false;
  private loop: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  /** Woken while a tick ran: the next tick runs at once. */
  private pending = false;

  constructor(
    // biome-ignore lint/suspicious/noConfusingVoidType: a tick that returns nothing (Promise<void>) is one that says nothing more waits
    private readonly tick: () => Promise<boolean | void>,
    private readonly intervalMs: () => number,
    private readonly failures: Pick<FailureStreak, 'failed' | 'succeeded'>,
  ) {}

  get active(): boolean {
    return this.running;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        let more = false;
        this.pending = false;
        try {
          more = (await this.tick()) === true;
          this.failures.succeeded();
        } catch (err) {
          this.failures.failed(err);
        }
        if (!this.running) break;
        if (more || this.pending) continue;
        await new Promise<void>((r) => {
          const t = setTimeout(r, this.intervalMs());
          this.wakeUp = () => {
            clearTimeout(t);
            r();
          };
        });
        this.wakeUp = undefined;
      }
    })();
  }

  wake(): void {
    this.pending = true;
    this.wakeUp?.();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.wakeUp?.();
    await this.loop;
  }
}
