import type { Logger } from '../telemetry/logger.ts';
import { PollLoop } from '../util/poll-loop.ts';
import { FailureStreak } from '../util/failure-streak.ts';
import type { MediaService } from './service.ts';

/**
 * Runs the media orphan sweep every `intervalSec` in the background process (worker, or serve/dev with
 * the in-process worker). Normal operation collects a blob as soon as its last asset lets go of it;
 * this only finds what a crash between two steps left behind, so once an hour is plenty.
 */
export class MediaOrphanSweep {
  private readonly loop: PollLoop;
  /** What the sweeps collected since start (tests and logs). */
  readonly collected = { rows: 0, originals: 0, renditions: 0, sweeps: 0 };

  private first = true;

  constructor(media: MediaService, settings: { intervalSec: number; graceSec: number }, log: Logger) {
    this.loop = new PollLoop(
      async () => {
        // Not at boot: a fleet restarting would list the whole blob store once per process.
        if (this.first) {
          this.first = false;
          return;
        }
        const r = await media.sweepOrphans(settings.graceSec);
        this.collected.rows += r.rows;
        this.collected.originals += r.originals;
        this.collected.renditions += r.renditions;
        this.collected.sweeps++;
      },
      () => settings.intervalSec * 1000,
      new FailureStreak(log, 'media orphan sweep'),
    );
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }
}
