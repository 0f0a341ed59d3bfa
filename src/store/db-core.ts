import type { DatabaseHealthEvent } from './db-health.ts';
import type { LockSession } from './leadership.ts';

// The one database interface domain code sees; PGlite and PostgreSQL both speak it. Its drivers
// (pglite.ts, postgres.ts) import this file, not db.ts, which opens them: no import circle.

/** A statement's rows. */
export interface QueryResult<T> {
  rows: T[];
  rowCount: number;
}

export interface Queryable {
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<QueryResult<T>>;
  /** Runs a script of several statements without parameters (migrations). */
  exec(sql: string): Promise<void>;
}

/**
 * Marks a statement run on a hot path (rows looked up by key, inserts, updates by key): on PostgreSQL
 * it is prepared once per connection (a named statement), so it is parsed once, and still planned for
 * its values every run (postgres.ts). Statements built per request (search, filters) stay unmarked.
 */
export const prepared = (sql: string): string => PREPARED_MARK + sql;
export const PREPARED_MARK = '/*prepared*/ ';

/** `s` as the literal part of a LIKE pattern written with ESCAPE '\': its %, _ and \ match themselves. */
export const likeEscape = (s: string): string => s.replace(/[\\%_]/g, (c) => `\\${c}`);

/** A transaction's connection. */
export interface Tx extends Queryable {
  /**
   * Makes `sql` one of the transaction's last statements, run once fn has returned, in the order they
   * were registered. On PostgreSQL they go out with the COMMIT, and on PGlite in the COMMIT's message,
   * with no client work between them: a row lock one takes is held for the server's time only, not for
   * the wait of a busy event loop before the COMMIT is sent (how long a sponsorship rule stayed locked
   * per SendMetaTxn), and a statement whose answer nothing in fn needs costs no round trip while the
   * transaction holds its connection. The first one's error rolls the transaction back and is what
   * transaction() throws. Each promise gives its statement's result once the transaction has committed
   * (undefined when it did not: transaction() throws why); awaiting it inside fn would wait forever,
   * since the statements are sent after fn returns.
   */
  atCommit<T = Record<string, unknown>>(sql: string, params?: unknown[], opts?: AtCommitOptions): Promise<QueryResult<T> | undefined>;
}

export interface AtCommitOptions {
  /**
   * Runs the statement only when the statement registered just before it answered a first row whose
   * column of this name is a number other than 0 (skipped, it answers no rows): a second statement
   * that is needed only when the first says so then costs no round trip when it is not.
   */
  onlyIf?: string;
}

/** A statement registered with Tx.atCommit. */
export interface AtCommit extends AtCommitOptions {
  sql: string;
  params?: unknown[];
}

/** Whether an atCommit statement with `onlyIf` runs, given what the one before it answered. */
export function runsAfter(onlyIf: string | undefined, before: QueryResult<unknown> | undefined): boolean {
  if (!onlyIf) return true;
  const v = (before?.rows[0] as Record<string, unknown> | undefined)?.[onlyIf];
  return v != null && Number(v) !== 0;
}

/**
 * For Db implementations: the statements a transaction's atCommit registered, in order, and the
 * settling of the promises atCommit returned (each with its statement's result once committed,
 * undefined otherwise).
 */
export function commitSlot() {
  const last: Array<AtCommit & { done: (r: QueryResult<unknown> | undefined) => void }> = [];
  return {
    atCommit<T>(sql: string, params?: unknown[], opts: AtCommitOptions = {}): Promise<QueryResult<T> | undefined> {
      return new Promise<QueryResult<T> | undefined>((resolve) => {
        last.push({ sql, params, onlyIf: opts.onlyIf, done: resolve as (r: QueryResult<unknown> | undefined) => void });
      });
    },
    get statements(): AtCommit[] {
      return last.map(({ sql, params, onlyIf }) => ({ sql, params, ...(onlyIf ? { onlyIf } : {}) }));
    },
    /** The statements' results in order, or undefined: the transaction did not commit. */
    settle(results: Array<QueryResult<unknown>> | undefined) {
      last.forEach((s, i) => s.done(results?.[i]));
    },
  };
}

export interface Db extends Queryable {
  readonly kind: 'pglite' | 'postgres';
  /** PostgreSQL: the most connections this pool opens (the boot's connection check adds them up). */
  readonly connections?: number;
  /** Runs fn inside BEGIN/COMMIT; rolls back when fn throws. */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * PostgreSQL: a pool of its own, of at most `max` connections, on the same database, so work that
   * must not wait behind a flood of requests (the relayer's dispatcher) has connections of its own.
   * PGlite (one connection, in a worker thread): a handle on the same connection whose statements go
   * ahead of the others waiting for it; its close() does nothing (this Db's closes the connection).
   */
  dedicated?(max: number): Promise<Db>;
  /**
   * Tells `listener` what each turn of the service's own vacuum and analysis did (maintenance.ts), in
   * place of the listener set before. A dedicated pool runs none.
   */
  onMaintenance?(listener: MaintenanceListener): void;
  /**
   * PostgreSQL: tells `listener` when the database stops answering for want of a connection or a
   * session, and when it answers again (db-health.ts), once each; in place of the listener set before.
   */
  onHealth?(listener: (e: DatabaseHealthEvent) => void): void;
  /**
   * PostgreSQL: one connection outside the pools, for session-level advisory locks (leadership.ts); the
   * server ends it after `idleTimeoutMs` without a statement (a frozen or cut-off holder lets go). PGlite
   * has none: one process per database.
   */
  lockSession?(idleTimeoutMs: number): Promise<LockSession>;
  close(): Promise<void>;
}

/** What a turn of the maintenance did: the statements it ran and how long they took, or why it failed. */
export type MaintenanceReport = { ran: string[]; ms: number } | { failed: string };
/** Told of each turn that ran statements or failed (Db.onMaintenance); a turn with nothing due says nothing. */
export type MaintenanceListener = (report: MaintenanceReport) => void;
