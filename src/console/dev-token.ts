import type { Db } from '../store/db.ts';
import { adminTokenStore } from '../access/admin-tokens.ts';

/**
 * The admin token `metarelay dev` prints for signing in to the console: the previous run's (from its
 * manifest) while it is still valid, so restarts do not pile up tokens; else a new one.
 */
export async function devAdminToken(db: Db, previous: unknown): Promise<string> {
  const tokens = adminTokenStore(db, []);
  if (typeof previous === 'string' && (await tokens.verify(previous))) return previous;
  return (await tokens.create('dev')).token;
}
