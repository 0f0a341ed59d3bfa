// PostgreSQL statements run again and again are prepared once per connection (src/store/postgres.ts).
// Runs against the test PostgreSQL server whatever METARELAY_TEST_DB says: PGlite has no such protocol.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb, prepared, type Db } from '../src/store/db.ts';
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

describe('prepared statements on PostgreSQL', () => {
  const dbName = `metarelay_prepared_${process.pid}`;
  let db: Db;

  beforeAll(async () => {
    const admin = await openDb(TEST_PG_URL);
    await admin.exec(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.exec(`CREATE DATABASE ${dbName}`);
    await admin.close();
    // One connection: what it prepared is what the next statement finds.
    db = await openPostgres(pgUrlFor(dbName), { max: 1 });
  });

  afterAll(async () => {
    await db?.close();
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
