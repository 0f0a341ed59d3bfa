import type { Logger } from '../telemetry/logger.ts';
import { PollLoop } from '../util/poll-loop.ts';
import { FailureStreak } from '../util/failure-streak.ts';
import type { BackfillWorker } from './backfill.ts';

/**
 * Works every running backfill in the background of serve/dev/worker: the one a watchlist addition
 * schedules is worked without anyone starting `metarelay indexer work`. It claims ranges like any
 * other worker (leases, SKIP LOCKED), so several processes share them. `wake()` after scheduling one
 * starts it without waiting for the next poll.
 */
export class BackfillRunner {
  private readonly loop: PollLoop;

  constructor(
    private readonly worker: BackfillWorker,
    log: Logger,
    intervalMs: number,
  ) {
    this.loop = new PollLoop(
      async () => void (await worker.runUntilIdle()),
      () => intervalMs,
      // A range that failed is retried when its lease runs out.
      new FailureStreak(log, 'indexer backfill'),
    );
  }

  start(): void {
    this.loop.start();
  }

  wake(): void {
    this.loop.wake();
  }

  /** Returns after the chunk in progress is committed; its range is handed back. */
  stop(): Promise<void> {
    this.worker.halt();
    this.loop.wake();
    return this.loop.stop();
  }
}
