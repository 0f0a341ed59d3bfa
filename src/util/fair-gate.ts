import { burstShare, type FleetSize } from './fleet-share.ts';

/**
 * A pool of slots shared fairly by who asks and where the work goes (issue 54). A plain Limiter is one
 * FIFO line: whoever queues most, or names the slowest host, holds every slot. Here:
 *
 * - each task names its `queue` (a caller: `k<key id>`, a keyless client address, or a host) and its
 *   `host`; waiting queues are served round-robin, so one queue's backlog delays only itself;
 * - a host runs at most its allowance at once, and keyless tasks start at most `keylessHostRatePerSec`
 *   a second at one host (burst `keylessHostBurst`): a slow or hostile host holds a few slots, never
 *   all, and no host is sent a flood on behalf of callers nobody can hold to account. The
 *   allowance starts at `perHost` and is earned: each task of the host that ends within `fastMs` adds
 *   one (up to `perHostMax`), each slower one halves it (down to `perHost`). A host that answers
 *   quickly gets the slots its collection needs; one that answers slowly, or never, keeps `perHost`;
 * - `keyless` tasks together hold at most `keylessLimit` slots, whatever their queues;
 * - a queue holds at most `maxWaiting` waiting tasks (`hasRoom` says so before work is queued).
 *
 * Within a queue, a task whose host is at its limit is passed over for the next one whose host is not,
 * so a caller's own slow host does not block its other work either. The host `''` (work that goes
 * nowhere, e.g. an inline document) has no host limit.
 */
export type GateTask = { queue: string; host: string; keyless?: boolean };

export type FairGateOptions = {
  limit: number;
  perHost: number;
  /** What a host that answers within `fastMs` may earn (default: `perHost`, no earning). */
  perHostMax?: number;
  fastMs?: number;
  keylessLimit?: number;
  keylessHostRatePerSec?: number;
  keylessHostBurst?: number;
  maxWaiting?: number;
  /** A host with its own limit (the operator's IPFS gateways). */
  hostLimit?: (host: string) => number | undefined;
  /** The API processes sharing the keyless host rate (util/fleet-share.ts); none: this process alone. */
  fleet?: FleetSize;
};

interface Waiter extends GateTask {
  start: () => void;
}

/** Hosts whose rate buckets are remembered at once; past that, full buckets are forgotten. */
const MAX_BUCKETS = 10_000;

export class FairGate {
  private active = 0;
  private keylessActive = 0;
  private readonly perHost = new Map<string, number>();
  /** Earned allowances above `perHost`, by host (a host absent here has `perHost`). */
  private readonly allowance = new Map<string, number>();
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  /** Waiting tasks by queue; the map's order is the round-robin order (a served queue moves to the back). */
  private readonly queues = new Map<string, Waiter[]>();
  private waitingCount = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly o: FairGateOptions) {}

  /** For /metrics: slots running (and of them keyless), tasks waiting, hosts at their limit. */
  reading(): { running: number; keyless: number; waiting: number; hostsAtLimit: number } {
    let hostsAtLimit = 0;
    for (const [host, n] of this.perHost) if (n >= this.limitOf(host)) hostsAtLimit++;
    return { running: this.active, keyless: this.keylessActive, waiting: this.waitingCount, hostsAtLimit };
  }

  /** Whether `queue` may queue `n` more tasks. */
  hasRoom(queue: string, n: number): boolean {
    return (this.queues.get(queue)?.length ?? 0) + n <= (this.o.maxWaiting ?? Number.POSITIVE_INFINITY);
  }

  async run<T>(t: GateTask, task: () => Promise<T>): Promise<T> {
    await new Promise<void>((start) => {
      const q = this.queues.get(t.queue);
      if (q) q.push({ ...t, start });
      else this.queues.set(t.queue, [{ ...t, start }]);
      this.waitingCount++;
      this.pump();
    });
    const started = performance.now();
    try {
      return await task();
    } finally {
      if (t.host) this.learn(t.host, performance.now() - started);
      this.active--;
      if (t.keyless) this.keylessActive--;
      if (t.host) {
        const n = (this.perHost.get(t.host) ?? 1) - 1;
        if (n > 0) this.perHost.set(t.host, n);
        else this.perHost.delete(t.host);
      }
      this.pump();
    }
  }

  private limitOf(host: string): number {
    return this.o.hostLimit?.(host) ?? this.allowance.get(host) ?? this.o.perHost;
  }

  /** Additive increase for a quick answer, halving for a slow one (a host earns its slots, and loses them fast). */
  private learn(host: string, ms: number): void {
    const max = this.o.perHostMax ?? this.o.perHost;
    if (max <= this.o.perHost || this.o.hostLimit?.(host) !== undefined) return;
    const now = this.allowance.get(host) ?? this.o.perHost;
    const next = ms <= (this.o.fastMs ?? 1_000) ? Math.min(max, now + 1) : Math.max(this.o.perHost, Math.floor(now / 2));
    this.allowance.delete(host);
    if (next > this.o.perHost) this.allowance.set(host, next);
    // Bounded like the rate buckets: the oldest earnings are forgotten first (they start again at perHost).
    if (this.allowance.size > MAX_BUCKETS) this.allowance.delete(this.allowance.keys().next().value!);
  }

  /** The keyless start rate at one host in this process: its share of the fleet's (util/fleet-share.ts). */
  private get hostRate(): number | undefined {
    const rate = this.o.keylessHostRatePerSec;
    return rate && rate / (this.o.fleet?.size ?? 1);
  }

  /** Rate tokens of a host now (refilled since last taken). */
  private tokens(host: string, now: number): number {
    const rate = this.hostRate;
    if (!rate) return Number.POSITIVE_INFINITY;
    const burst = burstShare(this.o.keylessHostBurst ?? Math.max(1, Math.ceil(this.o.keylessHostRatePerSec!)), this.o.fleet?.size ?? 1);
    const b = this.buckets.get(host);
    return b ? Math.min(burst, b.tokens + ((now - b.at) / 1000) * rate) : burst;
  }

  private takeToken(host: string, now: number): void {
    if (!this.o.keylessHostRatePerSec) return;
    const left = this.tokens(host, now) - 1;
    this.buckets.delete(host);
    this.buckets.set(host, { tokens: left, at: now });
    if (this.buckets.size > MAX_BUCKETS) {
      // A full bucket is as good as none: forget those first, then the oldest.
      for (const [h] of this.buckets) {
        if (this.buckets.size <= MAX_BUCKETS / 2) break;
        this.buckets.delete(h);
      }
    }
  }

  /** Why `w` cannot start now, or undefined when it can. */
  private blocked(w: Waiter, now: number): 'keyless' | 'host' | 'rate' | undefined {
    if (w.keyless && this.keylessActive >= (this.o.keylessLimit ?? this.o.limit)) return 'keyless';
    if (!w.host || this.limitOf(w.host) <= 0) return undefined;
    if ((this.perHost.get(w.host) ?? 0) >= this.limitOf(w.host)) return 'host';
    if (w.keyless && this.o.hostLimit?.(w.host) === undefined && this.tokens(w.host, now) < 1) return 'rate';
    return undefined;
  }

  private pump(): void {
    const now = Date.now();
    let rateBound = false;
    while (this.active < this.o.limit && this.waitingCount > 0) {
      let started = false;
      for (const [name, q] of this.queues) {
        const i = q.findIndex((w) => {
          const why = this.blocked(w, now);
          if (why === 'rate') rateBound = true;
          return why === undefined;
        });
        if (i < 0) continue;
        const [w] = q.splice(i, 1);
        // Served: the queue goes to the back of the round.
        this.queues.delete(name);
        if (q.length) this.queues.set(name, q);
        this.waitingCount--;
        this.active++;
        if (w.keyless) this.keylessActive++;
        if (w.host) {
          this.perHost.set(w.host, (this.perHost.get(w.host) ?? 0) + 1);
          if (w.keyless && this.o.hostLimit?.(w.host) === undefined) this.takeToken(w.host, now);
        }
        w.start();
        started = true;
        break;
      }
      if (!started) break;
    }
    // A task held only by its host's rate starts when a token is due, not at the next finish.
    const rate = this.hostRate;
    if (rateBound && this.waitingCount > 0 && !this.timer && rate) {
      this.timer = setTimeout(
        () => {
          this.timer = undefined;
          this.pump();
        },
        Math.ceil(1000 / rate),
      );
      this.timer.unref?.();
    }
  }
}
