import type { Logger } from '../telemetry/logger.ts';
import { deliveryBody, type EventBell, type Outbox } from './outbox.ts';
import type { Poster } from './post.ts';
import { SIGNATURE_HEADER, signatureHeader } from './signature.ts';
import type { ClaimedDelivery, WebhookStore } from './webhook-store.ts';
import { PollLoop } from '../util/poll-loop.ts';
import { ownerId } from '../util/owner-id.ts';

export interface DeliverySettings {
  deadlineMs: number;
  retryHorizonSec: number;
  retryBaseMs: number;
  disableAfterSec: number;
  concurrency: number;
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

/**
 * Sends due webhook deliveries: claims a batch (any process may run one of these: the claim is
 * SKIP LOCKED with a lease longer than the deadline), POSTs each signed, and records the outcome.
 * Also sequences the outbox for SSE readers and prunes it.
 */
export class DeliveryWorker {
  readonly owner = ownerId();
  private readonly loop: PollLoop;
  private prunedAt = 0;
  private offBell: (() => void) | undefined;

  constructor(private readonly deps: { store: WebhookStore; outbox: Outbox; post: Poster; bell: EventBell; log: Logger; settings: DeliverySettings }) {
    // A full batch means more may be due: the next pass runs at once.
    this.loop = new PollLoop(
      () => this.pass(),
      () => this.deps.settings.pollMs,
      (err) => this.deps.log.error({ err }, 'webhook delivery pass failed'),
    );
  }

  start() {
    if (this.loop.active) return;
    // The bell rings as an event is written, before its transaction commits: look a moment later too.
    this.offBell = this.deps.bell.on(() => {
      this.nudge();
      setTimeout(() => this.nudge(), 5).unref();
    });
    this.loop.start();
  }

  async stop() {
    if (!this.loop.active) return;
    this.offBell?.();
    await this.loop.stop();
  }

  nudge() {
    this.loop.wake();
  }

  /** One batch; true when it was full (more may be due). */
  async pass(): Promise<boolean> {
    const s = this.deps.settings;
    await this.deps.outbox.sequence();
    if (Date.now() - this.prunedAt > PRUNE_EVERY_MS) {
      this.prunedAt = Date.now();
      await this.deps.outbox.prune(s.retentionSec);
    }
    // The lease outlives the deadline by a margin, so no other worker takes a claim whose POST may still run.
    const lease = Math.ceil(s.deadlineMs / 1000) + 5;
    const size = s.concurrency * 4;
    const queue = await this.deps.store.claim(this.owner, size, lease);
    let full = queue.length === size;
    // The next claim is made while the last of this one is still being sent, so the lanes do not all
    // wait for the slowest POST of a batch before the next batch is read. One claim at a time; a later
    // event of a subject in flight is not claimed (it is still pending), so per-subject order holds.
    let refilling: Promise<void> | undefined;
    const refill = () => {
      if (!full || refilling || !this.loop.active) return;
      // SSE readers follow `seq`: a long run of refills sequences new events as a new pass would.
      refilling = this.deps.outbox
        .sequence()
        .then(() => this.deps.store.claim(this.owner, size, lease))
        .then((more) => {
          queue.push(...more);
          full = more.length === size;
        })
        .catch((err) => {
          full = false;
          this.deps.log.error({ err }, 'webhook delivery claim failed');
        })
        .finally(() => (refilling = undefined));
    };
    const lane = async () => {
      for (;;) {
        if (queue.length < s.concurrency) refill();
        const d = queue.shift();
        if (d) {
          await this.deliver(d);
          continue;
        }
        if (!refilling) return;
        await refilling;
      }
    };
    await Promise.all(Array.from({ length: s.concurrency }, lane));
    return full;
  }

  private delivered: { item: Parameters<WebhookStore['recordDelivered']>[1][number]; done: (err?: unknown) => void }[] = [];
  private flushing = false;

  /** Successes are written together: whatever finished while the previous write ran goes in the next one. */
  private recordDelivered(item: Parameters<WebhookStore['recordDelivered']>[1][number]): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.delivered.push({ item, done: (err) => (err ? reject(err) : resolve()) });
      void this.flush();
    });
  }

  private async flush() {
    if (this.flushing) return;
    this.flushing = true;
    try {
      while (this.delivered.length) {
        const batch = this.delivered.splice(0);
        try {
          await this.deps.store.recordDelivered(
            this.owner,
            batch.map((b) => b.item),
          );
          for (const b of batch) b.done();
        } catch (err) {
          for (const b of batch) b.done(err);
        }
      }
    } finally {
      this.flushing = false;
    }
  }

  private async deliver(d: ClaimedDelivery) {
    const s = this.deps.settings;
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
    const error = ok ? null : (res.error ?? `HTTP ${res.status}`);
    const retryAt = ok ? null : nextAttemptAt(d.attempts, d.firstAt, s);
    if (ok) return this.recordDelivered({ id: d.id, webhookId: d.webhookId, status: res.status, ms: res.ms, snippet: res.body.slice(0, 500) });
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
