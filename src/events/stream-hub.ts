import type { Logger } from '../telemetry/logger.ts';
import { FailureStreak } from '../util/failure-streak.ts';
import { streamMatches, type EventBell, type Outbox, type StoredEvent, type StreamFilter } from './outbox.ts';

const POLL_MS = 500;
const BATCH = 500;

export interface StreamSink {
  filter: StreamFilter;
  /** Writes one event to the client. */
  write(e: StoredEvent): void;
  /** Called once per poll without events, so the stream can send its keep-alive. */
  idle(): void;
}

/**
 * How a resumed stream catches up (issue 54): in pages of at most `span` outbox positions, each taken
 * from its client's read budget (`page` waits for it; false: the stream has ended, stop reading).
 */
export interface CatchUp {
  span: number;
  page(): Promise<boolean>;
}

interface Subscriber extends StreamSink {
  /** The last position this stream has sent (events at or before it are never sent again). */
  after: number;
}

/**
 * One reader of the outbox per process, fanning events out to every open `GET /events` stream. Each
 * stream polling on its own made 1 600 streams a database load of their own (issue 29); now an idle
 * process with any number of streams reads the outbox once per poll (or bell). A stream that resumes
 * from an older position catches up with reads of its own, bounded by the shared position, then joins.
 */
export class EventStreamHub {
  private readonly subs = new Set<Subscriber>();
  /** Every event at or before this has been handed to the streams attached (-1: not started). */
  private position = -1;
  private loop: Promise<void> | undefined;
  private refreshing: Promise<number> | undefined;
  private wake: (() => void) | undefined;
  private closed = false;
  private readonly offBell: () => void;
  private readonly failures: FailureStreak;

  constructor(private readonly deps: { outbox: Outbox; bell: EventBell; log: Logger; pollMs?: number }) {
    this.failures = new FailureStreak(deps.log, 'event streams: reading the outbox');
    // A short delay lets a burst of rings (one per written batch) end in one read. With no stream open
    // the loop reads nothing, so a ring needs no timer.
    this.offBell = deps.bell.on(() => {
      if (this.subs.size > 0) setTimeout(() => this.wake?.(), 5).unref();
    });
  }

  /**
   * Attaches a stream that has sent everything up to `after` (null: a new stream, which starts with the
   * next event); the returned function detaches it. With `catchUp`, the reads of its own it makes to
   * reach the shared position are paged and paced by it (else: pages of BATCH events at once).
   */
  async subscribe(sink: StreamSink, from: number | null, catchUp?: CatchUp): Promise<() => void> {
    if (this.closed) throw new Error('the event stream hub is closed');
    this.loop ??= this.run();
    // Without streams the shared position is not kept current: move it to the head first.
    const head = from === null || this.subs.size === 0 ? await this.refresh() : this.position;
    const after = from ?? head;
    const sub: Subscriber = { ...sink, after };
    for (;;) {
      const upTo = this.position;
      // Behind the shared reader: read what it has passed, for this stream's filter only.
      while (sub.after < upTo) {
        if (catchUp && !(await catchUp.page())) return () => {};
        // A page spans at most `span` positions, so one statement reads a bounded range of the outbox
        // however few of its events are this stream's.
        const to = catchUp ? Math.min(upTo, sub.after + catchUp.span) : upTo;
        const batch = await this.deps.outbox.since(sub.after, { ...sink.filter, upTo: to, limit: BATCH });
        for (const e of batch) {
          sink.write(e);
          sub.after = e.seq!;
        }
        if (batch.length < BATCH) sub.after = to;
      }
      // Nothing runs between this check and the add: the next shared read delivers what follows `upTo`.
      if (this.position === upTo) break;
    }
    this.subs.add(sub);
    this.wake?.();
    return () => {
      this.subs.delete(sub);
    };
  }

  get streams(): number {
    return this.subs.size;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.offBell();
    this.subs.clear();
    this.wake?.();
    await this.loop;
  }

  /** Sequences what was written and reads the head (calls at once share one read); with no stream attached, the shared position moves there. */
  private refresh(): Promise<number> {
    this.refreshing ??= (async () => {
      try {
        await this.deps.outbox.sequence();
        const head = await this.deps.outbox.head();
        // Attached streams get every event through the shared reads: only without them may it jump.
        if (this.subs.size === 0) this.position = Math.max(this.position, head);
        return head;
      } finally {
        this.refreshing = undefined;
      }
    })();
    return this.refreshing;
  }

  private async run(): Promise<void> {
    while (!this.closed) {
      let full = false;
      // With no stream open it reads nothing; the next stream moves its position to the head.
      if (this.subs.size > 0) {
        try {
          await this.deps.outbox.sequence();
          const batch = await this.deps.outbox.since(this.position, { projectId: null, upTo: undefined, limit: BATCH });
          for (const e of batch) {
            for (const sub of this.subs) {
              if (e.seq! > sub.after && streamMatches(e, sub.filter)) {
                sub.write(e);
                sub.after = e.seq!;
              }
            }
            this.position = Math.max(this.position, e.seq!);
          }
          full = batch.length === BATCH;
          if (!full) for (const sub of this.subs) sub.idle();
          this.failures.succeeded();
        } catch (err) {
          this.failures.failed(err);
        }
      }
      if (full) continue;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, this.deps.pollMs ?? POLL_MS).unref();
        this.wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.wake = undefined;
    }
  }
}
