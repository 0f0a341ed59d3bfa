import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { loadConfig } from '../config/load.ts';
import { envSecret } from '../config/secrets.ts';
import type { AppConfig } from '../config/schema.ts';
import { openDb, type Db } from '../store/db.ts';
import { migrate } from '../store/migrate.ts';
import { UsageError } from './usage-error.ts';

/** The flags every database command takes: a config file, and a database that overrides it. */
export const DB_FLAGS = { config: { type: 'string' }, database: { type: 'string' } } as const;

export interface DbFlagValues {
  config?: string;
  database?: string;
}

export function configFrom(values: DbFlagValues): AppConfig {
  return loadConfig({ file: values.config, overrides: values.database ? { database: values.database } : {} });
}

/**
 * The database a command that opens one (and would create and migrate it) is to use. Named by --config,
 * --database or DATABASE_URL, it is used as given. Named by nothing, the default folder (what `npm start`
 * makes) is used only where it exists, and said on stderr: a database created there silently took a
 * project or an admin token the server, configured elsewhere, never sees.
 */
export function databaseFor(values: DbFlagValues, env: NodeJS.ProcessEnv = process.env): AppConfig {
  const config = configFrom(values);
  if (values.config || values.database || envSecret(env, 'DATABASE_URL')) return config;
  const folder = resolve(config.database);
  if (!existsSync(folder)) {
    throw new UsageError(
      `no database named: give --config FILE (the server's config), --database URL|PATH or DATABASE_URL. Without them only an existing ${config.database} (what \`metarelay dev\` makes) is used, and there is none at ${folder}`,
    );
  }
  console.error(`metarelay: no --config: using the dev database at ${folder}`);
  return config;
}

/** Opens the configured database, migrates it, runs fn, and closes it whatever happens. */
export async function withDb<T>(values: DbFlagValues, fn: (db: Db, config: AppConfig) => Promise<T>): Promise<T> {
  const config = databaseFor(values);
  const db = await openDb(config.database, config.postgres);
  try {
    await migrate(db);
    return await fn(db, config);
  } finally {
    await db.close();
  }
}
