import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { expect, inject } from 'vitest';
import { openDb, type Db } from '../../src/store/db.ts';
import { TEST_DB, TEST_PG_URL, pgUrlFor } from './env.ts';
import { WITHOUT_THE_RUNS_DATABASE } from './without-db.ts';

let counter = 0;

export interface TestDb {
  db: Db;
  /** What config.database would hold to open this same database from another process. */
  location: string;
  drop(): Promise<void>;
}

/**
 * A migrated database of the run's backend, private to the caller, holding what the template holds.
 * `fresh`: never one reused (below): its tables and indexes hold no dead rows of earlier tests, for a
 * test of what the planner chooses.
 */
export async function createTestDb(opts: { fresh?: boolean } = {}): Promise<TestDb> {
  const file = expect.getState().testPath;
  if (file && WITHOUT_THE_RUNS_DATABASE.includes(relative(process.cwd(), file))) {
    throw new Error(`${relative(process.cwd(), file)} is listed in test/support/without-db.ts (run in the PGlite half only) but opens the run's database: take it off the list`);
  }
  const spare = opts.fresh ? undefined : await takeSpare();
  const made = spare ?? (await freshDb());
  pristine ??= readPristine(made.db);
  await pristine;
  const { db, location } = made;
  return {
    db,
    location,
    async drop() {
      if (spares.length < MAX_SPARES && (await unchangedSchema(db))) {
        // PGlite keeps its handle (opening it is the cost); PostgreSQL's connections close, the database stays.
        if (db.kind === 'postgres') await db.close();
        spares.push({ location, db: db.kind === 'pglite' ? db : undefined, dispose: made.dispose });
        return;
      }
      await db.close().catch(() => undefined);
      await made.dispose();
    },
  };
}

interface Made {
  db: Db;
  location: string;
  /** Deletes the database (its handle closed). */
  dispose(): Promise<void>;
}

async function freshDb(): Promise<Made> {
  const template = inject('dbTemplate');
  if (TEST_DB === 'pglite') {
    const dir = mkdtempSync(join(tmpdir(), 'metarelay-db-'));
    cpSync(template, dir, { recursive: true });
    return { db: await openDb(dir), location: dir, dispose: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const name = `metarelay_t_${inject('runId')}_${process.pid}_${++counter}`;
  await withAdmin((a) => a.query(`CREATE DATABASE ${name} TEMPLATE ${template}`));
  const location = pgUrlFor(name);
  return { db: await openDb(location), location, dispose: () => withAdmin(async (a) => void (await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))) };
}

async function withAdmin<T>(fn: (admin: Db) => Promise<T>): Promise<T> {
  const admin = await openDb(TEST_PG_URL);
  try {
    return await fn(admin);
  } finally {
    await admin.close();
  }
}

/*
 * Test databases are reused within a worker. A PGlite one costs ~1 s of CPU to make (copying the 42 MB
 * template folder, then starting PGlite on it; ~2 s a create and drop on a busy machine); a PostgreSQL
 * one 200-350 ms (CREATE DATABASE from the template, DROP DATABASE). A dropped database is kept, and
 * handed out again as the template left it: every table emptied (DELETE: a TRUNCATE of ~60 tables makes
 * new files for each and their indexes, ~350 ms on PGlite against ~15 ms), the template's rows written
 * back, every sequence where the template had it, the session reset (PGlite: DISCARD ALL; PostgreSQL:
 * new connections, and any other session on it ended, as DROP DATABASE WITH (FORCE) would). The reset
 * runs when it is handed out, the closest point to its next use. A database whose schema a test
 * changed, or that a test closed (to open a PGlite folder from another process), is not reused: it is
 * deleted as before.
 */
const MAX_SPARES = 3;
const spares: { location: string; db: Db | undefined; dispose(): Promise<void> }[] = [];
// PGlite folders of this worker go with it; PostgreSQL's databases of the run, with the run (global-setup.ts).
process.once('exit', () => {
  for (const s of spares) if (s.db) rmSync(s.location, { recursive: true, force: true });
});

interface Pristine {
  schema: string;
  /** DELETE of every table (not TRUNCATE: see above). */
  emptyAll: string;
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
  return { schema: await schemaDigest(db), emptyAll: tables.map((t) => `DELETE FROM ${t};`).join(' '), rows, sequences: seqs.join('\n') };
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
async function takeSpare(): Promise<Made | undefined> {
  const spare = spares.pop();
  if (!spare) return undefined;
  const db = spare.db ?? (await openDb(spare.location));
  if (db.kind === 'postgres') await db.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
  if (await resetToPristine(db)) return { db, location: spare.location, dispose: spare.dispose };
  await db.close().catch(() => undefined);
  await spare.dispose();
  return undefined;
}

async function resetToPristine(db: Db): Promise<boolean> {
  try {
    const p = await pristine;
    if (!p) return false;
    if (db.kind === 'pglite') await db.exec('DISCARD ALL');
    await db.transaction(async (tx) => {
      // The template's rows go back as they were: no trigger of a test's making or the schema's fires.
      await tx.exec(`SET LOCAL session_replication_role = replica; ${p.emptyAll}`);
      for (const r of p.rows) await tx.query(r.sql, [r.json]);
      if (p.sequences) await tx.exec(p.sequences);
    });
    return true;
  } catch {
    return false;
  }
}
