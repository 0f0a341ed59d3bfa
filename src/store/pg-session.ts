import { hostname } from 'node:os';

/** How this process's PostgreSQL connections are sized and bounded (config `postgres`, docs/production.md). */
export interface PgSession {
  /** Connections of the main pool (requests, loops); the dispatchers have a few of their own. */
  poolSize: number;
  /**
   * `lock_timeout`: a statement waiting longer than this for a lock fails (SQLSTATE 55P03, answered 503
   * with Retry-After) instead of waiting on a frozen holder forever. 0: no limit.
   */
  lockTimeoutMs: number;
  /**
   * `idle_in_transaction_session_timeout`: a session left idle inside a transaction this long is ended by
   * the server, which frees its locks (a process frozen mid-transaction, SIGSTOP or a stalled VM, would
   * otherwise hold every row it locked). 0: no limit.
   */
  idleInTransactionTimeoutMs: number;
}

/**
 * Bounds long enough for any transaction of the service's own (they lock a few rows by key and commit
 * within milliseconds; the one that waits on a chain node, the sender refill, lifts the idle bound for
 * itself) and short enough that a frozen process stalls the others for seconds, not until its lease ends.
 */
export const PG_SESSION_DEFAULTS: Readonly<PgSession> = Object.freeze({ poolSize: 10, lockTimeoutMs: 5_000, idleInTransactionTimeoutMs: 10_000 });

/** The startup `options` of every connection: the plan mode (postgres.ts) and the two bounds, in ms. */
export function sessionOptions(s: PgSession): string {
  return `-c plan_cache_mode=force_generic_plan -c lock_timeout=${s.lockTimeoutMs} -c idle_in_transaction_session_timeout=${s.idleInTransactionTimeoutMs}`;
}

/**
 * `application_name` of this process's connections: `metarelay` and where it runs, so pg_stat_activity
 * tells the processes apart (the boot's connection check counts them; an operator sees whose they are).
 * PostgreSQL keeps 63 bytes of it.
 */
export const APPLICATION_NAME = `metarelay ${hostname().slice(0, 40)} ${process.pid}`;
export const APPLICATION_PREFIX = 'metarelay ';
