/** The one database interface domain code sees; PGlite and PostgreSQL both speak it. */
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
 * Marks a statement whose plan does not depend on its values (rows looked up by key, inserts, updates
 * by key): on PostgreSQL it is prepared once per connection and runs on a generic plan, without being
 * planned again each time (planning was half of PostgreSQL's CPU per SendMetaTxn). Not for statements
 * over skewed data (search, filters), where the values choose the plan: those stay unmarked.
 */
export const prepared = (sql: string): string => PREPARED_MARK + sql;
export const PREPARED_MARK = '/*prepared*/ ';

/** A transaction's connection. */
export interface Tx extends Queryable {
  /**
   * Makes `sql` the transaction's last statement, run once fn has returned. On PostgreSQL it goes out
   * with the COMMIT, with no client work between them: a row lock it takes is held for the server's
   * time only, not for the wait of a busy event loop before the COMMIT is sent (how long a sponsorship
   * rule stayed locked per SendMetaTxn). Its error rolls the transaction back and is what transaction()
   * throws. At most one per transaction. The promise gives its result once the transaction has
   * committed (undefined when it did not: transaction() throws why); awaiting it inside fn would wait
   * forever, since the statement is sent after fn returns.
   */
  atCommit<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<QueryResult<T> | undefined>;
}

export interface Db extends Queryable {
  readonly kind: 'pglite' | 'postgres';
  /** Runs fn inside BEGIN/COMMIT; rolls back when fn throws. */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * PostgreSQL: a pool of its own, of at most `max` connections, on the same database, so work that
   * must not wait behind a flood of requests (the relayer's dispatcher) has connections of its own.
   * PGlite (one connection in this process): undefined, the caller keeps this Db.
   */
  dedicated?(max: number): Promise<Db>;
  close(): Promise<void>;
}

export function isPostgresUrl(location: string): boolean {
  return /^postgres(ql)?:\/\//i.test(location);
}

/** Opens PostgreSQL for a postgres:// URL, PGlite otherwise (a folder, or `memory://`). */
export async function openDb(location: string): Promise<Db> {
  if (isPostgresUrl(location)) {
    const { openPostgres } = await import('./postgres.ts');
    return openPostgres(location);
  }
  const { openPglite } = await import('./pglite.ts');
  return openPglite(location);
}
