import type pg from 'pg';
import { PREPARED_MARK } from './db-core.ts';
import type { DatabaseHealth } from './db-health.ts';
import { databaseOutageOf } from './outage.ts';
import { askAgain, listed } from '../util/ask-again.ts';

/** Pauses before the second and third try of a call that failed where retrying it is safe (below). */
const RETRY_PAUSES_MS = [50, 250];

/** Failures that happened before anything of the call reached the server: retrying cannot do it twice. */
export const notRun = new WeakSet<object>();
export const markNotRun = (err: unknown) => {
  if (err && typeof err === 'object') notRun.add(err);
  return err;
};

/**
 * A statement that only reads: sent again after its connection died mid-flight, it cannot have changed
 * anything. Conservative: a SELECT (or WITH) naming no write, lock or sequence; anything else is not
 * retried once sent, since the server may have committed it before the connection went (an autocommit
 * statement's COMMIT and the socket's close race).
 */
const WRITES = /\b(INSERT|UPDATE|DELETE|MERGE|TRUNCATE|COPY|FOR\s+(NO\s+KEY\s+)?(UPDATE|SHARE|KEY\s+SHARE)|nextval|setval|pg_advisory\w*|pg_try_advisory\w*|pg_notify|set_config|lo_\w+)\b/i;
export function isReadOnly(sql: string): boolean {
  const text = sql.startsWith(PREPARED_MARK) ? sql.slice(PREPARED_MARK.length) : sql;
  return /^\s*(SELECT|WITH)\b/i.test(text) && !WRITES.test(text);
}

/**
 * Runs `attempt` again (twice at most, after a short pause) when it failed with the database unavailable
 * and `safe` says a second run cannot do anything twice; a longer outage is the caller's to answer (HTTP:
 * 503 with Retry-After; loops: their next turn). `health` hears of the outcome.
 */
export async function retrying<T>(attempt: () => Promise<T>, safe: (err: unknown) => boolean, health?: DatabaseHealth): Promise<T> {
  let startedAt = 0;
  try {
    const out = await askAgain(
      () => {
        startedAt = Date.now();
        return attempt();
      },
      (err) => databaseOutageOf(err) !== undefined && safe(err),
      RETRY_PAUSES_MS.length + 1,
      listed(RETRY_PAUSES_MS),
    );
    health?.answered(startedAt);
    return out;
  } catch (err) {
    health?.failed(err);
    throw err;
  }
}

/**
 * A client checked out of the pool, listening for its connection's death. pg emits 'error' on a client
 * whose connection ends (a server restart, pg_terminate_backend, idle_in_transaction_session_timeout);
 * the pool listens only while the client is idle in it, and an 'error' nobody listens to exits the
 * process. Here it is recorded: the statement in flight fails by itself, and the client is released
 * with the error, so the pool destroys it instead of handing a dead connection out again.
 */
export class Held {
  lost: Error | undefined;
  private readonly onError = (err: Error) => {
    this.lost ??= err;
  };

  private constructor(readonly client: pg.PoolClient) {
    client.on('error', this.onError);
  }

  /** A client of the pool; a failure to get one (server down, full, starting) is marked as run nowhere. */
  static async of(pool: pg.Pool): Promise<Held> {
    try {
      return new Held(await pool.connect());
    } catch (err) {
      throw markNotRun(err);
    }
  }

  /** Back to the pool, or destroyed when its connection is gone or `err` (a failed ROLLBACK) leaves it unusable. */
  release(err?: unknown) {
    const bad = this.lost ?? (err as Error | undefined);
    this.client.release(bad ?? undefined);
    this.client.removeListener('error', this.onError);
  }
}
