import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { accessKeyRepo, hashAccessKey } from '../src/store/access-keys.ts';
import { migrate } from '../src/store/migrate.ts';
import { ProjectExistsError, projectRepo } from '../src/store/projects.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';

let t: TestDb;
beforeAll(async () => {
  t = await createTestDb();
});
afterAll(() => t?.drop());

describe(`store (${TEST_DB})`, () => {
  it('runs on the backend under test', () => {
    expect(t.db.kind).toBe(TEST_DB);
  });

  it('re-running migrations applies nothing', async () => {
    expect(await migrate(t.db)).toEqual([]);
  });

  it('has pg_trgm for fuzzy search', async () => {
    const r = await t.db.query<{ s: number }>(`SELECT similarity('uniswap', 'unswap') AS s`);
    expect(r.rows[0].s).toBeGreaterThan(0.3);
  });

  it('creates projects with unique names', async () => {
    const projects = projectRepo(t.db);
    const p = await projects.create('alpha');
    expect(p).toMatchObject({ name: 'alpha', archivedAt: null });
    await expect(projects.create('alpha')).rejects.toBeInstanceOf(ProjectExistsError);
    expect((await projects.getByName('alpha'))?.id).toBe(p.id);
  });

  it('stores access keys hashed, never in plaintext', async () => {
    const p = await projectRepo(t.db).create('hashed');
    const keys = accessKeyRepo(t.db);
    const { key } = await keys.create(p.id, 'ci');
    expect(key).toMatch(/^mr_[A-Za-z0-9_-]{32}$/);
    const dump = await t.db.query<Record<string, unknown>>('SELECT * FROM access_keys WHERE project_id = $1', [p.id]);
    const text = JSON.stringify(dump.rows);
    expect(text).not.toContain(key);
    expect(dump.rows[0].key_hash).toBe(hashAccessKey(key));
  });

  it('resolves a live key to its project; revoked keys and archived projects resolve to nothing', async () => {
    const p = await projectRepo(t.db).create('resolve');
    const keys = accessKeyRepo(t.db);
    const { key } = await keys.create(p.id);
    expect((await keys.resolve(key))?.project.name).toBe('resolve');
    expect(await keys.revoke(key)).toBe(true);
    expect(await keys.revoke(key)).toBe(false);
    expect(await keys.resolve(key)).toBeNull();

    const { key: k2 } = await keys.create(p.id);
    await t.db.query('UPDATE projects SET archived_at = now() WHERE id = $1', [p.id]);
    expect(await keys.resolve(k2)).toBeNull();
  });

  it('rolls back a failed transaction whole', async () => {
    await expect(
      t.db.transaction(async (tx) => {
        await tx.query(`INSERT INTO projects (name) VALUES ('half-written')`);
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await projectRepo(t.db).getByName('half-written')).toBeNull();
  });

  it('runs the statements given to atCommit last, in order, with the COMMIT; the first failure rolls the whole transaction back and is what throws', async () => {
    let first: Promise<unknown> | undefined;
    let second: Promise<{ rows: Array<{ name: string }> } | undefined> | undefined;
    const out = await t.db.transaction(async (tx) => {
      first = tx.atCommit(`UPDATE projects SET name = 'at-commit-2' WHERE name = $1`, ['at-commit-1']);
      // Registered second, run second: it sees what the first wrote.
      second = tx.atCommit<{ name: string }>(`SELECT name FROM projects WHERE name = $1`, ['at-commit-2']);
      await tx.query(`INSERT INTO projects (name) VALUES ('at-commit-1')`);
      return 'done';
    });
    expect(out).toBe('done');
    expect(await first).toMatchObject({ rowCount: 1 });
    expect((await second)?.rows).toEqual([{ name: 'at-commit-2' }]);
    expect(await projectRepo(t.db).getByName('at-commit-1')).toBeNull();
    expect(await projectRepo(t.db).getByName('at-commit-2')).not.toBeNull();

    let before: Promise<unknown> | undefined;
    let after: Promise<unknown> | undefined;
    await expect(
      t.db.transaction(async (tx) => {
        await tx.query(`INSERT INTO projects (name) VALUES ('at-commit-3')`);
        before = tx.atCommit(`INSERT INTO projects (name) VALUES ('at-commit-4')`);
        tx.atCommit(`SELECT metarelay_over_budget($1, 'totalBudget')`, [7]);
        after = tx.atCommit(`INSERT INTO projects (name) VALUES ('at-commit-5')`);
      }),
    ).rejects.toThrow('metarelay_over_budget:7:totalBudget');
    // Nothing of it stays, the atCommit statement that ran before the failure neither; none answers.
    for (const name of ['at-commit-3', 'at-commit-4', 'at-commit-5']) expect(await projectRepo(t.db).getByName(name)).toBeNull();
    expect(await before).toBeUndefined();
    expect(await after).toBeUndefined();
    // The connection is usable afterwards (PostgreSQL: the pool's client was returned clean).
    for (let i = 0; i < 12; i++) expect((await t.db.transaction((tx) => tx.query<{ x: number }>('SELECT $1::int AS x', [i]))).rows[0].x).toBe(i);
  });

  it("an atCommit statement with onlyIf runs only when the one before it answered a non-zero column of that name (the sponsorship charge's second statement)", async () => {
    const run = (flag: number) =>
      t.db.transaction(async (tx) => {
        const first = tx.atCommit<{ slow: string }>('SELECT $1::bigint AS slow', [flag]);
        const second = tx.atCommit(`INSERT INTO projects (name) VALUES ($1) RETURNING name`, [`only-if-${flag}`], { onlyIf: 'slow' });
        const third = tx.atCommit<{ n: number }>('SELECT 1 AS n');
        return { first, second, third };
      });
    const skipped = await run(0);
    expect(await skipped.second).toEqual({ rows: [], rowCount: 0 });
    expect((await skipped.third)?.rows).toEqual([{ n: 1 }]);
    expect(await projectRepo(t.db).getByName('only-if-0')).toBeNull();
    const ran = await run(2);
    expect((await ran.second)?.rows).toEqual([{ name: 'only-if-2' }]);
    expect(await projectRepo(t.db).getByName('only-if-2')).not.toBeNull();
  });

  it('statements a transaction issues at once run in call order, one at a time (PostgreSQL: never through pg’s deprecated queue)', async () => {
    // pg warns once per process, then drops the queue in version 9: the driver's own count is the witness.
    const queued: number[] = [];
    const proto = pg.Client.prototype as unknown as { query: (...a: unknown[]) => unknown };
    const original = proto.query;
    proto.query = function (this: { _queryQueue: unknown[] }, ...a: unknown[]) {
      queued.push(this._queryQueue.length);
      return original.apply(this, a);
    };
    try {
      const order: number[] = [];
      const rows = await t.db.transaction(async (tx) => {
        await tx.query(`INSERT INTO projects (name) VALUES ('at-once-0')`);
        // Each renames what the one issued before it wrote: it finds its row only if that one ran first.
        return Promise.all(
          Array.from({ length: 8 }, (_, i) =>
            tx.query(`UPDATE projects SET name = $2 WHERE name = $1`, [`at-once-${i}`, `at-once-${i + 1}`]).then((r) => {
              order.push(i);
              return r.rowCount;
            }),
          ),
        );
      });
      expect(rows).toEqual(Array(8).fill(1));
      expect(order).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      expect(await projectRepo(t.db).getByName('at-once-8')).not.toBeNull();
      // A failure among them rolls the whole transaction back, what was issued before it and after it.
      await expect(
        t.db.transaction(async (tx) => {
          const all = [tx.query(`INSERT INTO projects (name) VALUES ('at-once-x')`), tx.query('SELECT 1/0'), tx.query(`INSERT INTO projects (name) VALUES ('at-once-y')`)];
          await Promise.all(all);
        }),
      ).rejects.toThrow(/division by zero/);
      for (const name of ['at-once-x', 'at-once-y']) expect(await projectRepo(t.db).getByName(name)).toBeNull();
    } finally {
      proto.query = original;
    }
    if (t.db.kind === 'postgres') {
      expect(queued.length).toBeGreaterThan(10);
      expect(queued.filter((n) => n > 0)).toEqual([]);
    }
  });

  it('adds batched usage counts', async () => {
    const p = await projectRepo(t.db).create('usage');
    const keys = accessKeyRepo(t.db);
    const a = await keys.create(p.id);
    const b = await keys.create(p.id);
    await keys.recordUsage(
      new Map([
        [a.info.id, 5],
        [b.info.id, 2],
      ]),
    );
    await keys.recordUsage(new Map([[a.info.id, 1]]));
    const listed = await keys.list(p.id);
    expect(listed.map((k) => k.requestCount)).toEqual([6, 2]);
  });
});
