import type { CatchUp } from '../../events/stream-hub.ts';
import type { Outbox } from '../../events/outbox.ts';
import type { FleetSize } from '../../util/fleet-share.ts';
import { IpBuckets } from '../../util/ip-buckets.ts';

/** webhooks.streamShares: how far back a resume may reach, how fast it reads, how often an address may resume. */
export interface ResumeLimits {
  resumeMaxEvents: number;
  resumeMaxAgeSec: number;
  resumePageEvents: number;
  resumePagesPerSec: number;
  resumePageBurst: number;
  reconnectsPerMin: number;
  reconnectBurst: number;
}

/** Why a resume starts at the head instead: too many positions back, or its next event too old. */
export type GapReason = 'tooFar' | 'tooOld';

export interface Gap {
  reason: GapReason;
  /** The Last-Event-ID asked for. */
  from: number;
  /** Where the stream starts instead (it sends what follows). */
  to: number;
}

/**
 * Resumes of `GET /events` (issue 54): a client that reconnected from position 1 every 1.5 s made the
 * database read its project's whole outbox each time (everyone's reads 440× slower). Now a position
 * too far back starts at the head after a `stream.gap` event, the catch-up is read in pages of bounded
 * span taken from its client network's budget (a network past it waits: its own catch-ups slow, no one
 * else's), and each address may resume only so often.
 */
export class StreamResumes {
  private readonly reconnects: IpBuckets;
  private readonly pages: IpBuckets;

  constructor(
    private readonly l: ResumeLimits,
    private readonly outbox: Pick<Outbox, 'head' | 'firstAfter'>,
    private readonly onPage?: (paced: boolean) => void,
    /** The API processes sharing the limits (util/fleet-share.ts); none: this process alone. */
    fleet?: FleetSize,
  ) {
    this.reconnects = new IpBuckets(l.reconnectsPerMin / 60, l.reconnectBurst, fleet);
    this.pages = new IpBuckets(l.resumePagesPerSec, l.resumePageBurst, fleet);
  }

  /** Takes one resume of `address`, or says when it may try again. */
  admit(address: string): { ok: true } | { ok: false; retryAfterSec: number; reason: string } {
    const r = this.reconnects.take(address);
    if (r.ok) return r;
    return {
      ...r,
      reason: `client address ${address} resumed event streams more than ${this.l.reconnectsPerMin} times a minute (burst ${this.l.reconnectBurst}; webhooks.streamShares.reconnectsPerMin)`,
    };
  }

  /** Whether a resume from `after` starts at the head instead (and where), judged on the outbox now. */
  async gapOf(after: number): Promise<Gap | undefined> {
    const head = await this.outbox.head();
    if (after >= head) return undefined;
    if (head - after > this.l.resumeMaxEvents) return { reason: 'tooFar', from: after, to: head };
    const at = await this.outbox.firstAfter(after);
    if (at && Date.now() - at.getTime() > this.l.resumeMaxAgeSec * 1000) return { reason: 'tooOld', from: after, to: head };
    return undefined;
  }

  /** The catch-up of a stream of client network `net`; `open` says whether the stream still is. */
  catchUp(net: string, open: () => boolean): CatchUp {
    return {
      span: this.l.resumePageEvents,
      page: async () => {
        let paced = false;
        for (;;) {
          if (!open()) return false;
          const r = this.pages.take(net);
          if (r.ok) {
            this.onPage?.(paced);
            return true;
          }
          paced = true;
          // A token is due within 1 / rate; waiting Retry-After's whole seconds would overshoot.
          await new Promise((done) => setTimeout(done, Math.min(r.retryAfterSec * 1000, Math.ceil(1000 / this.l.resumePagesPerSec))).unref());
        }
      },
    };
  }
}

/** The `stream.gap` message: in the envelope every event has, `id:` the position the stream goes on after. */
export function gapMessage(g: Gap, projectId: number, l: Pick<ResumeLimits, 'resumeMaxEvents' | 'resumeMaxAgeSec'>): string {
  const data = {
    id: `gap_${g.to}`,
    type: 'stream.gap',
    createdAt: new Date().toISOString(),
    chainId: null,
    projectId,
    data: {
      reason: g.reason,
      lastEventId: String(g.from),
      resumedAfter: String(g.to),
      limit: g.reason === 'tooFar' ? { resumeMaxEvents: l.resumeMaxEvents } : { resumeMaxAgeSec: l.resumeMaxAgeSec },
    },
  };
  return `id: ${g.to}\nevent: stream.gap\ndata: ${JSON.stringify(data)}\n\n`;
}
