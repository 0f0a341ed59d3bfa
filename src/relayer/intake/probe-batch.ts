import type { Address, PublicClient } from 'viem';
import { probeMany, type ProbeJob, type ProbeResult, type ProbeSettings } from './simulate.ts';

/** How long a simulation waits for others to share its eth_call: short next to a node round trip. */
const WINDOW_MS = 2;
/** Jobs per eth_call: each is run twice (measure, trial) within the node's gas cap for one call. */
const MAX_JOBS = 48;

interface Pending {
  job: ProbeJob;
  resolve: (r: ProbeResult) => void;
  reject: (e: unknown) => void;
}

/** A group of jobs that can share one eth_call: one sender, overrides that agree, no read of an overridden wallet. */
class Group {
  readonly items: Pending[] = [];
  private readonly slots = new Map<string, bigint>();
  private readonly overridden = new Set<Address>();
  private readonly read = new Set<Address>();

  constructor(readonly sender: Address) {}

  fits(job: ProbeJob): boolean {
    if (job.sender !== this.sender || this.items.length >= MAX_JOBS) return false;
    // Placed code changes what every other job of the call would see at that address: alone.
    if (job.codes?.length || this.items.some((p) => p.job.codes?.length)) return this.items.length === 0;
    for (const n of job.nonces) {
      const v = this.slots.get(`${n.wallet}:${n.space}`);
      if ((v !== undefined && v !== n.nonce) || this.read.has(n.wallet)) return false;
    }
    return !(job.reads ?? []).some((r) => this.overridden.has(r.wallet));
  }

  add(p: Pending) {
    this.items.push(p);
    for (const n of p.job.nonces) {
      this.slots.set(`${n.wallet}:${n.space}`, n.nonce);
      this.overridden.add(n.wallet);
    }
    for (const r of p.job.reads ?? []) this.read.add(r.wallet);
  }
}

/**
 * Micro-batches concurrent simulations of one chain: what arrives within a couple of milliseconds goes
 * to the node as one probeMany eth_call per compatible group (usually one), so intake under load costs
 * a fraction of a node call per bundle, and a dispatcher pass's re-simulations cost one call per sender.
 * Every job still runs against the latest state when the call is made: nothing is cached.
 */
export class ProbeBatcher {
  private pending: Pending[] = [];
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly client: PublicClient,
    private readonly settings: ProbeSettings,
  ) {}

  run(job: ProbeJob): Promise<ProbeResult> {
    return new Promise((resolve, reject) => {
      this.pending.push({ job: { ...job, sender: job.sender.toLowerCase() as Address }, resolve, reject });
      if (this.pending.length >= MAX_JOBS) this.flush();
      else this.timer ??= setTimeout(() => this.flush(), WINDOW_MS);
    });
  }

  private flush() {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    this.pending = [];
    const groups: Group[] = [];
    for (const p of batch) {
      let g = groups.find((x) => x.fits(p.job));
      if (!g) groups.push((g = new Group(p.job.sender)));
      g.add(p);
    }
    for (const g of groups) {
      probeMany(this.client, this.settings, g.items.map((p) => p.job)).then(
        (results) => g.items.forEach((p, i) => p.resolve(results[i])),
        (err) => g.items.forEach((p) => p.reject(err)),
      );
    }
  }
}
