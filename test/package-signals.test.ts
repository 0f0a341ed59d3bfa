// Signals reach the server however an operator starts it, from the installed tarball: the bin, `npx
// metarelay serve`, `npm start` of the operator's own package.json, and a container's entry (a PID
// namespace of its own, as a container runtime makes: when its PID 1 exits, the kernel kills the rest).
// SIGTERM or SIGINT to the outer process (or, for npm's forms, to its whole process group) must drain
// the server once (its log says so, and no second signal cuts the drain short), every process of the
// form must exit, and the port must refuse afterwards: no orphan keeps it.
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';
import { freePort } from './support/ports.ts';
import { appOf, cleanEnv, packedAndInstalled, type InstalledApp } from './support/package.ts';

let installed: InstalledApp;
let testDb: TestDb;
let port: number;
const CONFIG = 'metarelay.json';
// A PID namespace needs CAP_SYS_ADMIN (root here, as in CI). Without it the container forms fail saying so:
// a test that passes without running would say nothing true.
const namespaces = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true']).status === 0;

beforeAll(async () => {
  installed = appOf(await packedAndInstalled());
  testDb = await createTestDb();
  if (TEST_DB === 'pglite') await testDb.db.close();
  port = await freePort();
  writeFileSync(join(installed.app, CONFIG), JSON.stringify({ port, database: testDb.location, logLevel: 'info', chains: [] }));
  // The operator's own scripts: `npm start` runs the installed bin through npm's script shell.
  writeFileSync(join(installed.app, 'package.json'), JSON.stringify({ name: 'operator', private: true, scripts: { start: `metarelay serve --config ${CONFIG}` } }));
}, 900_000);

afterAll(async () => {
  installed?.remove();
  await testDb?.drop().catch(() => undefined);
});

interface Form {
  /** How the operator starts it. */
  argv: string[];
  env?: Record<string, string>;
  /** Run as PID 1 of a PID namespace of its own; the signal goes to that PID 1, as `docker stop` sends it. */
  container?: boolean;
}

const BIN = 'node_modules/.bin/metarelay';
const FORMS: Record<string, Form> = {
  'the bin (node_modules/.bin/metarelay serve)': { argv: [BIN, 'serve', '--config', CONFIG] },
  'npx metarelay serve': { argv: ['npx', 'metarelay', 'serve', '--config', CONFIG] },
  'npm start (the operator script "metarelay serve")': { argv: ['npm', 'start'] },
  'a container entry: node node_modules/metarelay/bin/metarelay.mjs serve': {
    argv: ['node', 'node_modules/metarelay/bin/metarelay.mjs', 'serve', '--config', CONFIG],
    container: true,
  },
  'a container entry: npx metarelay serve, npm_config_script_shell=/bin/bash': {
    argv: ['npx', 'metarelay', 'serve', '--config', CONFIG],
    env: { npm_config_script_shell: '/bin/bash' },
    container: true,
  },
  'a container entry: npm start, npm_config_script_shell=/bin/bash': { argv: ['npm', 'start'], env: { npm_config_script_shell: '/bin/bash' }, container: true },
};

interface Started {
  /** The process the signal goes to. */
  outer: () => number;
  /** The process group of the form (its outer process leads it). */
  group: number;
  output: () => string;
  /** Every process holding the output pipe has exited. */
  allExited: Promise<unknown>;
  kill(): void;
}

function start(form: Form): Started {
  const argv = form.container ? ['unshare', '--pid', '--fork', '--mount-proc', '--kill-child', ...form.argv] : form.argv;
  const child = spawn(argv[0], argv.slice(1), { cwd: installed.app, env: { ...cleanEnv, ...form.env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const allExited = new Promise((r) => child.stdout.on('close', r));
  // unshare --fork waits for its child, the namespace's PID 1.
  const pid1 = () => Number(readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(' ')[0]);
  return {
    outer: () => (form.container ? pid1() : child.pid!),
    group: child.pid!,
    output: () => out,
    allExited,
    kill: () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    },
  };
}

async function ready(s: Started) {
  const t0 = performance.now();
  while ((await fetch(`http://127.0.0.1:${port}/ready`).catch(() => undefined))?.status !== 200) {
    if (performance.now() - t0 > 90_000) throw new Error(`not ready in 90 s:\n${s.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function within<T>(p: Promise<T>, ms: number, what: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(what())), ms)))]).finally(() => clearTimeout(timer));
}

// Each form with each signal to its outer process alone; npm's forms also to the whole process group
// (a terminal's Ctrl-C, systemd's stop), where the server and npm's shell both get it. How a signal
// travels does not depend on the database, only the drain's close of it does, and each case is a cold
// start of the installed package (~11 s): the matrix is run once, split between the halves so that every
// form drains on both databases. SIGINT on PGlite (Ctrl-C on a laptop's `npm start`), SIGTERM on
// PostgreSQL (what an orchestrator sends).
const SIGNAL = TEST_DB === 'postgres' ? 'SIGTERM' : 'SIGINT';
const CASES = Object.entries(FORMS).flatMap(([name, form]) => [
  { name, form, signal: SIGNAL, to: 'the outer process' },
  ...(!form.container && form.argv[0] !== BIN ? [{ name, form, signal: SIGNAL, to: 'the process group' }] : []),
]);

describe(`signals reach the installed server however it is started (${TEST_DB})`, () => {
  it.each(CASES)('$name: $signal to $to drains the server, everything exits, the port is free', async ({ form, signal, to }) => {
    if (form.container) expect(namespaces, 'no PID namespaces here (unshare --pid needs CAP_SYS_ADMIN)').toBe(true);
    const s = start(form);
    try {
      await ready(s);
      const t0 = performance.now();
      process.kill(to === 'the process group' ? -s.group : s.outer(), signal);
      await within(s.allExited, 30_000, () => `still running 30 s after ${signal} (an orphan holds port ${port}?):\n${s.output()}`);
      const ms = Math.round(performance.now() - t0);
      expect(s.output(), s.output()).toMatch(/"msg":"shutting down: draining"[\s\S]*"msg":"shut down cleanly"/);
      // The signal and npm's shell's loss (or wake) are one drain, not a second signal's exit at once.
      expect(s.output()).not.toContain('second signal');
      // Only the PID-1 case below warns.
      expect(s.output()).not.toContain('npm is PID 1 here');
      await expect(fetch(`http://127.0.0.1:${port}/health`)).rejects.toThrow();
      console.log(`${argvLine(form)}: ${signal} to ${to}, to exit ${ms} ms`);
    } finally {
      s.kill();
    }
  });

  // On a memory:// database whatever the half: defined once, in the PostgreSQL half (the shorter one).
  if (TEST_DB === 'postgres')
    it('a container entry of npx with the default script shell: the bin says at start that a stop cannot drain, and how to fix the entry', async () => {
      expect(namespaces, 'no PID namespaces here (unshare --pid needs CAP_SYS_ADMIN)').toBe(true);
      // Killed, not drained: on a database of its own, so no PGlite lock of a killed process is left behind.
      writeFileSync(join(installed.app, 'memory.json'), JSON.stringify({ port, database: 'memory://', logLevel: 'info', chains: [] }));
      const s = start({ argv: ['npx', 'metarelay', 'serve', '--config', 'memory.json'], container: true });
      try {
        await ready(s);
        const line = s
          .output()
          .split('\n')
          .find((l) => l.startsWith('metarelay: npm is PID 1 here'));
        expect(line).toContain('node node_modules/metarelay/bin/metarelay.mjs');
        expect(line).toContain('npm_config_script_shell=/bin/bash');
      } finally {
        s.kill();
        await s.allExited;
      }
    });
});

const argvLine = (f: Form) => `${f.container ? 'container ' : ''}${Object.entries(f.env ?? {}).map(([k, v]) => `${k}=${v} `)}${f.argv.join(' ')}`;
