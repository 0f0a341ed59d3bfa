import type { Services } from '../services.ts';
import type { AdminTokenStore } from '../access/admin-tokens.ts';
import type { ConsoleQueries } from './queries.ts';
import type { SessionStore } from './sessions.ts';

/** What every group of console methods works with. */
export interface ConsoleDeps {
  s: Services;
  q: ConsoleQueries;
  sessions: SessionStore;
  tokens: AdminTokenStore;
}
