import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Db } from './db.ts';

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));
// An arbitrary constant: every metarelay process takes this lock so only one migrates at a time.
const MIGRATION_LOCK = 727_001;

export interface Migration {
  id: number;
  name: string;
  sql: string;
}

export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_.+\.sql$/.test(f))
    .sort()
    .map((f) => ({ id: Number(f.slice(0, 4)), name: f.replace(/\.sql$/, ''), sql: readFileSync(dir + f, 'utf8') }));
}

/** Applies pending migrations, each in its own transaction; returns the names applied. */
export async function migrate(db: Db, migrations = loadMigrations()): Promise<string[]> {
  await db.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`);
  // Applied migrations stay applied: one read skips them, where a transaction each (45 of them, four
  // statements apiece) cost ~110 ms of CPU per open on PGlite, every CLI command and process start
  // paying it on an up-to-date database. A pending one is checked again under the lock (below).
  const already = new Set((await db.query<{ id: number }>('SELECT id FROM schema_migrations')).rows.map((r) => Number(r.id)));
  const applied: string[] = [];
  for (const m of migrations.filter((x) => !already.has(x.id))) {
    const done = await db.transaction(async (tx) => {
      // No lock_timeout here (config postgres.lockTimeoutMs): a process starting beside one that migrates
      // waits for it, however long its migration takes, instead of failing its start.
      await tx.query('SET LOCAL lock_timeout = 0');
      await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      const seen = await tx.query('SELECT 1 FROM schema_migrations WHERE id = $1', [m.id]);
      if (seen.rows.length > 0) return false;
      await tx.exec(m.sql);
      await tx.query('INSERT INTO schema_migrations (id, name) VALUES ($1, $2)', [m.id, m.name]);
      return true;
    });
    if (done) applied.push(m.name);
  }
  return applied;
}
