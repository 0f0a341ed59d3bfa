import type { Queryable } from './db.ts';
import { APPLICATION_NAME, APPLICATION_PREFIX } from './pg-session.ts';

/** What the server allows and what is connected, read at a process's start. */
export interface ConnectionBudget {
  /** max_connections. */
  max: number;
  /** Of them, kept for superusers (superuser_reserved_connections, reserved_connections). */
  reserved: number;
  /** Other metarelay processes connected now (by application_name, pg-session.ts). */
  otherProcesses: number;
  /** Connections of clients that are not metarelay. */
  otherClients: number;
  /** The most this process opens (its pools' sizes). */
  own: number;
  /** The fleet's most: every metarelay process seen, and this one, at `own` each, plus the other clients. */
  fleet: number;
}

const READ = `SELECT current_setting('max_connections')::int AS max,
  current_setting('superuser_reserved_connections')::int + coalesce(nullif(current_setting('reserved_connections', true), '')::int, 0) AS reserved,
  (SELECT count(DISTINCT application_name) FROM pg_stat_activity
    WHERE backend_type = 'client backend' AND starts_with(application_name, $1) AND application_name <> $2)::int AS others,
  (SELECT count(*) FROM pg_stat_activity
    WHERE backend_type = 'client backend' AND NOT starts_with(coalesce(application_name, ''), $1))::int AS clients`;

/**
 * The server's connection limit against what the fleet may open: each metarelay process opens up to
 * `own` connections, and a process that finds none free answers 503 until one is. Processes are
 * counted as they are connected now (one started later is not seen), so the check is made at every start.
 */
export async function connectionBudget(q: Queryable, own: number): Promise<ConnectionBudget> {
  const r = await q.query<{ max: number; reserved: number; others: number; clients: number }>(READ, [APPLICATION_PREFIX, APPLICATION_NAME]);
  const { max, reserved, others, clients } = r.rows[0];
  // The check's own connection is one of the clients counted only if it is not ours: it is ours.
  return { max, reserved, otherProcesses: others, otherClients: clients, own, fleet: (others + 1) * own + clients };
}

/** The boot's one warning line when the fleet may open more connections than the server gives, saying what to change. */
export function connectionWarning(b: ConnectionBudget): string | undefined {
  const usable = b.max - b.reserved;
  if (b.fleet <= usable) return undefined;
  const processes = b.otherProcesses + 1;
  return (
    `PostgreSQL may run out of connections: max_connections is ${b.max} (${usable} without the superuser reserve); ` +
    (processes === 1 ? `this metarelay process may open up to ${b.own}` : `${processes} metarelay processes (this one and ${b.otherProcesses} connected) may open up to ${b.own} each`) +
    `${b.otherClients ? `, and other clients hold ${b.otherClients}` : ''}: ${b.fleet} in all. ` +
    `Lower postgres.poolSize, raise max_connections, or put a pooler (PgBouncer, session mode) in front; ` +
    `while none is free, calls answer 503`
  );
}
