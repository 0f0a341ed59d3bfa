import { Gauge, type Registry } from 'prom-client';

/** What a pool of slots says about itself (util/fair-gate.ts), read only when /metrics is scraped. */
export type SlotReading = Record<string, number>;

/**
 * A gauge of slot pools read at scrape time: nothing is counted per fetch. Pools `watch` themselves
 * in; the states of every pool watched are summed.
 */
export function slotGauge(registry: Registry, name: string, help: string) {
  const sources: (() => SlotReading)[] = [];
  new Gauge({
    name,
    help,
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      const sum: SlotReading = {};
      for (const read of sources) for (const [k, v] of Object.entries(read())) sum[k] = (sum[k] ?? 0) + v;
      for (const [k, v] of Object.entries(sum)) this.set({ state: k }, v);
    },
  });
  return { watch: (read: () => SlotReading) => void sources.push(read) };
}
