import { causes } from '../util/error.ts';
/*
 * Which database failures are weather: the server cannot serve right now (restarting, unreachable, out
 * of connections, a session ended under us, a lock not granted in time), so the same call may succeed
 * later. HTTP answers these 503 with Retry-After (http/core/db-outage.ts) and the pool retries what is safe
 * (postgres.ts); anything else is a real error (a constraint, a bad statement) and stays one.
 */

/** SQLSTATEs of a server that cannot serve now; the whole class 08 (connection exception) too. */
const UNAVAILABLE_CODES: Record<string, string> = {
  '53300': 'too many connections',
  '57P01': 'the session was ended by the server (shutdown or pg_terminate_backend)',
  '57P02': 'the server crashed',
  '57P03': 'the server is starting up or shutting down',
  '57P05': 'the session was idle too long',
  // idle_in_transaction_session_timeout: the transaction was ended (its locks freed) by the server.
  '25P03': 'a transaction was left idle past idle_in_transaction_session_timeout',
  // lock_timeout: a holder of the lock (a frozen process, a long statement) did not let go in time.
  '55P03': 'a lock was not granted within lock_timeout',
  '40P01': 'a deadlock was broken',
  '40001': 'a serialization conflict',
};

/** Node's socket errors while reaching the server. */
const NET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/** pg's own words for a connection that went away (no SQLSTATE: the socket closed). */
const LOST = /Connection terminated|connection error and is not queryable|Client was closed and is not queryable|timeout exceeded when trying to connect/;

interface Failure {
  code?: unknown;
  message?: unknown;
  cause?: unknown;
  errors?: unknown;
}

/**
 * Why the database cannot serve now, if `err` (or an error it wraps) says so; undefined for any other
 * failure. A short phrase for logs and for the 503's message (no connection details).
 */
export function databaseOutageOf(err: unknown): string | undefined {
  for (const e of causes(err) as Generator<Failure>) {
    const code = typeof e.code === 'string' ? e.code : undefined;
    if (code && Object.hasOwn(UNAVAILABLE_CODES, code)) return UNAVAILABLE_CODES[code];
    if (code?.startsWith('08')) return 'the connection to the database failed';
    if (code && NET_CODES.has(code)) return `the database cannot be reached (${code})`;
    if (typeof e.message === 'string' && LOST.test(e.message)) return 'the connection to the database was lost';
    // net.connect to several addresses (localhost: ::1 and 127.0.0.1) fails with an AggregateError.
    if (Array.isArray(e.errors) && e.errors.length) return databaseOutageOf(e.errors[0]);
  }
  return undefined;
}

/**
 * A lost connection or a refused one, as opposed to a statement the server refused while connected
 * (a lock wait, a deadlock): for the pool, the session is gone and its client must be discarded.
 */
export function isConnectionLoss(err: unknown): boolean {
  const why = databaseOutageOf(err);
  if (why === undefined) return false;
  const code = (err as Failure).code;
  return !(code === '55P03' || code === '40P01' || code === '40001');
}

/**
 * The level to log a background failure at (a loop's turn, a flush): the database lost is logged once
 * by its health (db-health.ts, services.ts), so each turn that meets it says so at debug only.
 */
export function failureLevel(err: unknown, level: 'warn' | 'error' = 'warn'): 'debug' | 'warn' | 'error' {
  return isConnectionLoss(err) ? 'debug' : level;
}
