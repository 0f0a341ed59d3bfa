// The test databases of a worker are reused (test/support/db.ts): one handed out again must be as the
// template left it, whatever the last test wrote: no rows of its own, the template's rows back (the
// migrations' ledger), sequences where they were.
import { expect, it } from 'vitest';
import { createTestDb } from './support/db.ts';

it('a test database handed out again holds what the template held, and its sequences start where they did', async () => {
  const seen: string[] = [];
  for (let i = 0; i < 4; i++) {
    const d = await createTestDb();
    const n = (await d.db.query<{ n: string }>('SELECT count(*)::text n FROM projects')).rows[0].n;
    const id = (await d.db.query<{ id: string }>(`INSERT INTO projects (name) VALUES ('x${i}') RETURNING id::text`)).rows[0].id;
    const ev = (await d.db.query<{ n: string }>(`SELECT count(*)::text n FROM schema_migrations`).catch(() => ({ rows: [{ n: 'na' }] }))).rows[0].n;
    seen.push(`${n}/${id}/${ev}`);
    await d.drop();
  }
  expect(new Set(seen).size).toBe(1);
});
