// Recent per-gateway outcomes decide the order in which gateways are tried.
// Only a short, time-bounded window counts, so a gateway that was down an hour
// ago gets a fresh chance and a lucky streak long ago does not shield it.

export type GatewayOutcome =
  | 'success'
  | 'failure' // transient trouble on the gateway's side: timeouts, 5xx, 429, resets
  | 'slow' // lost a hedge race; only its elapsed time is informative
  | 'neutral'; // an answer about the content (404, bad JSON), not about the gateway

export type GatewayHealth = {
  gateway: string;
  successes: number;
  failures: number;
  consecutiveFailures: number;
  latencyMs: number | null;
  // Lower is better: mean latency plus a heavy penalty per unit of failure rate.
  score: number;
};

type Sample = { at: number; outcome: GatewayOutcome; ms: number };

export type GatewayHealthOptions = { windowMs?: number; maxSamples?: number; failurePenaltyMs?: number; now?: () => number };

export type GatewayHealthTracker = {
  record(gateway: string, outcome: GatewayOutcome, ms: number): void;
  snapshot(): GatewayHealth[];
  order(): string[];
};

export function createGatewayHealth(gateways: readonly string[], opts: GatewayHealthOptions = {}): GatewayHealthTracker {
  const windowMs = opts.windowMs ?? 10 * 60_000;
  const maxSamples = opts.maxSamples ?? 20;
  const failurePenaltyMs = opts.failurePenaltyMs ?? 10_000;
  const now = opts.now ?? Date.now;
  const samples = new Map<string, Sample[]>(gateways.map((g) => [g, []]));

  const recent = (gateway: string): Sample[] => {
    const cutoff = now() - windowMs;
    const kept = (samples.get(gateway) ?? []).filter((s) => s.at >= cutoff).slice(-maxSamples);
    samples.set(gateway, kept);
    return kept;
  };

  const describe = (gateway: string): GatewayHealth => {
    const list = recent(gateway);
    const successes = list.filter((s) => s.outcome === 'success').length;
    const failures = list.filter((s) => s.outcome === 'failure').length;
    let consecutiveFailures = 0;
    for (let i = list.length - 1; i >= 0 && list[i].outcome !== 'success'; i--) {
      if (list[i].outcome === 'failure') consecutiveFailures++;
    }
    const latencyMs = list.length ? list.reduce((sum, s) => sum + s.ms, 0) / list.length : null;
    const decided = successes + failures;
    const failureRate = decided ? failures / decided : 0;
    return { gateway, successes, failures, consecutiveFailures, latencyMs, score: (latencyMs ?? 0) + failureRate * failurePenaltyMs };
  };

  const snapshot = (): GatewayHealth[] =>
    gateways
      .map((gateway, index) => ({ health: describe(gateway), index }))
      // Ties keep the configured order, so an untested list is tried as written.
      .sort((a, b) => a.health.score - b.health.score || a.index - b.index)
      .map(({ health }) => health);

  return {
    record(gateway, outcome, ms) {
      const list = samples.get(gateway);
      if (!list) return;
      list.push({ at: now(), outcome, ms });
      if (list.length > maxSamples) list.splice(0, list.length - maxSamples);
    },
    snapshot,
    order: () => snapshot().map((h) => h.gateway),
  };
}
