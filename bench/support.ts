import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDb, type Db } from '../src/store/db.ts';
import { migrate } from '../src/store/migrate.ts';

export const log = (msg: string) => process.stderr.write(`${msg}\n`);

export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export function summarize(samplesMs: number[]) {
  const s = [...samplesMs].sort((a, b) => a - b);
  const r = (x: number) => Math.round(x * 1000) / 1000;
  return { n: s.length, p50Ms: r(percentile(s, 50)), p99Ms: r(percentile(s, 99)), maxMs: r(s[s.length - 1]) };
}

/** A fresh, migrated database of the given backend, and a function that removes it. */
export async function benchDb(kind: 'pglite' | 'postgres'): Promise<{ db: Db; location: string; drop(): Promise<void> }> {
  if (kind === 'pglite') {
    const dir = mkdtempSync(join(tmpdir(), 'metarelay-bench-'));
    const db = await openDb(dir);
    await migrate(db);
    return {
      db,
      location: dir,
      drop: async () => {
        await db.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const base = process.env.METARELAY_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = `metarelay_bench_${process.pid}_${Date.now().toString(36)}`;
  const admin = await openDb(base);
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.close();
  const u = new URL(base);
  u.pathname = `/${name}`;
  const db = await openDb(u.toString());
  await migrate(db);
  return {
    db,
    location: u.toString(),
    drop: async () => {
      await db.close();
      const a = await openDb(base);
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await a.close();
    },
  };
}
