import { databaseOutageOf, isConnectionLoss } from './outage.ts';

/** A change of the database's availability as this process sees it. */
export type DatabaseHealthEvent = { state: 'down'; cause: string } | { state: 'up'; cause: string; downMs: number };

/**
 * Whether PostgreSQL answers, as the process's own calls find it: down at the first call that fails
 * for want of a connection or a session (store/outage.ts), up again at the first begun since that
 * succeeds (a call already under way when the server went may still finish). Told
 * once per change, so an outage is logged once (services.ts) however many calls and loop turns meet it;
 * a pool and its dedicated pools share one.
 */
export class DatabaseHealth {
  private down: { since: number; cause: string } | undefined;
  listener: ((e: DatabaseHealthEvent) => void) | undefined;

  get ok(): boolean {
    return this.down === undefined;
  }

  failed(err: unknown): void {
    if (this.down || !isConnectionLoss(err)) return;
    this.down = { since: Date.now(), cause: databaseOutageOf(err)! };
    this.listener?.({ state: 'down', cause: this.down.cause });
  }

  /** A call that began at `startedAt` (Date.now()) succeeded: one begun before the outage proves nothing. */
  answered(startedAt: number): void {
    if (!this.down || startedAt < this.down.since) return;
    const { since, cause } = this.down;
    this.down = undefined;
    this.listener?.({ state: 'up', cause, downMs: Date.now() - since });
  }
}
