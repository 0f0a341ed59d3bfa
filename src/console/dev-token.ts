import { existsSync, readFileSync } from 'node:fs';
import type { Db } from '../store/db.ts';
import { adminTokenStore } from './admin-tokens.ts';

/**
 * The admin token `metarelay dev` prints for signing in to the console: the previous run's (read
 * back from its manifest) while it is still valid, so restarts do not pile up tokens; else a new one.
 */
export async function devAdminToken(db: Db, manifestPath: string): Promise<string> {
  const tokens = adminTokenStore(db, []);
  if (existsSync(manifestPath)) {
    try {
      const prev = JSON.parse(readFileSync(manifestPath, 'utf8')) as { adminToken?: unknown };
      if (typeof prev.adminToken === 'string' && (await tokens.verify(prev.adminToken))) return prev.adminToken;
    } catch {
      /* an unreadable manifest just means a new token */
    }
  }
  return (await tokens.create('dev')).token;
}
