import { MetarelayError } from '../util/error.ts';
/**
 * One node's call budget: how many calls a second it takes, learnt from its 429s, and who calls first
 * when the budget is short.
 *
 * A hosted provider's plan caps calls per second and answers HTTP 429 beyond. Without pacing, every
 * loop of the service (the dispatcher's sweeps, the watcher, the indexer) spends the budget as fast as
 * it likes, each 429 is retried (viem, then the caller), and the user's own request is the one that meets
 * the refusal. Here every call waits for a slot of the learnt rate, by priority:
 *   0 (urgent): intake (a client is waiting) and broadcasts;
 *   1 (receipts): the head, receipts and the engine's other reads for the work in flight;
 *   2 (background): sender nonces and balances, the watcher, the indexer, metadata reads.
 * A lower priority is served only while no higher one waits, so background reads slow down first. A 429
 * is not handed to the caller: it lowers the rate and the call waits for its next slot, within its wait
 * bound. A client's call waits at most `maxWaitMs` (a few seconds): when the queue ahead of it cannot be
 * served in that time it is refused at once (CallBudgetError, which the API answers 503 + Retry-After),
 * rather than after the wait. Until a first 429 there is no limit and a call costs one comparison.
 *
 * The rate: at the first 429, 80 % of the calls sent in the second before it; at each later 429 (one a
 * second counts) three quarters of what it was; while calls wait and no 429 came for 5 s, it grows by a
 * tenth a second, so a budget that grows (or was underestimated) is found again. Five minutes without a
 * 429 forget the limit, and so does the first answer after 3 s of nothing but 429s (a node refusing
 * everything, whose calls meanwhile get their 429 as it comes). A burst is a quarter of a second's
 * worth: the provider's own window (one second, fixed or sliding) never sees more than the rate and a quarter.
 */

export type CallPriority = 0 | 1 | 2;
export const URGENT: CallPriority = 0;
export const RECEIPTS: CallPriority = 1;
export const BACKGROUND: CallPriority = 2;

/** How a call is to wait: its priority, and the longest it may wait for a slot (undefined: until its caller's timeout). */
export interface CallClass {
  priority: CallPriority;
  maxWaitMs?: number;
}

/** A call that did not get a slot of the node's budget in time: the node is rate-limiting us. */
export class CallBudgetError extends MetarelayError {
  override readonly name = 'CallBudgetError';
  constructor(
    readonly chainId: number,
    /** Seconds after which a slot is likely (what a client is told in Retry-After). */
    readonly retryAfterS: number,
    message: string,
  ) {
    super(message, { kind: 'rate-limited', retryable: true, docsPath: 'production.md#a-providers-rate-limit' });
  }
}

interface Waiter {
  n: number;
  deadline: number;
  resolve: () => void;
  reject: (err: unknown) => void;
  signal?: AbortSignal;
  onAbort?: () => void;
}

/** A share of the calls sent in the second before the first 429. */
const FIRST_SHARE = 0.8;
/** What each later 429 leaves of the rate. */
const CUT = 0.75;
/** A 429 lowers the rate at most this often: the calls in flight when the first came meet the same window. */
const CUT_EVERY_MS = 1_000;
/** Growth while calls wait and no 429 came for GROW_AFTER_MS: a tenth of the rate a second, half a call at least. */
const GROW_AFTER_MS = 5_000;
const GROW_SHARE = 0.1;
/**
 * 429s for this long with no answer at all: the node refuses everything (a spent quota, a plan over), not
 * a rate to pace to. Calls meeting a 429 then get it at once (their callers' own retries and outage
 * handling take over), and the first answer after it forgets the limit, so the budget starts afresh.
 */
const REFUSING_ALL_MS = 3_000;
/** No 429 for this long: the limit is forgotten. */
const FORGET_AFTER_MS = 300_000;
/** Retry-After honoured up to this: a provider asking for a minute still gets our clients' calls tried sooner. */
const MAX_PAUSE_MS = 2_000;
/** The longest a call without a bound and without a signal waits (a caller's timeout normally ends it first). */
const MAX_UNBOUNDED_WAIT_MS = 30_000;
const MIN_RATE = 1;

export class CallBudget {
  /** Calls a second; undefined until the node first refused one. */
  private rate: number | undefined;
  private tokens = 0;
  private refilledAt = 0;
  private pausedUntil = 0;
  private limitedAt = 0;
  /** The first 429 since the node last answered (0: it answered since). */
  private refusingSince = 0;
  /** The same, per method (a batch: its methods together): a provider that refuses one method while it answers the rest. */
  private readonly methodRefusingSince = new Map<string, number>();
  private cutAt = 0;
  private grownAt = 0;
  /** When each of the calls sent in the last second went (for the first estimate). */
  private sent: number[] = [];
  private readonly queues: Waiter[][] = [[], [], []];
  private timer?: NodeJS.Timeout;

  constructor(
    readonly chainId: number,
    readonly name: string,
  ) {}

  /** The learnt rate (calls a second), undefined while no limit is known. */
  get callsPerSec(): number | undefined {
    this.forgetIfStale(Date.now());
    return this.rate;
  }

  /** Calls waiting for a slot, by priority. */
  get waiting(): number[] {
    return this.queues.map((q) => q.length);
  }

  /**
   * Waits for a slot for `n` calls of class `c`; throws CallBudgetError when none comes within its bound,
   * counted from `since` (a call sent again after a 429 waits within what is left of its bound).
   */
  acquire(n: number, c: CallClass, signal?: AbortSignal | null, since = Date.now()): Promise<void> {
    const now = Date.now();
    this.forgetIfStale(now);
    // Not paced while the node refuses everything: its first answer ends the spell (see REFUSING_ALL_MS).
    if (this.rate === undefined || this.refusingAll) {
      this.note(now, n);
      return Promise.resolve();
    }
    this.refill(now);
    if (now >= this.pausedUntil && this.queuedAtOrAbove(c.priority) === 0 && this.tokens >= Math.min(n, this.burst)) {
      this.tokens -= n;
      this.note(now, n);
      return Promise.resolve();
    }
    const bound = (c.maxWaitMs ?? (signal ? Number.POSITIVE_INFINITY : MAX_UNBOUNDED_WAIT_MS)) - (now - since);
    // A bounded caller is refused now when the calls ahead of it cannot all go within its bound.
    const expected = this.expectedWaitMs(now, c.priority, n);
    if (expected > bound) return Promise.reject(this.refusal(expected));
    return new Promise<void>((resolve, reject) => {
      const w: Waiter = { n, deadline: now + bound, resolve, reject, signal: signal ?? undefined };
      if (signal) {
        w.onAbort = () => {
          this.remove(w);
          reject(this.refusal(this.expectedWaitMs(Date.now(), c.priority, n), 'the call timed out waiting for a slot of'));
        };
        signal.addEventListener('abort', w.onAbort, { once: true });
      }
      this.queues[c.priority]!.push(w);
      this.schedule();
    });
  }

  /** The node answered 429 to `n` calls: the rate is learnt or lowered, and nothing more goes before `retryAfterS`. */
  refused(n: number, retryAfterS: number | undefined): void {
    const now = Date.now();
    this.limitedAt = now;
    if (this.refusingSince === 0) this.refusingSince = now;
    if (this.rate === undefined) {
      this.trim(now);
      // The refused calls were over the budget: they do not count in what it carried.
      const carried = Math.max(0, this.sent.length - n);
      this.rate = Math.max(MIN_RATE, carried * FIRST_SHARE);
      this.cutAt = now;
      this.tokens = 0;
      this.refilledAt = now;
    } else if (now - this.cutAt >= CUT_EVERY_MS) {
      this.rate = Math.max(MIN_RATE, this.rate * CUT);
      this.cutAt = now;
      this.tokens = Math.min(this.tokens, 0);
    }
    this.pausedUntil = Math.max(this.pausedUntil, now + Math.min(MAX_PAUSE_MS, (retryAfterS ?? 1) * 1_000));
    this.schedule();
  }

  /** Whether the node has refused every call for REFUSING_ALL_MS. */
  get refusingAll(): boolean {
    return this.refusingSince > 0 && Date.now() - this.refusingSince >= REFUSING_ALL_MS;
  }

  /** The node answered (anything but a 429). After a spell of refusing everything, the limit is forgotten. */
  answered(): void {
    if (this.refusingSince === 0) return;
    const wasRefusingAll = this.refusingAll;
    this.refusingSince = 0;
    if (wasRefusingAll) this.forget();
  }

  /** A fetch that waits for a slot before each request and sends a request the node refused with 429 again in its next slot. */
  fetch(base: Fetch, classOf: (methods: string[]) => CallClass): Fetch {
    const send = async (input: string | URL | Request, init: RequestInit | undefined, n: number, c: CallClass, key: string): Promise<Response> => {
      const since = Date.now();
      for (;;) {
        // A method the node has refused alone for a while goes as it comes, and its 429 back to the caller:
        // it is no rate to pace the other calls to.
        const first = this.methodRefusingSince.get(key);
        const methodRefused = first !== undefined && Date.now() - first >= REFUSING_ALL_MS;
        if (!methodRefused) await this.acquire(n, c, init?.signal, since);
        const res = await base(input, init);
        if (res.status !== 429) {
          this.methodRefusingSince.delete(key);
          this.answered();
          return res;
        }
        if (methodRefused) return res;
        if (first === undefined) this.methodRefusingSince.set(key, Date.now());
        this.refused(n, retryAfterOf(res.headers.get('retry-after')));
        if (this.refusingAll) return res;
        // Its body is not read: the connection is freed for the next request.
        await res.body?.cancel().catch(() => undefined);
      }
    };
    return async (input, init) => {
      const methods = methodsIn(init?.body);
      const c = classOf(methods);
      const n = Math.max(1, methods.length);
      const key = [...new Set(methods)].sort().join(',');
      const most = this.rate === undefined ? n : Math.max(1, Math.floor(this.burst * 2));
      if (n <= most || typeof init?.body !== 'string') return send(input, init, n, c, key);
      return this.sendInParts(init.body, most, (body, k) => send(input, { ...init, body }, k, c, key));
    };
  }

  /**
   * A batch larger than the budget lets go at once, sent as parts that each wait for their slots: a
   * provider counting calls a second refuses a batch of 16 under a limit of 10 however long it waited.
   * The answers are put back together as one array; a part answered otherwise (an HTTP error, a single
   * error object) is the answer of the whole batch, as the node would have given it.
   */
  private async sendInParts(body: string, most: number, send: (body: string, n: number) => Promise<Response>): Promise<Response> {
    let members: unknown[];
    try {
      members = JSON.parse(body) as unknown[];
    } catch {
      return send(body, 1);
    }
    if (!Array.isArray(members)) return send(body, 1);
    const answers: unknown[] = [];
    for (let i = 0; i < members.length; i += most) {
      const part = members.slice(i, i + most);
      const res = await send(JSON.stringify(part), part.length);
      if (res.status !== 200) return res;
      const text = await res.text();
      let got: unknown;
      try {
        got = JSON.parse(text);
      } catch {
        got = undefined;
      }
      if (!Array.isArray(got)) return new Response(text, { status: res.status, headers: res.headers });
      answers.push(...got);
    }
    return new Response(JSON.stringify(answers), { status: 200, headers: { 'content-type': 'application/json' } });
  }

  private get burst(): number {
    return Math.max(1, (this.rate ?? 0) / 4);
  }

  /** Counts calls sent while no limit is known: what the first 429 learns the rate from. */
  private note(now: number, n: number) {
    if (this.rate !== undefined) return;
    for (let i = 0; i < n; i++) this.sent.push(now);
    if (this.sent.length > 4_096) this.trim(now);
  }

  private trim(now: number) {
    const from = this.sent.findIndex((t) => now - t < 1_000);
    this.sent = from < 0 ? [] : this.sent.slice(from);
  }

  private forgetIfStale(now: number) {
    if (this.rate !== undefined && now - this.limitedAt > FORGET_AFTER_MS && this.queues.every((q) => q.length === 0)) this.forget();
  }

  /** No limit known any more: every waiting call goes now. */
  private forget() {
    this.rate = undefined;
    this.sent = [];
    this.pausedUntil = 0;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    for (const q of this.queues) for (const w of q.splice(0)) this.settle(w);
  }

  private refill(now: number) {
    if (this.rate === undefined) return;
    const grow = this.queues.some((q) => q.length > 0) && now - this.limitedAt > GROW_AFTER_MS && now - this.grownAt >= 1_000;
    if (grow) {
      this.rate += Math.max(0.5, this.rate * GROW_SHARE);
      this.grownAt = now;
    }
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.refilledAt) / 1_000) * this.rate);
    this.refilledAt = now;
  }

  private queuedAtOrAbove(priority: CallPriority): number {
    let k = 0;
    for (let p = 0; p <= priority; p++) k += this.queues[p]!.length;
    return k;
  }

  /** How long a call of `priority` for `n` slots would wait behind the calls queued at its priority and above. */
  private expectedWaitMs(now: number, priority: CallPriority, n: number): number {
    if (this.rate === undefined) return 0;
    let ahead = n - this.tokens;
    for (let p = 0; p <= priority; p++) for (const w of this.queues[p]!) ahead += w.n;
    return Math.max(0, this.pausedUntil - now) + (Math.max(0, ahead) / this.rate) * 1_000;
  }

  private refusal(expectedMs: number, what = 'no call slot within its wait for'): CallBudgetError {
    const retryAfterS = Math.max(1, Math.ceil(expectedMs / 1_000));
    return new CallBudgetError(this.chainId, retryAfterS, `rate-limited by the node: ${what} ${this.name}'s budget of ${(this.rate ?? 0).toFixed(1)} calls/s (HTTP 429 learnt)`);
  }

  private remove(w: Waiter) {
    for (const q of this.queues) {
      const i = q.indexOf(w);
      if (i >= 0) q.splice(i, 1);
    }
  }

  /** Lets out every waiter whose slot has come, highest priority first, and times the next look. */
  private pump = () => {
    this.timer = undefined;
    const now = Date.now();
    this.refill(now);
    for (const q of this.queues) {
      for (let i = 0; i < q.length; ) {
        const w = q[i]!;
        if (now > w.deadline) {
          q.splice(i, 1);
          this.settle(w, this.refusal(0));
        } else i++;
      }
    }
    if (now >= this.pausedUntil) {
      for (const q of this.queues) {
        while (q.length > 0 && this.tokens >= Math.min(q[0]!.n, this.burst)) {
          const w = q.shift()!;
          this.tokens -= w.n;
          this.note(now, w.n);
          this.settle(w);
        }
        // A lower priority waits while a higher one does.
        if (q.length > 0) break;
      }
    }
    this.schedule();
  };

  private settle(w: Waiter, err?: unknown) {
    if (w.onAbort) w.signal?.removeEventListener('abort', w.onAbort);
    if (err) w.reject(err);
    else w.resolve();
  }

  private schedule() {
    if (this.timer || this.rate === undefined) return;
    const first = this.queues.find((q) => q.length > 0)?.[0];
    if (!first) return;
    const now = Date.now();
    const need = Math.min(first.n, this.burst) - this.tokens;
    const forTokens = need > 0 ? (need / this.rate) * 1_000 : 0;
    const soonestDeadline = Math.min(...this.queues.flatMap((q) => q.map((w) => w.deadline)));
    const at = Math.min(Math.max(this.pausedUntil, now + forTokens), soonestDeadline + 1);
    this.timer = setTimeout(this.pump, Math.max(1, at - now));
    this.timer.unref?.();
  }
}

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** The JSON-RPC methods in a request body (one, or several for a batch). */
export function methodsIn(body: unknown): string[] {
  if (typeof body !== 'string') return [];
  return [...body.matchAll(/"method"\s*:\s*"([A-Za-z0-9_]+)"/g)].map((m) => m[1]!);
}

/** A Retry-After header's seconds (delta form; a date is read as unknown). */
export function retryAfterOf(header: string | null): number | undefined {
  if (!header) return undefined;
  const s = Number(header);
  return Number.isFinite(s) && s >= 0 ? Math.min(Math.ceil(s), 300) : undefined;
}
