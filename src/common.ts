// What every domain is built with (ponder's Common): the config, the log, the metrics, the database, the
// clock and the process's shutdown list. Built once by the wiring (services.ts) and handed to each
// domain's create<Domain>(common, …), so none of them opens, measures or closes anything on its own terms.
import type { AppConfig } from './config/schema.ts';
import { connectionBudget, connectionWarning } from './store/connection-budget.ts';
import { openDb, type Db } from './store/db.ts';
import { migrate } from './store/migrate.ts';
import { maintenanceReporter } from './telemetry/db-maintenance.ts';
import { createLogger, type Logger } from './telemetry/logger.ts';
import { createMetrics, type Metrics } from './telemetry/metrics.ts';
import { FleetShare } from './util/fleet-share.ts';

/**
 * What close() lets go of once the loops are stopped: each domain adds what it opened, and they go last
 * first (a domain built on another closes before it; the database, opened first, goes last), one at a time.
 */
export interface Shutdown {
  add(close: () => unknown): void;
  run(): Promise<void>;
}

export interface Common {
  config: AppConfig;
  log: Logger;
  metrics: Metrics;
  db: Db;
  /** Milliseconds since the epoch; one place to read the time from. */
  clock: () => number;
  shutdown: Shutdown;
  /** The API processes sharing each configured rate (util/fleet-share.ts): 1 until the wiring counts them (startApi). */
  fleet: FleetShare;
}

export interface CommonOptions {
  log?: Logger;
  /** An already-open database (tests share a prepared one, and close it themselves); otherwise config.database is opened. */
  db?: Db;
  /** Apply pending migrations at start (default true). */
  migrate?: boolean;
}

export function shutdownList(): Shutdown {
  const closers: Array<() => unknown> = [];
  return {
    add: (close) => void closers.push(close),
    async run() {
      while (closers.length) await closers.pop()!();
    },
  };
}

/** Opens (and migrates) the database and builds the log and the metrics the domains share. */
export async function createCommon(config: AppConfig, opts: CommonOptions = {}): Promise<Common> {
  const log = opts.log ?? createLogger(config.logLevel);
  const metrics = createMetrics();
  const db = opts.db ?? (await openDb(config.database, config.postgres));
  db.onMaintenance?.(maintenanceReporter(log, metrics.dbMaintenance));
  // Once per outage, as a chain node's: the calls that meet it answer 503 without a line each.
  db.onHealth?.((e) => (e.state === 'down' ? log.warn({ cause: e.cause }, 'database unavailable') : log.info({ downMs: e.downMs, cause: e.cause }, 'database reachable again')));
  try {
    if (opts.migrate !== false) {
      const applied = await migrate(db);
      if (applied.length) log.info({ applied }, 'database migrated');
    }
  } catch (err) {
    if (!opts.db) await db.close();
    throw err;
  }
  const shutdown = shutdownList();
  if (!opts.db) shutdown.add(() => db.close());
  const fleet = new FleetShare();
  metrics.fleetApiProcesses.set(fleet.size);
  return { config, log, metrics, db, clock: Date.now, shutdown, fleet };
}

/**
 * One line at start when processes × pools may pass max_connections (PostgreSQL): past it, calls answer
 * 503. `extra`: connections of pools of the domains' own (the dispatchers'); the leader election's one
 * connection is counted in.
 */
export async function warnConnectionBudget({ db, log }: Common, extra: number): Promise<void> {
  if (db.kind !== 'postgres') return;
  const budget = await connectionBudget(db, (db.connections ?? 0) + extra + 1).catch(() => undefined);
  const warning = budget && connectionWarning(budget);
  if (warning) log.warn({ connections: budget }, warning);
}
