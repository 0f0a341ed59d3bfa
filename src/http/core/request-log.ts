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

type Tallied = { add<A, B>(key: string, labels: (a: A, b: B) => Record<string, string>, a: A, b: B): void };
interface LineLog {
  info(obj: object, msg: string): void;
}

export interface RequestLine {
  reqId: string;
  method: string | undefined;
  url: string | undefined;
  remoteAddress: string | undefined;
}

const httpLabels = (route: string, status: number) => ({ route, status: String(status) });

/**
 * What every answered request leaves behind, however it was answered (the router's onResponse hook,
 * or an answer given before routing): its count per (route, status), and in serve its request line.
 * The count is a plain number per key, added to the counter when it is read (telemetry/tally.ts).
 * The line is written by the root logger with the request id, so the request's own child logger is
 * never made; the URL goes through the logger's redaction like every line (?accessKey= is masked).
 * Successful requests are sampled (config requestLog); errors and slow ones always get their line.
 */
export class RequestRecorder {
  private readonly sampler: RequestLogSampler;

  /** The count's key per route and status, made once (a template string per request showed in profiles). */
  private readonly keys = new Map<string, Map<number, string>>();

  private keyOf(route: string, status: number): string {
    let byStatus = this.keys.get(route);
    if (!byStatus) this.keys.set(route, (byStatus = new Map()));
    let key = byStatus.get(status);
    if (key === undefined) byStatus.set(status, (key = `${status} ${route}`));
    return key;
  }

  constructor(
    private readonly counted: Tallied,
    policy: RequestLogPolicy,
    private readonly log: LineLog | undefined,
  ) {
    this.sampler = new RequestLogSampler(policy);
  }

  /** `line(subject)` is called only when the line is written (a function and its argument, not a closure per request). */
  record<T>(route: string, status: number, ms: number, line: (subject: T) => RequestLine, subject: T) {
    this.counted.add(this.keyOf(route, status), httpLabels, route, status);
    if (!this.log) return;
    const take = this.sampler.take(status, ms);
    if (!take.log) return;
    const l = { ...line(subject), statusCode: status, ms: Math.round(ms * 10) / 10 };
    if (take.skipped) this.log.info({ ...l, unloggedBefore: take.skipped }, 'request');
    else this.log.info(l, 'request');
  }
}
