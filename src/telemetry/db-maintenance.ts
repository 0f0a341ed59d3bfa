import type { Counter } from 'prom-client';
import type { MaintenanceListener } from '../store/maintenance.ts';
import type { Logger } from './logger.ts';

/**
 * A failing maintenance is logged at most once per this long: while it fails, its turns come every second
 * (store/maintenance.ts), and each one is counted in the metric.
 */
export const MAINTENANCE_LOG_EVERY_MS = 10 * 60_000;

/**
 * What the service's own vacuum and analysis did, for operators: a counter by outcome, and a warning when
 * it fails (a lock held by a migration, a role that may not vacuum). Silent, a failing maintenance left
 * plans made for a fraction of the tables' size in place with nobody told.
 */
export function maintenanceReporter(log: Logger, counter: Counter<'outcome'>, now: () => number = Date.now): MaintenanceListener {
  let loggedAt = Number.NEGATIVE_INFINITY;
  let notLogged = 0;
  return (report) => {
    if ('failed' in report) {
      counter.inc({ outcome: 'failed' });
      if (now() - loggedAt < MAINTENANCE_LOG_EVERY_MS) {
        notLogged++;
        return;
      }
      log.warn({ error: report.failed, failedSinceLastWarning: notLogged }, 'database maintenance failed (vacuum/analyse); what was due is tried again at the next turn');
      loggedAt = now();
      notLogged = 0;
      return;
    }
    counter.inc({ outcome: 'ran' });
    log.debug({ statements: report.ran, ms: report.ms }, 'database maintenance');
  };
}
