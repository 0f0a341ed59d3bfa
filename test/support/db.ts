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
    const spare = await takeSpare();
    const dir = spare?.dir ?? mkdtempSync(join(tmpdir(), 'metarelay-db-'));
    if (!spare) cpSync(template, dir, { recursive: true });
    const db = spare?.db ?? (await openDb(dir));
    if (!spare) pristine ??= readPristine(db);
    await pristine;
    return {
      db,
      location: dir,
      async drop() {
        if (spares.length < MAX_SPARES && (await unchangedSchema(db))) {
          spares.push({ db, dir });
          return;
        }
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

/*
 * PGlite test databases are reused within a worker. Opening one costs ~1 s of CPU (copying the 42 MB
 * template folder, then starting PGlite on it; ~2 s a create and drop on a busy machine). A dropped
 * database is kept, and handed out again as the template left it: every table emptied (DELETE: a
 * TRUNCATE of ~60 tables makes new files for each and their indexes, ~350 ms against ~15 ms), the
 * template's rows written back, every sequence where the template had it, the session reset (DISCARD
 * ALL). The reset runs when it is handed out, the closest point to its next use. A database whose
 * schema a test changed, or that a test closed (to open its folder from another process), is not
 * reused: it is closed and deleted as before.
 */
const MAX_SPARES = 3;
const spares: { db: Db; dir: string }[] = [];
process.once('exit', () => {
  for (const s of spares) rmSync(s.dir, { recursive: true, force: true });
});

interface Pristine {
  schema: string;
  truncate: string;
  /** INSERT statements with the template's rows of that table as their one JSON parameter. */
  rows: { sql: string; json: string }[];
  sequences: string;
}
let pristine: Promise<Pristine> | undefined;

const USER_SCHEMAS = `n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') AND n.nspname NOT LIKE 'pg_temp%' AND n.nspname NOT LIKE 'pg_toast_temp%'`;

/** What a test could change besides rows: relations, columns, functions, triggers (a digest of their names and types). */
async function schemaDigest(db: Db): Promise<string> {
  const r = await db.query<{ d: string }>(
    `SELECT md5(string_agg(x, ',' ORDER BY x)) AS d FROM (
       SELECT n.nspname || '.' || c.relname || ':' || c.relkind::text || ':' || coalesce((SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ';' ORDER BY a.attnum) FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '') AS x
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE ${USER_SCHEMAS}
       UNION ALL SELECT n.nspname || '.' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE ${USER_SCHEMAS}
       UNION ALL SELECT 'trigger ' || t.tgname || ' on ' || t.tgrelid::regclass::text || ':' || t.tgenabled::text FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE NOT t.tgisinternal AND ${USER_SCHEMAS}
     ) s`,
  );
  return r.rows[0].d;
}

/** Read once per worker from a database just copied from the template, before any test has used it. */
async function readPristine(db: Db): Promise<Pristine> {
  const tables = (
    await db.query<{ t: string }>(
      `SELECT format('%I.%I', n.nspname, c.relname) AS t FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p') AND ${USER_SCHEMAS} ORDER BY 1`,
    )
  ).rows.map((x) => x.t);
  const rows: Pristine['rows'] = [];
  for (const t of tables) {
    const j = (await db.query<{ j: string | null }>(`SELECT json_agg(x)::text AS j FROM ${t} x`)).rows[0].j;
    if (!j) continue;
    const cols = (
      await db.query<{ c: string }>(`SELECT format('%I', attname) AS c FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum`, [t])
    ).rows
      .map((x) => x.c)
      .join(', ');
    rows.push({ sql: `INSERT INTO ${t} (${cols}) OVERRIDING SYSTEM VALUE SELECT ${cols} FROM json_populate_recordset(null::${t}, $1::json)`, json: j });
  }
  const seqs = (
    await db.query<{ s: string }>(
      `SELECT format('SELECT setval(%L, %s, %L::boolean);', format('%I.%I', schemaname, sequencename), coalesce(last_value, start_value), last_value IS NOT NULL) AS s FROM pg_sequences`,
    )
  ).rows.map((x) => x.s);
  return { schema: await schemaDigest(db), truncate: tables.map((t) => `DELETE FROM ${t};`).join(' '), rows, sequences: seqs.join('\n') };
}

/** Whether a dropped database can be kept: still open, its schema as the template's. */
async function unchangedSchema(db: Db): Promise<boolean> {
  try {
    const p = await pristine;
    return !!p && (await schemaDigest(db)) === p.schema;
  } catch {
    return false;
  }
}

/** A kept database put back as the template left it, or undefined when there is none (or it cannot be). */
async function takeSpare(): Promise<{ db: Db; dir: string } | undefined> {
  const spare = spares.pop();
  if (!spare) return undefined;
  if (await resetToPristine(spare.db)) return spare;
  await spare.db.close().catch(() => undefined);
  rmSync(spare.dir, { recursive: true, force: true });
  return undefined;
}

async function resetToPristine(db: Db): Promise<boolean> {
  try {
    const p = await pristine;
    if (!p) return false;
    await db.exec('DISCARD ALL');
    await db.transaction(async (tx) => {
      // The template's rows go back as they were: no trigger of a test's making or the schema's fires.
      await tx.exec(`SET LOCAL session_replication_role = replica; ${p.truncate}`);
      for (const r of p.rows) await tx.query(r.sql, [r.json]);
      if (p.sequences) await tx.exec(p.sequences);
    });
    return true;
  } catch {
    return false;
  }
}
