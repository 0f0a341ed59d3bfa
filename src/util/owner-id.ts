import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';

/**
 * `host:pid:random`: who holds a lease or a claim in the shared database. A process restarted on the
 * same host can tell a dead predecessor's lease by its pid (engine/ledger.ts), and two processes never
 * share one.
 */
export function ownerId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
}
