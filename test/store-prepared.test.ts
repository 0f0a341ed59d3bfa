// Statements run again and again are prepared once per connection: on PostgreSQL (src/store/postgres.ts)
// and on PGlite (src/store/pglite-worker.mjs). Runs against both whatever METARELAY_TEST_DB says.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PREPARED_MARK, openDb, prepared, type Db } from '../src/store/db.ts';
import { StatementNames, openPostgres } from '../src/store/postgres.ts';
import { TEST_PG_URL, pgUrlFor } from './support/env.ts';

describe('StatementNames', () => {
  it('names only texts marked prepared(), the same name every time, and a new one after renew', () => {
    const n = new StatementNames();
    expect(n.nameOf('SELECT $1')).toBeUndefined();
    const name = n.nameOf(prepared('SELECT $1'));
    expect(name).toMatch(/^mr0_[0-9a-f]{16}$/);
    expect(n.nameOf(prepared('SELECT $1'))).toBe(name);
    expect(n.nameOf(prepared('SELECT $2'))).not.toBe(name);
    n.renew();
    const renewed = n.nameOf(prepared('SELECT $1'));
    expect(renewed).toMatch(/^mr1_/);
    expect(renewed).not.toBe(name);
  });

  it('names at most 500 texts', () => {
    const n = new StatementNames();
    for (let i = 0; i < 600; i++) n.nameOf(prepared(`SELECT ${i}`));
    expect(n.size).toBe(500);
    expect(n.nameOf(prepared('SELECT 0'))).toMatch(/^mr0_/);
    expect(n.nameOf(prepared('SELECT new'))).toBeUndefined();
  });
});

describe.each(['PostgreSQL', 'PGlite'])('prepared statements on %s', (kind) => {
  const dbName = `metarelay_prepared_${process.pid}`;
  let db: Db;

  beforeAll(async () => {
    if (kind === 'PGlite') {
      db = await openDb('memory://');
      return;
    }
    const admin = await openDb(TEST_PG_URL);
    await admin.exec(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.exec(`CREATE DATABASE ${dbName}`);
    await admin.close();
    // One connection: what it prepared is what the next statement finds.
    db = await openPostgres(pgUrlFor(dbName), { max: 1 });
  });

  afterAll(async () => {
    await db?.close();
    if (kind === 'PGlite') return;
    const admin = await openDb(TEST_PG_URL);
    await admin.exec(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.close();
  });

  const preparedOnConnection = async () =>
    (await db.query<{ statement: string }>("SELECT statement FROM pg_prepared_statements WHERE name LIKE 'mr%' ORDER BY statement")).rows.map((r) => r.statement);

  it('a marked statement with parameters is prepared once on the connection; unmarked ones and ones without parameters never', async () => {
    for (let i = 0; i < 3; i++) expect((await db.query<{ x: number }>(prepared('SELECT $1::int + 1 AS x'), [i])).rows[0].x).toBe(i + 1);
    for (let i = 0; i < 3; i++) await db.query(prepared('SELECT 41 + 1 AS x'));
    for (let i = 0; i < 3; i++) await db.query('SELECT $1::int + 2 AS x', [i]);
    const inTx = await db.transaction(async (tx) => (await tx.query<{ y: string }>(prepared('SELECT $1::text AS y'), ['a'])).rows[0].y);
    expect(inTx).toBe('a');
    await db.transaction((tx) => tx.query(prepared('SELECT $1::text AS y'), ['b']));
    expect(await preparedOnConnection()).toEqual([prepared('SELECT $1::int + 1 AS x'), prepared('SELECT $1::text AS y')]);
  });

  it('a marked statement sent with the COMMIT (atCommit: the sponsorship charge, the tank hold) is prepared too, and commits or fails with its transaction', async () => {
    await db.exec('CREATE TABLE IF NOT EXISTS at_commit_t (id int PRIMARY KEY, v text)');
    const sql = prepared('INSERT INTO at_commit_t (id, v) VALUES ($1, $2) RETURNING v');
    for (const id of [1, 2]) {
      // Its answer settles once committed, after fn returns: fn must not wait for it.
      let answered: Promise<{ rows: { v: string }[] } | undefined> | undefined;
      await db.transaction(async (tx) => {
        answered = tx.atCommit<{ v: string }>(sql, [id, `v${id}`]);
      });
      expect((await answered)?.rows).toEqual([{ v: `v${id}` }]);
    }
    expect(await preparedOnConnection()).toContain(sql);
    // The same statement failing (a duplicate key) rolls back what the transaction wrote before it.
    await expect(
      db.transaction(async (tx) => {
        await tx.query('INSERT INTO at_commit_t (id, v) VALUES (3, $1)', ['before']);
        tx.atCommit(sql, [1, 'again']).catch(() => undefined);
      }),
    ).rejects.toMatchObject({ code: '23505' });
    expect((await db.query<{ id: number }>('SELECT id FROM at_commit_t ORDER BY id')).rows).toEqual([{ id: 1 }, { id: 2 }]);
    await db.exec('DROP TABLE at_commit_t');
  });

  it('a session reset (DISCARD ALL, as a reused test database gets) drops the names: the next run names the statement again', async () => {
    const sql = prepared('SELECT $1::int * 2 AS x');
    expect((await db.query<{ x: number }>(sql, [2])).rows[0].x).toBe(4);
    await db.exec('DISCARD ALL');
    expect(await preparedOnConnection()).toEqual([]);
    expect((await db.query<{ x: number }>(sql, [3])).rows[0].x).toBe(6);
    expect((await db.query<{ x: number }>(sql, [4])).rows[0].x).toBe(8);
    expect(await preparedOnConnection()).toEqual([sql]);
    // The session's plan setting holds after the reset too, the same on both engines (postgres.ts says why).
    expect((await db.query<{ plan_cache_mode: string }>('SHOW plan_cache_mode')).rows[0].plan_cache_mode).toBe('force_generic_plan');
  });

  it('a statement prepared and deallocated inside a transaction (an EXPLAIN of a kept plan) ends, and named statements go on', async () => {
    const sql = prepared('SELECT $1::int - 1 AS x');
    expect((await db.query<{ x: number }>(sql, [5])).rows[0].x).toBe(4);
    const shown = await db.transaction(async (tx) => {
      await tx.exec('PREPARE p_in_tx AS SELECT $1::int AS x');
      const r = await tx.query<{ x: number }>('EXECUTE p_in_tx(7)');
      await tx.exec('DEALLOCATE p_in_tx');
      return r.rows[0].x;
    });
    expect(shown).toBe(7);
    expect((await db.query<{ x: number }>(sql, [9])).rows[0].x).toBe(8);
    expect((await db.query<{ plan_cache_mode: string }>('SHOW plan_cache_mode')).rows[0].plan_cache_mode).toBe('force_generic_plan');
  });

  it('a named statement answers as an unnamed one: typed values in and out, nulls, arrays, counts, errors with their fields', async () => {
    await db.exec('CREATE TABLE v (id int PRIMARY KEY, n numeric, big bigint, tags text[], doc jsonb, at timestamptz, ok boolean)');
    const insert = prepared('INSERT INTO v (id, n, big, tags, doc, at, ok) VALUES ($1, $2, $3, $4, $5, $6, $7)');
    const row = [1, '12345678901234567890', 9007199254740991, ['a', 'b"c'], JSON.stringify({ k: [1, 2] }), new Date('2026-01-02T03:04:05Z'), true];
    expect((await db.query(insert, row)).rowCount).toBe(1);
    expect((await db.query(insert, [2, null, null, null, null, null, null])).rowCount).toBe(1);
    const select = prepared('SELECT * FROM v WHERE id = ANY($1::int[]) ORDER BY id');
    for (const q of [select, select.slice(PREPARED_MARK.length)]) {
      const { rows } = await db.query<Record<string, unknown>>(q, [[1, 2]]);
      expect(rows[0]).toMatchObject({ id: 1, n: '12345678901234567890', tags: ['a', 'b"c'], doc: { k: [1, 2] }, ok: true });
      expect(new Date(rows[0].at as string).toISOString()).toBe('2026-01-02T03:04:05.000Z');
      expect(rows[1]).toEqual({ id: 2, n: null, big: null, tags: null, doc: null, at: null, ok: null });
    }
    expect((await db.query(prepared('UPDATE v SET ok = $2 WHERE id <= $1'), [2, false])).rowCount).toBe(2);
    expect((await db.query(prepared('SELECT id FROM v WHERE id = $1'), [99])).rows).toEqual([]);
    const dup = await db.query(insert, row).catch((e: unknown) => e as { code?: string; constraint?: string });
    expect(dup).toMatchObject({ code: '23505', constraint: 'v_pkey' });
    // A failed statement inside a transaction aborts it, named or not; the connection goes on.
    await expect(db.transaction((tx) => tx.query(insert, row))).rejects.toMatchObject({ code: '23505' });
    expect((await db.query<{ c: number }>(prepared('SELECT count(*)::int AS c FROM v WHERE id > $1'), [0])).rows[0].c).toBe(2);
  });

  it('a table changed under a prepared statement (a migration while running): the next run answers the new columns', async () => {
    await db.exec('CREATE TABLE t (a int)');
    await db.query('INSERT INTO t (a) VALUES ($1)', [1]);
    const sql = prepared('SELECT * FROM t WHERE a = $1');
    for (let i = 0; i < 3; i++) expect((await db.query(sql, [1])).rows).toEqual([{ a: 1 }]);
    await db.exec('ALTER TABLE t ADD COLUMN b int DEFAULT 7');
    expect((await db.query(sql, [1])).rows).toEqual([{ a: 1, b: 7 }]);
    // Inside a transaction the stale plan fails that transaction once; the next one runs on fresh names.
    for (let i = 0; i < 3; i++) await db.query(sql, [1]);
    await db.exec('ALTER TABLE t ADD COLUMN c int DEFAULT 9');
    await expect(db.transaction((tx) => tx.query(sql, [1]))).rejects.toThrow(/cached plan/);
    expect((await db.transaction((tx) => tx.query(sql, [1]))).rows).toEqual([{ a: 1, b: 7, c: 9 }]);
  });
});
