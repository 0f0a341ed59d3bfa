import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import type { TestProject } from 'vitest/node';
import { compileContracts } from '../../src/devchain/compile.ts';
import { openDb } from '../../src/store/db.ts';
import { loadMigrations, migrate } from '../../src/store/migrate.ts';
import { TEST_DB, TEST_PG_URL, pgUrlFor } from './env.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    dbTemplate: string;
    runId: string;
  }
}

const CACHE = resolve('node_modules/.cache/metarelay');

function migrationsHash(): string {
  const pglite = JSON.parse(readFileSync('node_modules/@electric-sql/pglite/package.json', 'utf8')).version;
  const h = createHash('sha256').update(pglite);
  for (const m of loadMigrations()) h.update(m.name).update(m.sql);
  return h.digest('hex').slice(0, 16);
}

/** A migrated PGlite folder, built once per schema version and copied by each test. */
async function pgliteTemplate(): Promise<string> {
  const dir = resolve(CACHE, `pglite-template-${migrationsHash()}`);
  if (existsSync(dir)) return dir;
  mkdirSync(CACHE, { recursive: true });
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  const db = await openDb(tmp);
  await migrate(db);
  await db.close();
  try {
    renameSync(tmp, dir);
  } catch (err) {
    // Another run (a worktree sharing node_modules, the other database half) built the same template
    // at the same time and renamed it into place first: theirs is as good as ours.
    rmSync(tmp, { recursive: true, force: true });
    if (!existsSync(dir)) throw err;
  }
  return dir;
}

export default async function setup(project: TestProject) {
  // The sample contracts, compiled once before any test starts (cached across runs in node_modules):
  // on a fresh clone every test file that starts a chain compiled them at once inside its own set-up,
  // and under a CPU hog those concurrent solc runs took 200 s each and timed the set-ups out.
  await compileContracts({ cacheDir: resolve(CACHE, 'solc') });
  const runId = `${process.pid}_${Date.now().toString(36)}`;
  project.provide('runId', runId);
  if (TEST_DB === 'pglite') {
    project.provide('dbTemplate', await pgliteTemplate());
    return;
  }
  let admin;
  try {
    admin = await openDb(TEST_PG_URL);
  } catch (err) {
    throw new Error(`PostgreSQL tests need a server at ${TEST_PG_URL} (set METARELAY_TEST_PG_URL): ${(err as Error).message}`);
  }
  const template = `metarelay_tpl_${runId}`;
  await admin.query(`CREATE DATABASE ${template}`);
  const tdb = await openDb(pgUrlFor(template));
  await migrate(tdb);
  await tdb.close();
  project.provide('dbTemplate', template);
  return async () => {
    const left = await admin.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname LIKE $1`, [`metarelay_%${runId}%`]);
    for (const { datname } of left.rows) await admin.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
    await admin.close();
  };
}
