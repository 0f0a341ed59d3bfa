// Opening the database. Domain code imports its types from here (re-exported from db-core.ts, which the
// drivers import so that opening them makes no circle).
import type { PgSession } from './pg-session.ts';
import type { Db } from './db-core.ts';

export * from './db-core.ts';

export function isPostgresUrl(location: string): boolean {
  return /^postgres(ql)?:\/\//i.test(location);
}

/**
 * Opens PostgreSQL for a postgres:// URL, PGlite otherwise (a folder, or `memory://`). `session`: the
 * PostgreSQL connections' pool size and bounds (config `postgres`; ignored by PGlite).
 */
export async function openDb(location: string, session?: PgSession): Promise<Db> {
  if (isPostgresUrl(location)) {
    const { openPostgres } = await import('./postgres.ts');
    return openPostgres(location, { session });
  }
  const { openPglite } = await import('./pglite.ts');
  return openPglite(location);
}
