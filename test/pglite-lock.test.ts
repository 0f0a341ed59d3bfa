// A PGlite folder is one process's: a second process is refused with a message naming the holder
// and the way around it, and writes nothing; after the holder closes, the second gets in; a lock
// left by a process that died is taken over. The folder is PGlite whichever backend the run uses,
// since the lock exists only for PGlite.

import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb, type Db } from '../src/store/db.ts';
import { FolderInUseError, LOCK_FILE } from '../src/store/folder-lock.ts';
import { migrate } from '../src/store/migrate.ts';
import { runCli, runNode } from './support/cli.ts';

let dir: string;
const lockPath = () => join(dir, LOCK_FILE);
// DATABASE_URL would win over --database in a postgres run.
const cli = (args: string[]) => runCli([...args, '--database', dir], { DATABASE_URL: '' });
const projectNames = async (db: Db) => (await db.query<{ name: string }>('SELECT name FROM projects ORDER BY name')).rows.map((r) => r.name);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'metarelay-lock-'));
  const db = await openDb(dir);
  await migrate(db);
  await db.close();
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('the lock on a PGlite folder', () => {
  it('refuses a second process while the first holds the folder, and lets it in once the first closes', async () => {
    const db = await openDb(dir);
    try {
      expect(readFileSync(lockPath(), 'utf8').trim()).toBe(String(process.pid));
      const refused = await cli(['projects', 'create', 'while-held']);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(`is in use by process ${process.pid}`);
      expect(refused.stderr).toContain('/rpc/Console/');
      expect(refused.stderr).toContain('Stop that process first');
      expect(refused.stderr).not.toMatch(/\n\s+at /); // a message, not a stack trace
      expect(await projectNames(db)).toEqual([]);
      // The refused process left the holder's lock alone.
      expect(readFileSync(lockPath(), 'utf8').trim()).toBe(String(process.pid));
      // A second handle in this same process would be a second writer too.
      await expect(openDb(dir)).rejects.toBeInstanceOf(FolderInUseError);
    } finally {
      await db.close();
    }
    expect(existsSync(lockPath())).toBe(false);

    const created = await cli(['projects', 'create', 'after-close']);
    expect(created.code, created.stderr).toBe(0);
    expect(existsSync(lockPath())).toBe(false);
    const again = await openDb(dir);
    try {
      expect(await projectNames(again)).toEqual(['after-close']);
    } finally {
      await again.close();
    }
  });

  it('is released when the holding process exits without closing the database', async () => {
    const script = `const { openDb } = await import(${JSON.stringify(resolve('src/store/db.ts'))});
      const { readFileSync } = await import('node:fs');
      await openDb(process.argv[1]);
      process.stdout.write(readFileSync(process.argv[1] + '/${LOCK_FILE}', 'utf8'));
      process.exit(0);`;
    const run = await runNode(['--import', 'tsx', '--input-type=module', '-e', script, dir]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.trim()).toMatch(/^\d+$/); // it held the lock
    expect(existsSync(lockPath())).toBe(false);
  });

  it('takes over a lock left by a process that is no longer alive', async () => {
    const dead = await runNode(['-e', 'process.stdout.write(String(process.pid))']);
    const deadPid = Number(dead.stdout);
    expect(deadPid).toBeGreaterThan(0);
    writeFileSync(lockPath(), `${deadPid}\n`);

    const created = await cli(['projects', 'create', 'over-stale']);
    expect(created.code, created.stderr).toBe(0);
    expect(existsSync(lockPath())).toBe(false);
    const db = await openDb(dir);
    try {
      expect(await projectNames(db)).toEqual(['after-close', 'over-stale']);
    } finally {
      await db.close();
    }
  });
});
