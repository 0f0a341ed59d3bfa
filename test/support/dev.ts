// `metarelay dev` for the tests that start it: a folder of its own (data and manifest), the run's
// database backend (PostgreSQL: a database of its own, by DATABASE_URL), and the process.
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inject } from 'vitest';
import type { DevServiceManifest } from '../../src/cli/dev.ts';
import { REPO_ROOT } from '../../src/devchain/index.ts';
import { startCli, type LongRunning } from './cli.ts';
import { createTestDb, type TestDb } from './db.ts';
import { TEST_DB } from './env.ts';

export interface DevFolder {
  dir: string;
  /** --data: the solc cache (data/cache) and, on PGlite, the database (data/db). */
  data: string;
  manifestPath: string;
  /** PostgreSQL: the database dev runs on (DATABASE_URL); PGlite: undefined, it is data/db. */
  testDb?: TestDb;
  env: Record<string, string>;
  /** Starts dev on this folder (on `port`, else a free one it picks); wait for it with ready(). */
  start(port?: number): LongRunning;
  manifest(): DevServiceManifest;
  remove(): Promise<void>;
}

/**
 * A folder for `metarelay dev`. `newcomer`: nothing in it, as on a first `npm start` (solc compiles
 * every contract, PGlite creates and migrates its database); one test (cli.test.ts) starts that way.
 * Otherwise it holds what a second start finds: the contracts the chain tests compiled (the shared
 * solc cache) and, on PGlite, the run's migrated template database, as PostgreSQL's half gets its
 * database from the migrated template too.
 */
export async function devFolder(opts: { newcomer?: boolean } = {}): Promise<DevFolder> {
  const dir = mkdtempSync(join(tmpdir(), 'metarelay-dev-'));
  const data = join(dir, 'data');
  const manifestPath = join(dir, 'manifest.json');
  if (!opts.newcomer) {
    const compiled = join(REPO_ROOT, 'node_modules/.cache/metarelay/solc');
    if (existsSync(compiled)) cpSync(compiled, join(data, 'cache'), { recursive: true });
    if (TEST_DB === 'pglite') cpSync(inject('dbTemplate'), join(data, 'db'), { recursive: true });
  }
  const testDb = TEST_DB === 'postgres' ? await createTestDb() : undefined;
  const env: Record<string, string> = testDb ? { DATABASE_URL: testDb.location } : {};
  return {
    dir,
    data,
    manifestPath,
    testDb,
    env,
    start: (port = 0) => startCli(['dev', '--port', String(port), '--data', data, '--manifest', manifestPath], env),
    manifest: () => JSON.parse(readFileSync(manifestPath, 'utf8')) as DevServiceManifest,
    async remove() {
      await testDb?.drop().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Waits for dev's "ready" line (it follows the manifest's writing). */
export async function ready(dev: LongRunning, timeoutMs = 90_000): Promise<void> {
  await dev.waitFor(/metarelay dev is ready/, timeoutMs);
}
