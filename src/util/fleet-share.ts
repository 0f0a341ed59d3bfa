/**
 * How many API processes share each configured rate (docs/production.md, "Rates across the fleet").
 * Every per-client and per-key token bucket kept in a process's memory (IpBuckets, CostShares,
 * FairGate's keyless host rate) holds rate/N and burst/N of what is configured, so N processes behind a
 * balancer give a key, an address or a host the configured rate in total, not N times it, with no
 * statement per request. N is counted on the database by the wiring (store/leadership.ts `count`, every
 * postgres.leaderCheckMs); it is 1 until counted, and always on PGlite (one process per database). A
 * process that loses the database keeps the last N it counted.
 */
export class FleetShare {
  private n = 1;

  /** The API processes live, this one included: 1 when alone or not counted yet. */
  get size(): number {
    return this.n;
  }

  /** A count below 1 (this process's own mark not seen yet) is taken as alone. */
  set(n: number): void {
    this.n = Number.isFinite(n) && n >= 1 ? Math.floor(n) : 1;
  }
}

/** Who reads the count: a bucket built without one is alone (tests, commands that serve no API). */
export type FleetSize = Pick<FleetShare, 'size'>;

/**
 * This process's share of a burst: burst/n, but never below `least` (one request's cost) unless the
 * burst itself is, or a bucket could admit nothing at all.
 */
export function burstShare(burst: number, n: number, least = 1): number {
  return n <= 1 ? burst : Math.max(Math.min(least, burst), burst / n);
}
