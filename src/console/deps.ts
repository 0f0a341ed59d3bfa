import type { AdminTokenStore } from '../access/admin-tokens.ts';
import type { ConsoleQueries } from './queries.ts';
import type { SessionStore } from './sessions.ts';

/** What every group of console methods works with; `S`, the part of the services the group reads (its own Pick of them). */
export interface ConsoleDeps<S> {
  s: S;
  q: ConsoleQueries;
  sessions: SessionStore;
  tokens: AdminTokenStore;
}
