import { loadConfig } from '../config/load.ts';
import type { AppConfig } from '../config/schema.ts';
import { openDb, type Db } from '../store/db.ts';
import { migrate } from '../store/migrate.ts';

/** The flags every database command takes: a config file, and a database that overrides it. */
export const DB_FLAGS = { config: { type: 'string' }, database: { type: 'string' } } as const;

export interface DbFlagValues {
  config?: string;
  database?: string;
}

export function configFrom(values: DbFlagValues): AppConfig {
  return loadConfig({ file: values.config, overrides: values.database ? { database: values.database } : {} });
}

/** Opens the configured database, migrates it, runs fn, and closes it whatever happens. */
export async function withDb<T>(values: DbFlagValues, fn: (db: Db, config: AppConfig) => Promise<T>): Promise<T> {
  const config = configFrom(values);
  const db = await openDb(config.database);
  try {
    await migrate(db);
    return await fn(db, config);
  } finally {
    await db.close();
  }
}
