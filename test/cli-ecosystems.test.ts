// `metarelay ecosystems`: groups of projects whose ecosystem sponsorship rules cover them all. Run
// in-process (the commands are the binary's own functions) on a database of the run's backend.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runEcosystems } from '../src/cli/ecosystems.ts';
import { UsageError } from '../src/cli/main.ts';
import { openDb } from '../src/store/db.ts';
import { projectRepo } from '../src/store/projects.ts';
import { createTestDb, type TestDb } from './support/db.ts';

let t: TestDb;
beforeAll(async () => {
  t = await createTestDb();
  // The commands open the database themselves (PGlite allows one opener at a time).
  await t.db.close();
});
afterAll(async () => {
  await t?.drop();
});

/** What a command printed on stdout, as JSON lines. */
async function run(fn: (argv: string[]) => Promise<void>, argv: string[]) {
  const lines: unknown[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((s: string) => void lines.push(JSON.parse(s)));
  const err = vi.spyOn(console, 'error').mockImplementation(() => undefined);
  try {
    await fn([...argv, '--database', t.location]);
  } finally {
    log.mockRestore();
    err.mockRestore();
  }
  return lines as any[];
}

describe('metarelay ecosystems', () => {
  it('adds an ecosystem, puts projects in and out of it, and lists who is in', async () => {
    const [eco] = await run(runEcosystems, ['add', 'games']);
    expect(eco).toMatchObject({ name: 'games', projectIds: [] });
    const setup = await openDb(t.location);
    await projectRepo(setup).create('arcade');
    await projectRepo(setup).create('studio');
    await setup.close();
    expect(await run(runEcosystems, ['join', 'games', '--project', 'arcade'])).toEqual([{ project: 'arcade', ecosystem: { id: eco.id, name: 'games' } }]);
    await run(runEcosystems, ['join', 'games', '--project', 'studio']);
    expect(await run(runEcosystems, ['leave', '--project', 'studio'])).toEqual([{ project: 'studio', ecosystem: null }]);
    const [listed] = await run(runEcosystems, ['list']);
    expect(listed).toMatchObject({ id: eco.id, name: 'games' });
    expect(listed.projectIds).toHaveLength(1);

    // Stored as said.
    const db = await openDb(t.location);
    try {
      const rows = (await db.query<{ name: string; ecosystem_id: string | null }>('SELECT name, ecosystem_id::text AS ecosystem_id FROM projects ORDER BY id')).rows;
      expect(rows).toEqual([
        { name: 'arcade', ecosystem_id: String(eco.id) },
        { name: 'studio', ecosystem_id: null },
      ]);
    } finally {
      await db.close();
    }
  });

  it('answers mistakes with usage or a clear error, writing nothing', async () => {
    await expect(run(runEcosystems, ['add', 'games'])).rejects.toThrow(/ecosystem "games" already exists/);
    await expect(run(runEcosystems, ['join', 'nowhere', '--project', 'arcade'])).rejects.toThrow(/no ecosystem named "nowhere"/);
    await expect(run(runEcosystems, ['join', 'games'])).rejects.toBeInstanceOf(UsageError);
    await expect(run(runEcosystems, ['frobnicate'])).rejects.toBeInstanceOf(UsageError);
  });
});
