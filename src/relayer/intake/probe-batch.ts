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

/**
 * A group of jobs that can share one eth_call: one sender, overrides that agree, and no job that runs or
 * reads a wallet under another job's nonce override it does not set itself. The overrides of every job
 * apply to the whole call, so without the last rule a bundle at its wallet's next nonce that shares a
 * call with its queued successor (simulated with the predecessor's nonce set) would see that nonce as
 * used, fail with BadNonce, and be dropped although it never ran.
 */
class Group {
  readonly items: Pending[] = [];
  private readonly slots = new Map<string, bigint>();
  /** Per wallet: the overrides of the group on it (canonical text). */
  private readonly overrides = new Map<Address, string>();
  /** Per wallet a job runs or reads: the overrides that job sets on it itself. */
  private readonly touched = new Map<Address, Set<string>>();

  constructor(readonly sender: Address) {}

  fits(job: ProbeJob): boolean {
    if (job.sender !== this.sender || this.items.length >= MAX_JOBS) return false;
    // One eth_call runs on one block: a job pinned to a block seen shares it only with jobs of that block.
    if (this.items.length > 0 && this.items[0].job.block !== job.block) return false;
    // Placed code changes what every other job of the call would see at that address: alone. Not so
    // slotReads (merged over the call, same code on each): the probe-aware proxy answers every call
    // but the probe's own slot read as the wallet does, a few gas dearer.
    if (job.codes?.length || this.items.some((p) => p.job.codes?.length)) return this.items.length === 0;
    for (const n of job.nonces) {
      const v = this.slots.get(`${n.wallet}:${n.space}`);
      if (v !== undefined && v !== n.nonce) return false;
    }
    const merged = this.mergedWith(job);
    // Every member that touches a wallet must set exactly the overrides the call will have on it...
    for (const [wallet, text] of merged) {
      for (const own of this.touched.get(wallet) ?? []) if (own !== text) return false;
    }
    // ...and so must the new job, for every wallet it touches.
    const mine = overridesByWallet(job.nonces);
    return touches(job).every((w) => (merged.get(w) ?? '') === (mine.get(w) ?? ''));
  }

  add(p: Pending) {
    this.items.push(p);
    for (const n of p.job.nonces) this.slots.set(`${n.wallet}:${n.space}`, n.nonce);
    for (const [w, text] of this.mergedWith(p.job)) this.overrides.set(w, text);
    const mine = overridesByWallet(p.job.nonces);
    for (const w of touches(p.job)) this.touched.set(w, (this.touched.get(w) ?? new Set()).add(mine.get(w) ?? ''));
  }

  /** The group's overrides per wallet with the job's added. */
  private mergedWith(job: ProbeJob): Map<Address, string> {
    const out = new Map(this.overrides);
    const all = [...job.nonces];
    for (const [key, nonce] of this.slots) {
      const [wallet, space] = key.split(':');
      all.push({ wallet: wallet as Address, space: BigInt(space), nonce });
    }
    for (const [w, text] of overridesByWallet(all)) out.set(w, text);
    return out;
  }
}

function overridesByWallet(nonces: ProbeJob['nonces']): Map<Address, string> {
  const by = new Map<Address, Set<string>>();
  for (const n of nonces) {
    const w = n.wallet.toLowerCase() as Address;
    by.set(w, (by.get(w) ?? new Set()).add(`${n.space}=${n.nonce}`));
  }
  return new Map([...by].map(([w, set]) => [w, [...set].sort().join(',')]));
}

/**
 * Wallets a job runs (its `wallets`, else its entrypoint) or reads the nonces of. Not its slotReads: a
 * nonce override never changes the implementation slot (another storage key), so they add no constraint.
 */
function touches(job: ProbeJob): Address[] {
  const ws = [...(job.wallets ?? [job.entrypoint]), ...(job.reads ?? []).map((r) => r.wallet)];
  return [...new Set(ws.map((w) => w.toLowerCase() as Address))];
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
      probeMany(
        this.client,
        this.settings,
        g.items.map((p) => p.job),
      ).then(
        (results) => g.items.forEach((p, i) => p.resolve(results[i])),
        (err) => g.items.forEach((p) => p.reject(err)),
      );
    }
  }
}
