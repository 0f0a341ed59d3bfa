import type { Logger } from '../telemetry/logger.ts';
import { deliveryBody, type EventBell, type Outbox } from './outbox.ts';
import type { Poster } from '../untrusted/post.ts';
import { SIGNATURE_HEADER, signatureHeader } from './signature.ts';
import type { ClaimedDelivery, ClaimSkip, Settled, WebhookStore } from './webhook-store.ts';
import { PollLoop } from '../util/poll-loop.ts';
import { FailureStreak } from '../util/failure-streak.ts';
import { ownerId } from '../util/owner-id.ts';
import { failureLevel } from '../store/outage.ts';
import type { Role } from '../store/leadership.ts';

export interface DeliverySettings {
  deadlineMs: number;
  retryHorizonSec: number;
  retryBaseMs: number;
  disableAfterSec: number;
  concurrency: number;
  /** Deliveries to one endpoint this worker sends at once; default half of `concurrency` (rounded up). */
  maxInFlightPerEndpoint?: number;
  /** Deliveries to one project's endpoints this worker sends at once; default three quarters of `concurrency` (rounded up). */
  maxInFlightPerProject?: number;
  pollMs: number;
  retentionSec: number;
}

const MAX_DELAY_MS = 3_600_000;
const PRUNE_EVERY_MS = 60_000;

/** When the next attempt goes after `attempts` failed ones: base·2^(n-1), capped at an hour, ±50 % jitter; null past the horizon. */
export function nextAttemptAt(attempts: number, firstAt: Date, s: Pick<DeliverySettings, 'retryBaseMs' | 'retryHorizonSec'>, now = Date.now(), rand = Math.random): Date | null {
  const base = Math.min(s.retryBaseMs * 2 ** Math.min(attempts - 1, 30), MAX_DELAY_MS);
  const at = now + Math.round(base * (0.5 + rand()));
  return at > firstAt.getTime() + s.retryHorizonSec * 1000 ? null : new Date(at);
}

/** How soon settled deliveries are written when no claim comes to take them along (a slow receiver's lanes). */
const SETTLE_WITHIN_MS = 100;
/** How often the outbox is sequenced here: the SSE hub sequences for its own readers; this keeps it moving (and prunable) without them. */
const SEQUENCE_EVERY_MS = 1_000;
/**
 * How often a worker that is not the fleet's poller claims without being rung: a safety net only (the
 * poller claims every pollMs whatever any process wrote).
 */
const UNLED_POLL_MS = 30_000;
/** A claimed delivery is sent only with this much of its lease left after the deadline, for its outcome to be written in it. */
const RECORD_MARGIN_MS = 2_000;

interface Claimed extends ClaimedDelivery {
  /** performance.now() until which the lease surely holds (counted from before the claim was sent: the database's now() is later). */
  leaseEnds: number;
}

/**
 * Sends due webhook deliveries: claims a batch (any process may run one of these: the claim is
 * SKIP LOCKED with a lease longer than the deadline), POSTs each signed, and records the outcomes.
 * One statement per wake (webhook-store.ts claim()) writes what was delivered since the last one and
 * claims the next batch with its events' payloads; failures are written one by one (record()), since
 * they hold back their subject and may disable the endpoint. Also sequences the outbox and prunes it.
 */
export class DeliveryWorker {
  readonly owner = ownerId();
  private readonly loop: PollLoop;
  /** Called on nudge(): lanes of a pass in progress that wait on slow deliveries claim again at once. */
  private nudged: (() => void) | undefined;
  private prunedAt = 0;
  private sequencedAt = 0;
  private offBell: (() => void) | undefined;
  /** Claims every pollMs and keeps the outbox (pollRole); otherwise only when rung. */
  private polling = true;
  /** Delivered or released since the last statement, for the next one to write. */
  private settled: Settled[] = [];
  private settleTimer: NodeJS.Timeout | undefined;
  private writing: Promise<void> | undefined;

  constructor(private readonly deps: { store: WebhookStore; outbox: Outbox; post: Poster; bell: EventBell; log: Logger; settings: DeliverySettings }) {
    // A full batch means more may be due: the next pass runs at once.
    this.loop = new PollLoop(
      () => this.pass(),
      () => (this.polling ? this.deps.settings.pollMs : UNLED_POLL_MS),
      new FailureStreak(this.deps.log, 'webhook delivery pass'),
    );
  }

  /**
   * The fleet's one poller (the `webhook-poll` role, store/leadership.ts): the process that leads it
   * claims every pollMs (deliveries due again, and what another process wrote and its own claim missed)
   * and sequences and prunes the outbox; the other processes claim when one of their own events makes
   * deliveries (the bell), so a fleet's idle workers cost one claim per UNLED_POLL_MS, not four a second.
   * Until leadOnly() a worker polls as the only one.
   */
  readonly pollRole: Role = {
    start: () => {
      this.polling = true;
      this.nudge();
    },
    stop: async () => {
      this.polling = false;
    },
  };

  /** Before start(): this worker will poll only while it leads pollRole (once started, a call changes nothing). */
  leadOnly(): void {
    if (!this.loop.active) this.polling = false;
  }

  start() {
    if (this.loop.active) return;
    // The bell rings as an event is written, before its transaction commits: look a moment later too.
    this.offBell = this.deps.bell.on((deliveries) => {
      if (!deliveries) return;
      this.nudge();
      setTimeout(() => this.nudge(), 5).unref();
    });
    this.loop.start();
  }

  async stop() {
    if (!this.loop.active) return;
    this.offBell?.();
    const stopping = this.loop.stop();
    // Lanes waiting on slow deliveries look again now (and, the loop stopped, claim nothing more).
    this.nudged?.();
    await stopping;
    // A pass writes what it settled before it ends; a write the timer started may still be running.
    await this.writeSettled();
  }

  nudge() {
    this.loop.wake();
    this.nudged?.();
  }

  private get leaseSec() {
    // The lease outlives the deadline by a margin, so no other worker takes a claim whose POST may still run.
    return Math.ceil(this.deps.settings.deadlineMs / 1000) + 5;
  }

  /** One statement: writes what is settled, claims up to `limit` more (0: only writes), none for the endpoints and projects in `skip`. */
  private async wake(limit: number, skip?: ClaimSkip): Promise<Claimed[]> {
    const batch = this.settled.splice(0);
    clearTimeout(this.settleTimer);
    this.settleTimer = undefined;
    const sent = performance.now();
    try {
      const rows = await this.deps.store.claim(this.owner, limit, this.leaseSec, batch, skip);
      return rows.map((d) => ({ ...d, leaseEnds: sent + this.leaseSec * 1000 }));
    } catch (err) {
      // Not written (the statement rolled back as a whole): still ours to write with the next statement,
      // the poll loop's next claim (no timer of its own: with the database down it would retry and log
      // every 100 ms). Until then they stay claimed; should the lease run out first, they are sent again
      // (at least once).
      this.settled.unshift(...batch);
      throw err;
    }
  }

  /** Writes what is settled; calls while a write runs share it, and what settles meanwhile goes in a next statement. */
  private writeSettled(): Promise<void> {
    if (this.writing) return this.writing;
    if (this.settled.length === 0) return Promise.resolve();
    const w = (async () => {
      try {
        while (this.settled.length) await this.wake(0);
      } catch (err) {
        this.deps.log.error({ err }, 'webhook delivery: recording delivered attempts failed');
      }
    })();
    this.writing = w;
    void w.finally(() => {
      if (this.writing === w) this.writing = undefined;
    });
    return w;
  }

  private settle(item: Settled) {
    this.settled.push(item);
    this.settleTimer ??= setTimeout(() => {
      this.settleTimer = undefined;
      void this.writeSettled();
    }, SETTLE_WITHIN_MS);
  }

  private async maintain() {
    if (!this.polling) return;
    const s = this.deps.settings;
    if (Date.now() - this.sequencedAt > SEQUENCE_EVERY_MS) {
      this.sequencedAt = Date.now();
      await this.deps.outbox.sequence();
    }
    if (Date.now() - this.prunedAt > PRUNE_EVERY_MS) {
      this.prunedAt = Date.now();
      await this.deps.outbox.prune(s.retentionSec);
    }
  }

  /** The lanes one endpoint and one project may hold at once (DeliverySettings). */
  static caps(s: Pick<DeliverySettings, 'concurrency' | 'maxInFlightPerEndpoint' | 'maxInFlightPerProject'>) {
    return { endpoint: s.maxInFlightPerEndpoint ?? Math.ceil(s.concurrency / 2), project: s.maxInFlightPerProject ?? Math.ceil((s.concurrency * 3) / 4) };
  }

  /**
   * Claims and sends until nothing is due or in flight; true when the last claim was full (more may be
   * due). One endpoint holds at most `maxInFlightPerEndpoint` of the lanes and one project at most
   * `maxInFlightPerProject`: a receiver that answers only at the deadline, or a project with many of
   * them, cannot take every lane, and while its deliveries hang the free lanes go on claiming (without
   * it, at its cap) and sending to the others, on a nudge (a new event) or every pollMs. A free lane
   * takes the claimed delivery of the project with the fewest in flight (claim order among equals):
   * another project's delivery does not wait behind a backlog already claimed.
   */
  async pass(): Promise<boolean> {
    const s = this.deps.settings;
    await this.maintain();
    const size = s.concurrency * 4;
    const caps = DeliveryWorker.caps(s);
    // Claimed and not yet sent, in claim order. The next claim is made while the last of this one is still
    // being sent, so the lanes do not all wait for the slowest POST of a batch before the next batch is
    // read. One claim at a time; a later event of a subject in flight is not claimed (it is still
    // pending), so per-subject order holds.
    const queue: Claimed[] = [];
    const inFlight = new Map<number, number>();
    const projectInFlight = new Map<number, number>();
    const atCap = (d: Claimed) => (inFlight.get(d.webhookId) ?? 0) >= caps.endpoint || (projectInFlight.get(d.projectId) ?? 0) >= caps.project;
    /** The queued delivery a free lane sends next: of the project with the fewest in flight, the first claimed; -1: none may go. */
    const next = () => {
      let best = -1;
      let fewest = Number.POSITIVE_INFINITY;
      for (let i = 0; i < queue.length; i++) {
        const d = queue[i]!;
        const n = projectInFlight.get(d.projectId) ?? 0;
        if (n < fewest && !atCap(d)) [best, fewest] = [i, n];
        if (fewest === 0) break;
      }
      return best;
    };
    let sending = 0;
    /** The last claim that skipped no endpoint came back full: more may be due. */
    let full = true;
    /** When a claim last skipped endpoints at their cap (at most one per pollMs, or on a nudge). */
    let skippedAt = Number.NEGATIVE_INFINITY;
    let claiming: Promise<void> | undefined;
    const claim = () => {
      if (claiming || !this.loop.active) return;
      const skip = {
        webhooks: [...inFlight].filter(([, n]) => n >= caps.endpoint).map(([id]) => id),
        projects: [...projectInFlight].filter(([, n]) => n >= caps.project).map(([id]) => id),
      };
      const skipping = skip.webhooks.length + skip.projects.length > 0;
      // With an endpoint at its cap, a claim is only for other endpoints' events, which may not exist:
      // asked at the poll's pace, not on every delivery that ends. Its rows say nothing of `full`.
      if (skipping ? performance.now() - skippedAt < s.pollMs : !full) return;
      if (skipping) skippedAt = performance.now();
      const wait = this.writing ?? Promise.resolve();
      claiming = wait
        .then(() => this.wake(size, skip))
        .then((more) => {
          queue.push(...more);
          if (!skipping) full = more.length === size;
          if (more.length > 0) stir();
        })
        .catch((err) => {
          full = false;
          this.deps.log[failureLevel(err, 'error')]({ err }, 'webhook delivery claim failed');
        })
        .finally(() => (claiming = undefined));
    };
    // Lanes with nothing to send wait here for a delivery to end, a nudge, or pollMs; then claim again.
    const waiting: Array<() => void> = [];
    /** Wakes every waiting lane (`one`: the longest waiting only). */
    const stir = (one = false) => {
      const w = one ? waiting.splice(0, 1) : waiting.splice(0);
      for (const f of w) f();
    };
    this.nudged = () => {
      full = true;
      skippedAt = Number.NEGATIVE_INFINITY;
      stir();
    };
    const idle = () =>
      new Promise<void>((r) => {
        const t = setTimeout(() => {
          full = true;
          r();
        }, s.pollMs);
        waiting.push(() => {
          clearTimeout(t);
          r();
        });
      });
    const lane = async () => {
      for (;;) {
        if (queue.filter((d) => !atCap(d)).length < s.concurrency) claim();
        const i = next();
        if (i >= 0) {
          const d = queue.splice(i, 1)[0]!;
          inFlight.set(d.webhookId, (inFlight.get(d.webhookId) ?? 0) + 1);
          projectInFlight.set(d.projectId, (projectInFlight.get(d.projectId) ?? 0) + 1);
          sending++;
          try {
            await this.deliver(d);
          } finally {
            sending--;
            inFlight.set(d.webhookId, inFlight.get(d.webhookId)! - 1);
            projectInFlight.set(d.projectId, projectInFlight.get(d.projectId)! - 1);
            // This lane takes the next delivery itself; a lane waiting may take one of this endpoint's now,
            // and with nothing in flight any more the waiting lanes end the pass.
            stir(sending > 0);
          }
          continue;
        }
        if (claiming) {
          await claiming;
          continue;
        }
        // Nothing to send now: done unless deliveries are still in flight (the queue then holds only
        // endpoints at their cap, or nothing), in which case the lane waits to claim or send again.
        if (sending === 0 || !this.loop.active) return;
        await idle();
      }
    };
    try {
      claim();
      await claiming;
      await Promise.all(Array.from({ length: s.concurrency }, lane));
    } finally {
      this.nudged = undefined;
      stir();
    }
    // Claimed but not sent (the worker stops): given back with the settled ones.
    for (const d of queue.splice(0)) this.settle({ id: d.id, status: 0, ms: 0, snippet: '' });
    // Nothing is left unwritten when a pass ends (a redelivery would be a duplicate, not a loss).
    await this.writeSettled();
    return full;
  }

  private async deliver(d: Claimed) {
    const s = this.deps.settings;
    // Behind a slow receiver a claimed delivery may wait in the queue: one whose lease could run out
    // before its answer is written goes back unsent, for another claim, rather than risk being sent
    // by two workers at once.
    if (performance.now() + s.deadlineMs + RECORD_MARGIN_MS > d.leaseEnds) return this.settle({ id: d.id, status: 0, ms: 0, snippet: '' });
    const body = JSON.stringify(deliveryBody(d.event));
    const t = Math.floor(Date.now() / 1000);
    const res = await this.deps.post(
      d.url,
      body,
      {
        'metarelay-event-id': `evt_${d.event.id}`,
        'metarelay-event-type': d.event.type,
        'metarelay-delivery-id': String(d.id),
        'metarelay-attempt': String(d.attempts),
        'metarelay-timestamp': String(t),
        [SIGNATURE_HEADER]: signatureHeader(d.secret, t, body),
      },
      s.deadlineMs,
    );
    const ok = !res.error && res.status >= 200 && res.status < 300;
    // Written with the next statement; the lane does not wait for it.
    if (ok) return this.settle({ id: d.id, status: res.status, ms: res.ms, snippet: res.body.slice(0, 500) });
    const error = res.error ?? `HTTP ${res.status}`;
    const retryAt = nextAttemptAt(d.attempts, d.firstAt, s);
    const out = await this.deps.store.record(
      this.owner,
      { id: d.id, webhookId: d.webhookId, subject: d.event.subject },
      { ok, status: res.status, error, ms: res.ms, snippet: res.body.slice(0, 500), retryAt, disableAfterSec: s.disableAfterSec },
    );
    // The URL may carry a token in its path or query: log the endpoint by id only.
    this.deps.log.info({ webhookId: d.webhookId, deliveryId: d.id, attempt: d.attempts, status: res.status, error, deadLettered: retryAt == null }, 'webhook delivery failed');
    if (out.disabled) this.deps.log.warn({ webhookId: d.webhookId }, `webhook endpoint disabled: every delivery failed for ${s.disableAfterSec} s`);
  }
}
