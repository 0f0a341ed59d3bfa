/** When serve writes a request line: what the `requestLog` config says, decided per answered request. */
export interface RequestLogPolicy {
  successPerSec: number | 'all';
  slowMs: number;
}

/**
 * Errors and slow requests are always worth a line; a busy server's successful reads are not (each line
 * is a JSON serialisation, a redaction pass and a write). Successes get at most `successPerSec` lines in
 * each wall-clock second, so the log still shows that traffic flows and what it looks like.
 */
export class RequestLogSampler {
  private second = 0;
  private used = 0;
  /** Successful requests not logged since the last line that was, reported on the next one. */
  private skipped = 0;

  constructor(private readonly policy: RequestLogPolicy) {}

  /** Whether to log this request; `skipped` is then how many successes were left out before it. */
  take(status: number, ms: number, now = Date.now()): { log: boolean; skipped: number } {
    if (status >= 400 || ms >= this.policy.slowMs || this.policy.successPerSec === 'all') return this.logged();
    const sec = Math.floor(now / 1000);
    if (sec !== this.second) {
      this.second = sec;
      this.used = 0;
    }
    if (this.used < this.policy.successPerSec) {
      this.used++;
      return this.logged();
    }
    this.skipped++;
    return NOT;
  }

  private logged(): { log: boolean; skipped: number } {
    const skipped = this.skipped;
    this.skipped = 0;
    return { log: true, skipped };
  }
}

const NOT = Object.freeze({ log: false, skipped: 0 });
