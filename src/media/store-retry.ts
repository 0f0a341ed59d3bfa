import type { Logger } from '../telemetry/logger.ts';
import { FailureStreak } from '../util/failure-streak.ts';
import { PollLoop } from '../util/poll-loop.ts';
import type { MediaService } from './service.ts';

/**
 * Fetches again, every `intervalSec`, the media fields whose bytes the blob store refused (recorded
 * STORE_FAILED, due after media.storeRetrySec): a disk that filled up or a bucket that answered errors
 * for a while costs those tokens their media only until it takes writes again. One process of the
 * fleet runs it (the `media-store-retry` role, store/leadership.ts); a turn with nothing due is one
 * indexed look-up.
 */
export class MediaStoreRetry {
  private readonly loop: PollLoop;

  constructor(media: MediaService, intervalSec: number, log: Logger) {
    this.loop = new PollLoop(
      async () => {
        await media.retryStoreFailures();
      },
      () => intervalSec * 1000,
      new FailureStreak(log, 'media store retry'),
    );
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }
}
