import { causeOf } from './cause.ts';

interface StreakLog {
  warn(fields: object, msg: string): void;
  info(fields: object, msg: string): void;
  debug(fields: object, msg: string): void;
}

/**
 * What a background loop says about its failures: one line when they begin, with the cause, and one
 * when it works again (how long, how many tries), however often it tries in between (those are
 * debug lines). A loop that warned at every poll filled the log while a chain was down (530 of 542
 * lines of a 12-minute run: one every 2 s per loop per chain, and none said why).
 *
 * `elsewhere`: the failure is an outage already told (a chain's node is down: its health logged
 * `chain node unreachable` once with the cause): the loop's own start line is then `info`, not a
 * second warning.
 */
export class FailureStreak {
  private since: number | null = null;
  private failures = 0;
  private cause = '';

  constructor(
    private readonly log: StreakLog,
    /** What failed, as the log says it: "chain watcher poll". */
    private readonly what: string,
    private readonly fields: Record<string, unknown> = {},
    private readonly elsewhere?: () => boolean,
  ) {}

  get failing(): boolean {
    return this.since !== null;
  }

  failed(err: unknown): void {
    this.failures++;
    const cause = causeOf(err);
    if (this.since !== null) {
      this.log.debug({ ...this.fields, cause, failures: this.failures }, `${this.what} still failing`);
      return;
    }
    this.since = Date.now();
    this.cause = cause;
    const fields = { ...this.fields, cause };
    const msg = `${this.what} failing: retried quietly until it works again`;
    if (this.elsewhere?.()) this.log.info(fields, msg);
    else this.log.warn(fields, msg);
  }

  succeeded(): void {
    if (this.since === null) return;
    this.log.info({ ...this.fields, failures: this.failures, downMs: Date.now() - this.since, cause: this.cause }, `${this.what} working again`);
    this.since = null;
    this.failures = 0;
    this.cause = '';
  }
}
