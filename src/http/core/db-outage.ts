import { databaseOutageOf } from '../../store/outage.ts';
import { RpcError, type ErrorDef } from './errors.ts';

/**
 * What a client is told to wait before calling again while the database cannot serve: a restart or a
 * failover takes seconds, a pool out of connections frees one within a request's time.
 */
export const DATABASE_RETRY_AFTER_S = 2;

/**
 * The 503 for a call that failed because the database cannot serve now (store/outage.ts), in the
 * service's own words (`def`, its table's Unavailable); undefined for any other failure. Not logged per
 * request: the outage is every request's, and /ready says so.
 */
export function databaseUnavailable(def: ErrorDef, err: unknown): RpcError | undefined {
  const why = databaseOutageOf(err);
  if (why === undefined) return undefined;
  return new RpcError(def, `the database cannot serve now (${why}); retry in ${DATABASE_RETRY_AFTER_S} s`, { 'Retry-After': String(DATABASE_RETRY_AFTER_S) });
}
