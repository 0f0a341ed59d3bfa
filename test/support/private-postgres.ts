// A PostgreSQL cluster of one test's own, on a free port, for faults the shared server at 127.0.0.1:5432
// must not suffer (other test files use it at the same time): restarts, terminated backends, full slots.
// initdb refuses to run as root, so as root the cluster belongs to the `postgres` user.

import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from './ports.ts';

const run = promisify(execFile);

/** The newest installed server's binaries (Debian: /usr/lib/postgresql/<major>/bin). */
function binDir(): string {
  const root = '/usr/lib/postgresql';
  const majors = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))) : [];
  if (!majors.length) throw new Error(`no PostgreSQL server binaries under ${root}`);
  return join(root, majors.sort((a, b) => Number(b) - Number(a))[0], 'bin');
}

export interface PrivatePostgres {
  port: number;
  /** A URL on this cluster, as `user`, to `db`. */
  url(db: string, user?: string): string;
  /** Runs statements as the superuser on database `postgres`. */
  sql<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
  /** pg_ctl stop -m immediate: every backend killed at once, no checkpoint (as a crash or a failover). */
  stopImmediate(): Promise<void>;
  /** pg_ctl start, waiting until it accepts connections (after crash recovery). */
  start(): Promise<void>;
  /** pg_ctl restart -m immediate. */
  restartImmediate(): Promise<void>;
  destroy(): Promise<void>;
}

export async function startPrivatePostgres(opts: { maxConnections: number }): Promise<PrivatePostgres> {
  const bin = binDir();
  const dir = mkdtempSync(join(tmpdir(), 'metarelay-pg-'));
  const data = join(dir, 'data');
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    chownSync(dir, Number(stdout.trim()), Number(gid.trim()));
  }
  const pgRun = (tool: string, args: string[]) => (asRoot ? run('runuser', ['-u', 'postgres', '--', join(bin, tool), ...args]) : run(join(bin, tool), args));
  const port = await freePort();
  await pgRun('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync', '--no-instructions']);
  // No fsync: the machine does not crash, only the server does (its WAL is still replayed at start).
  const options = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir} -c max_connections=${opts.maxConnections} -c fsync=off -c full_page_writes=off -c autovacuum=off`;
  const ctl = (args: string[]) => pgRun('pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-w', '-t', '60', ...args]);
  await ctl(['-o', options, 'start']);
  const url = (db: string, user = 'postgres') => `postgres://${user}@127.0.0.1:${port}/${db}`;
  return {
    port,
    url,
    async sql<T>(text: string, params?: unknown[]) {
      const c = new pg.Client({ connectionString: url('postgres') });
      // A client whose server goes away emits 'error'; this one is closed right after its statement anyway.
      c.on('error', () => undefined);
      await c.connect();
      try {
        return (await c.query(text, params)).rows as T[];
      } finally {
        await c.end().catch(() => undefined);
      }
    },
    stopImmediate: () => ctl(['-m', 'immediate', 'stop']).then(() => undefined),
    start: () => ctl(['-o', options, 'start']).then(() => undefined),
    restartImmediate: () => ctl(['-m', 'immediate', '-o', options, 'restart']).then(() => undefined),
    async destroy() {
      await ctl(['-m', 'immediate', 'stop']).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
