import type { FleetSize } from './fleet-share.ts';
import { IpBuckets } from './ip-buckets.ts';

/**
 * Shares of the work done for one key by who is asking (issue 54, finding 7). A publishable key ships
 * in apps, so anyone may read with it: one client of the key asking for many heavy pages at once would
 * take the process (its CPU, its database connections) from every other client of the key, and from
 * every other key. Work is counted in cost units (a read's weight, e.g. its page size and whether
 * metadata comes with it), and:
 *
 * - each key has a token bucket of `keyPerSec` units a second (burst `keyBurst`): with a `fleet`, for
 *   the fleet's API processes together (each holds its share, util/fleet-share.ts), else per process;
 * - inside it, each client (a client network of the key) has a bucket of `clientFraction` of the
 *   key's rate and burst, so one client spends its own fraction and the key keeps the rest for others;
 * - each client of a key has at most `clientConcurrency` units running at once in a process (what it
 *   bounds is the process's own CPU and connections); past that its requests wait in its own line (at
 *   most `clientQueue`), and past that they are refused.
 *
 * A client that exhausts its share is refused or waits; no other client's request waits on it. A
 * `whole` caller (a backend's secret key: its one address is every user of it) is held to the key's
 * bucket alone. A task that costs more than the concurrency runs alone.
 */
export type CostShareOptions = {
  keyPerSec: number;
  keyBurst: number;
  clientFraction: number;
  clientConcurrency: number;
  clientQueue: number;
  /** The API processes sharing the rates (the wiring's FleetShare); none: this process alone. */
  fleet?: FleetSize;
};

export type ShareName = 'keyRate' | 'clientRate' | 'clientQueue';

/** A request refused because a share is full: answered 429 with Retry-After, naming the share. */
export class CostShareFull extends Error {
  constructor(
    readonly share: ShareName,
    message: string,
    readonly retryAfterSec: number,
  ) {
    super(message);
  }
}

export type ShareCaller = { key: string; client: string | null; whole?: boolean };

interface Line {
  running: number;
  waiting: Array<{ cost: number; start: () => void }>;
}

export class CostShares {
  private readonly keys: IpBuckets;
  private readonly clients: IpBuckets;
  /** Running and waiting work by client of a key; a line with neither is dropped. */
  private readonly lines = new Map<string, Line>();
  private running = 0;
  private waitingCount = 0;

  constructor(private readonly o: CostShareOptions) {
    this.keys = new IpBuckets(o.keyPerSec, o.keyBurst, o.fleet);
    this.clients = new IpBuckets(o.keyPerSec * o.clientFraction, Math.max(1, o.keyBurst * o.clientFraction), o.fleet);
  }

  /** For /metrics: units running, requests waiting, clients with a line. */
  reading(): { running: number; waiting: number; clients: number } {
    return { running: this.running, waiting: this.waitingCount, clients: this.lines.size };
  }

  /**
   * Runs `task` in `who`'s share, charged `cost` units; throws CostShareFull (nothing charged) when a
   * share is full. `hold: false` charges the rate only (a call that mostly waits, e.g. for a receipt).
   */
  async run<T>(who: ShareCaller, cost: number, task: () => Promise<T>, opts: { hold?: boolean } = {}): Promise<T> {
    const now = Date.now();
    const lineKey = who.whole || who.client === null ? null : `${who.key}|${who.client}`;
    const hold = opts.hold !== false && lineKey !== null;
    const line = hold ? this.lines.get(lineKey!) : undefined;
    const mustWait = hold && line !== undefined && (line.waiting.length > 0 || (line.running > 0 && line.running + cost > this.o.clientConcurrency));
    if (mustWait && line!.waiting.length >= this.o.clientQueue) {
      throw new CostShareFull(
        'clientQueue',
        `this client already has ${line!.waiting.length} requests waiting (at most ${this.o.clientQueue}) behind ${line!.running} units running (at most ${this.o.clientConcurrency})`,
        1,
      );
    }
    if (lineKey !== null) {
      const took = this.clients.take(lineKey, now, cost);
      if (!took.ok) {
        throw new CostShareFull(
          'clientRate',
          `this client's share of the key's reads is used up (${round(this.o.keyPerSec * this.o.clientFraction)} units/s, burst ${round(this.o.keyBurst * this.o.clientFraction)}; this call costs ${cost}); retry in ${took.retryAfterSec}s`,
          took.retryAfterSec,
        );
      }
    }
    const took = this.keys.take(who.key, now, cost);
    if (!took.ok) {
      if (lineKey !== null) this.clients.giveBack(lineKey, cost, now);
      throw new CostShareFull(
        'keyRate',
        `the access key's reads are used up (${this.o.keyPerSec} units/s, burst ${this.o.keyBurst}; this call costs ${cost}); retry in ${took.retryAfterSec}s`,
        took.retryAfterSec,
      );
    }
    if (!hold) return task();
    await this.enter(lineKey!, cost);
    try {
      return await task();
    } finally {
      this.leave(lineKey!, cost);
    }
  }

  private enter(lineKey: string, cost: number): Promise<void> | void {
    let line = this.lines.get(lineKey);
    if (!line) this.lines.set(lineKey, (line = { running: 0, waiting: [] }));
    if (line.waiting.length === 0 && (line.running === 0 || line.running + cost <= this.o.clientConcurrency)) {
      line.running += cost;
      this.running += cost;
      return;
    }
    this.waitingCount++;
    return new Promise<void>((start) => line.waiting.push({ cost, start }));
  }

  private leave(lineKey: string, cost: number): void {
    const line = this.lines.get(lineKey)!;
    line.running -= cost;
    this.running -= cost;
    // In the order they came: a heavy request first in line is not passed over by light ones forever.
    while (line.waiting.length > 0 && (line.running === 0 || line.running + line.waiting[0].cost <= this.o.clientConcurrency)) {
      const next = line.waiting.shift()!;
      this.waitingCount--;
      line.running += next.cost;
      this.running += next.cost;
      next.start();
    }
    if (line.running === 0 && line.waiting.length === 0) this.lines.delete(lineKey);
  }
}

function round(n: number): number {
  return Math.round(n * 100) / 100;
}

/** A domain's fair shares of reads as configured (config/read-shares-schema.ts: indexer.readShares, metadata.readShares). */
export interface ReadSharesConfig {
  keyUnitsPerSec: number;
  keyBurst: number;
  clientFraction: number;
  clientConcurrency: number;
  clientQueue: number;
  rowsPerUnit: number;
}

/** The CostShares of a domain's configured read shares, and the limits it publishes (its `*_read_share_limit` gauge). */
export function readShares(o: ReadSharesConfig, fleet?: FleetSize): { shares: CostShares; limits: Record<string, number> } {
  const shares = new CostShares({ keyPerSec: o.keyUnitsPerSec, keyBurst: o.keyBurst, clientFraction: o.clientFraction, clientConcurrency: o.clientConcurrency, clientQueue: o.clientQueue, fleet });
  const limits = {
    keyUnitsPerSec: o.keyUnitsPerSec,
    keyBurst: o.keyBurst,
    clientUnitsPerSec: o.keyUnitsPerSec * o.clientFraction,
    clientBurst: o.keyBurst * o.clientFraction,
    clientConcurrency: o.clientConcurrency,
    clientQueue: o.clientQueue,
    rowsPerUnit: o.rowsPerUnit,
  };
  return { shares, limits };
}
