import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inject } from 'vitest';
import { openDb, type Db } from '../../src/store/db.ts';
import { TEST_DB, TEST_PG_URL, pgUrlFor } from './env.ts';

let counter = 0;

export interface TestDb {
  db: Db;
  /** What config.database would hold to open this same database from another process. */
  location: string;
  drop(): Promise<void>;
}

/** A fresh, migrated database of the run's backend, private to the caller. */
export async function createTestDb(): Promise<TestDb> {
  const template = inject('dbTemplate');
  const runId = inject('runId');
  const n = `${process.pid}_${++counter}`;
  if (TEST_DB === 'pglite') {
    const dir = mkdtempSync(join(tmpdir(), 'metarelay-db-'));
    cpSync(template, dir, { recursive: true });
    const db = await openDb(dir);
    return {
      db,
      location: dir,
      async drop() {
        await db.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const name = `metarelay_t_${runId}_${n}`;
  const admin = await openDb(TEST_PG_URL);
  try {
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
  } finally {
    await admin.close();
  }
  const location = pgUrlFor(name);
  const db = await openDb(location);
  return {
    db,
    location,
    async drop() {
      await db.close();
      const a = await openDb(TEST_PG_URL);
      try {
        await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await a.close();
      }
    },
  };
}
