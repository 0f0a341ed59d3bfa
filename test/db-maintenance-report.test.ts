// What operators see of the service's own vacuum and analysis (telemetry/db-maintenance.ts): every turn
// counted by outcome, a failure logged as a warning, and a maintenance that keeps failing (its turns come
// every second) not flooding the log. A real pino logger and a real prom-client registry.
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { Counter, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { MAINTENANCE_LOG_EVERY_MS, maintenanceReporter } from '../src/telemetry/db-maintenance.ts';

function setUp() {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      done();
    },
  });
  const log = pino({ level: 'debug' }, sink);
  const registry = new Registry();
  const counter = new Counter({ name: 'metarelay_db_maintenance_total', help: 'x', labelNames: ['outcome'] as const, registers: [registry] });
  let clock = 1_000_000;
  const report = maintenanceReporter(log, counter, () => clock);
  const counts = async () => Object.fromEntries((await counter.get()).values.map((v) => [v.labels.outcome, v.value]));
  return { lines, report, counts, tick: (ms: number) => (clock += ms) };
}

describe('the maintenance as operators see it', () => {
  it('counts each turn by outcome; a failure is a warning with its reason, then at most one warning per period, saying how many it left out', async () => {
    const { lines, report, counts, tick } = setUp();
    report({ ran: ['ANALYZE public.meta_txns'], ms: 12 });
    report({ failed: 'canceling statement due to lock timeout' });
    for (let i = 0; i < 5; i++) {
      tick(1_000);
      report({ failed: 'canceling statement due to lock timeout' });
    }
    expect(await counts()).toEqual({ ran: 1, failed: 6 });
    const warnings = () => lines.filter((l) => l.level === 40);
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]).toMatchObject({ error: 'canceling statement due to lock timeout', failedSinceLastWarning: 0 });
    expect(lines.find((l) => l.level === 20)).toMatchObject({ statements: ['ANALYZE public.meta_txns'], ms: 12 });
    tick(MAINTENANCE_LOG_EVERY_MS);
    report({ failed: 'permission denied for table meta_txns' });
    expect(warnings()).toHaveLength(2);
    expect(warnings()[1]).toMatchObject({ error: 'permission denied for table meta_txns', failedSinceLastWarning: 5 });
  });
});
