// util/cost-shares.ts (issue 54, finding 7): a client of a key runs at most its concurrency, waits in
// its own line up to its queue, and is refused past that; another client of the key is never held
// behind it. Ground truth is what the tasks saw (how many of them ran at once), not what the class says.
import { describe, expect, it } from 'vitest';
import { CostShareFull, CostShares } from '../src/util/cost-shares.ts';
import { FleetShare } from '../src/util/fleet-share.ts';
import { IpBuckets } from '../src/util/ip-buckets.ts';

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { open, opened };
}

async function refusal(p: Promise<unknown>): Promise<CostShareFull> {
  try {
    await p;
  } catch (err) {
    if (err instanceof CostShareFull) return err;
    throw err;
  }
  throw new Error('not refused');
}

describe('cost shares', () => {
  it("one client's line: at most its concurrency runs, clientQueue wait, the rest refused; another client of the key runs at once", async () => {
    const shares = new CostShares({ keyPerSec: 1_000, keyBurst: 1_000, clientFraction: 0.5, clientConcurrency: 4, clientQueue: 3 });
    const hold = gate();
    let running = 0;
    let peak = 0;
    let finished = 0;
    const task = async () => {
      running++;
      peak = Math.max(peak, running);
      await hold.opened;
      running--;
      finished++;
    };
    const a = { key: 'k1', client: '10.0.0.0/24' };
    // Two of cost 2 fill the concurrency of 4; three wait; the sixth and seventh are refused for the line.
    const admitted = Array.from({ length: 5 }, () => shares.run(a, 2, task));
    const refused = await Promise.all([refusal(shares.run(a, 2, task)), refusal(shares.run(a, 1, task))]);
    expect(refused.map((r) => r.share)).toEqual(['clientQueue', 'clientQueue']);
    expect(running).toBe(2);
    expect(shares.reading()).toEqual({ running: 4, waiting: 3, clients: 1 });

    // Another client of the same key is not behind that line.
    let other = false;
    await shares.run({ key: 'k1', client: '10.0.1.0/24' }, 2, async () => void (other = true));
    expect(other).toBe(true);

    hold.open();
    await Promise.all(admitted);
    expect(finished).toBe(5);
    expect(peak).toBe(2);
    expect(shares.reading()).toEqual({ running: 0, waiting: 0, clients: 0 });
  });

  it("a client spends its fraction of the key's rate and no more; the key keeps the rest for its other clients; a whole caller (secret key) is held to the key alone", async () => {
    // Key: 100 units, no refill to speak of; each client 10 % of it.
    const shares = new CostShares({ keyPerSec: 0.001, keyBurst: 100, clientFraction: 0.1, clientConcurrency: 1_000, clientQueue: 0 });
    const a = { key: 'k1', client: '10.0.0.0/24' };
    let ran = 0;
    const task = async () => void ran++;
    for (let i = 0; i < 10; i++) await shares.run(a, 1, task);
    const over = await refusal(shares.run(a, 1, task));
    expect(over.share).toBe('clientRate');
    expect(over.retryAfterSec).toBeGreaterThan(0);
    expect(ran).toBe(10);
    // Nine other clients spend theirs: the key's 100 are then spent, and the next client meets the key's bucket.
    for (let c = 1; c <= 9; c++) for (let i = 0; i < 10; i++) await shares.run({ key: 'k1', client: `10.0.${c}.0/24` }, 1, task);
    expect((await refusal(shares.run({ key: 'k1', client: '10.0.99.0/24' }, 1, task))).share).toBe('keyRate');
    expect((await refusal(shares.run({ key: 'k1', client: '10.0.99.0/24', whole: true }, 1, task))).share).toBe('keyRate');
    // Another key is untouched; a secret key's one address may spend the whole key.
    for (let i = 0; i < 100; i++) await shares.run({ key: 'k2', client: '10.0.0.0/24', whole: true }, 1, task);
    expect(ran).toBe(200);
  });

  it("in a fleet of N API processes each holds 1/N of the rates and bursts, a client's too, and follows N as it changes", async () => {
    const fleet = new FleetShare();
    let ran = 0;
    const task = async () => void ran++;
    /** Runs `who`'s calls of cost 1 until one is refused: the share that refused it. */
    const spend = async (shares: CostShares, who: { key: string; client: string | null }) => {
      for (;;) {
        try {
          await shares.run(who, 1, task);
        } catch (err) {
          if (err instanceof CostShareFull) return err.share;
          throw err;
        }
      }
    };
    const shares = new CostShares({ keyPerSec: 0.001, keyBurst: 60, clientFraction: 0.5, clientConcurrency: 1_000, clientQueue: 0, fleet });
    fleet.set(3);
    // A third of the key's 60 and of a client's 30.
    expect(await spend(shares, { key: 'k1', client: '10.0.0.0/24' })).toBe('clientRate');
    expect(ran).toBe(10);
    expect(await spend(shares, { key: 'k1', client: null })).toBe('keyRate');
    expect(ran).toBe(20);
    // Two processes left: a fresh key's share is half.
    fleet.set(2);
    ran = 0;
    expect(await spend(shares, { key: 'k2', client: null })).toBe('keyRate');
    expect(ran).toBe(30);
    // A count below one (this process's own mark not seen yet) is alone.
    fleet.set(0);
    expect(fleet.size).toBe(1);
    // A burst smaller than the fleet still admits one request per process.
    fleet.set(5);
    ran = 0;
    const tiny = new CostShares({ keyPerSec: 0.001, keyBurst: 2, clientFraction: 1, clientConcurrency: 1_000, clientQueue: 0, fleet });
    expect(await spend(tiny, { key: 'k3', client: null })).toBe('keyRate');
    expect(ran).toBe(1);
  });
});

describe('an address bucket in a fleet larger than its burst', () => {
  it('holds one request per process, refilled at the share of the rate: not forgotten (as full) when the whole burst would have refilled', () => {
    const fleet = new FleetShare();
    fleet.set(5);
    // 1 a second, burst 2: each of 5 processes holds 1 token, refilled at 0.2 a second (5 s).
    const b = new IpBuckets(1, 2, fleet);
    const t = 1_700_000_000_000;
    expect(b.take('10.0.0.1', t).ok).toBe(true);
    expect(b.take('10.0.0.1', t + 1).ok).toBe(false);
    // Past burst/rate + 1 s (3 s), when a bucket of this process alone would be full again: still empty here.
    const early = b.take('10.0.0.1', t + 3_500);
    expect(early).toEqual({ ok: false, retryAfterSec: 2 });
    expect(b.take('10.0.0.1', t + 5_001).ok).toBe(true);
  });
});
