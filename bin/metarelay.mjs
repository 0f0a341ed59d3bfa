#!/usr/bin/env node
// A checkout (src/ present, tsx installed as a dev dependency) runs the TypeScript sources through tsx,
// so `npm start` needs no build and never runs a stale one. An installed package has no src/ and no
// tsx: it runs the compiled dist/ with plain node. METARELAY_FROM=dist forces the build in a checkout.
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const root = new URL('../', import.meta.url);
const fromSource = process.env.METARELAY_FROM !== 'dist' && existsSync(new URL('src/cli/main.ts', root)) && resolvable('tsx');

function resolvable(name) {
  try {
    createRequire(import.meta.url).resolve(`${name}/package.json`);
    return true;
  } catch {
    return false;
  }
}

// npm runs a package's bin (`npx metarelay serve`, or `npm start` of a script `metarelay serve`) through
// `sh -c`, and forwards SIGTERM/SIGINT to that shell only. On SIGTERM dash dies without passing it on,
// npm exits 143, and the server, re-parented, would keep the port and relay with no drain; SIGINT dash
// catches and keeps waiting for the server, which never hears of it, so nothing ever exits. A
// long-running command started by npm therefore watches its parent: its loss is taken as SIGTERM, and a
// waiting shell that wakes up (its voluntary context switches count up: it was sent a signal it caught,
// which for a shell waiting on its command is SIGINT) as SIGINT. Either starts the drain through
// PARENT_SIGNAL (src/cli/shutdown.ts), never taken as a second signal (which exits at once): a signal
// sent to the whole group (a terminal's Ctrl-C, systemd's stop) reaches the server and its shell both.
// (`npm run serve` in a checkout execs node, so npm signals it directly.)
const LONG_RUNNING = new Set(['serve', 'relayer', 'worker', 'dev']);
const PARENT_SIGNAL = 'metarelay:parent-signal';
const SHELLS = new Set(['sh', 'dash', 'bash', 'ash', 'zsh', 'ksh', 'mksh', 'busybox']);
if ((process.env.npm_lifecycle_event || process.env.npm_command) && LONG_RUNNING.has(process.argv[2])) {
  const parent = process.ppid;
  const shell = SHELLS.has(procFile(parent, 'comm')?.trim());
  // Counted from the first tick: by then the shell has long been waiting on this process.
  let wakes;
  const signal = (name) => {
    clearInterval(watch);
    if (process.listenerCount(PARENT_SIGNAL)) process.emit(PARENT_SIGNAL, name);
    // Not serving yet (no drain to run): the signal's own default ends the process.
    else process.kill(process.pid, name);
  };
  const watch = setInterval(() => {
    if (process.ppid !== parent) return signal('SIGTERM');
    if (!shell) return;
    const now = wakesOf(parent);
    if (wakes !== undefined && now !== undefined && now > wakes) return signal('SIGINT');
    wakes = now;
  }, 200);
  // It must not keep a finished command alive.
  watch.unref();
  // In a container whose entry is `npx metarelay …` or `npm start`, npm is PID 1 with that shell between
  // it and this process: at a stop (SIGTERM) npm exits at once, and with PID 1 gone the runtime kills
  // this process before it can drain. Nothing here can prevent that, so it is said at start, with the two fixes.
  // Only with a shell between: npm whose own parent is PID 1 (systemd's `ExecStart=npm run serve`, an npm
  // left running by a shell that exited) is not PID 1, and systemd's stop reaches every process of the unit.
  if (shell && parentOf(process.ppid) === 1) {
    console.error(
      'metarelay: npm is PID 1 here (a container entry of `npx metarelay` or `npm start`) with a shell between it and the server, so a stop kills the server without a drain: make the entry `node node_modules/metarelay/bin/metarelay.mjs …`, or set npm_config_script_shell=/bin/bash (docs/production.md, "Signals reach the server")',
    );
  }
}

/** A /proc file of a process (Linux), or undefined where it cannot be read. */
function procFile(pid, name) {
  try {
    return readFileSync(`/proc/${pid}/${name}`, 'utf8');
  } catch {
    return undefined;
  }
}

/** The parent of a process. */
function parentOf(pid) {
  const stat = procFile(pid, 'stat');
  // pid (comm) state ppid …: comm may hold spaces and parentheses, so read after the last ')'.
  return stat === undefined ? undefined : Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

/** How many times a process has gone to sleep by itself: a shell waiting on its command only wakes for a signal. */
function wakesOf(pid) {
  const m = /^voluntary_ctxt_switches:\s+(\d+)$/m.exec(procFile(pid, 'status') ?? '');
  return m ? Number(m[1]) : undefined;
}

let main;
if (fromSource) {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import('../src/cli/main.ts'));
} else if (existsSync(new URL('dist/cli/main.js', root))) {
  // Stack traces point at the TypeScript lines (the maps carry the sources).
  process.setSourceMapsEnabled(true);
  ({ main } = await import('../dist/cli/main.js'));
} else {
  console.error('metarelay: no build found (dist/cli/main.js); run `npm run build`, or `npm install` for the dev dependencies');
  process.exit(1);
}
await main(process.argv.slice(2));
