// Servers measured in processes of their own, as users run them: metarelay through its binary
// (`node bin/metarelay.mjs dev|serve`, what `npm start` / `npm run serve` run) and the bare anchor.
import { fork, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { REPO_ROOT } from '../../src/devchain/index.ts';
import { progress } from './harness.ts';

export interface ServerProcess {
  pid: number;
  baseUrl: string;
  /** CPU time (user + system) the process has used so far, in microseconds. */
  cpuUs(): number;
  stop(): Promise<void>;
}

const TICK_US = 1e6 / 100; // Linux USER_HZ

/** utime + stime of a process from /proc, so the server's CPU is measured from outside it. */
export function processCpuUs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_US;
}

/** Processes whose parent is `pid` (from /proc), optionally only those named `comm` (e.g. dev's anvil). */
export function childPids(pid: number, comm?: string): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (ppid !== pid) continue;
    if (comm !== undefined && stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) !== comm) continue;
    out.push(Number(entry));
  }
  return out;
}

async function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await gone;
  clearTimeout(timer);
}

/**
 * BENCH_PIN=1: every server process (and what it starts after this, e.g. dev's anvil) runs on CPU 0
 * and this process (the load generator) on CPU 1, so a server gets exactly one core whether it is the
 * bare anchor or metarelay, and never competes with the load for it. PostgreSQL is not pinned.
 */
export function pinServer(pid: number): void {
  if (process.env.BENCH_PIN !== '1') return;
  for (const [cpus, target] of [
    ['0', pid],
    ['1', process.pid],
  ] as const) {
    const r = spawnSync('taskset', ['-a', '-cp', cpus, String(target)], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`BENCH_PIN: taskset failed: ${r.stderr || r.error}`);
  }
}

function handle(child: ChildProcess, baseUrl: string): ServerProcess {
  return { pid: child.pid!, baseUrl, cpuUs: () => processCpuUs(child.pid!), stop: () => stopChild(child) };
}

/** The bare fastify anchor, answering `answers` (see bare-server.ts). */
export async function startBare(answers: { get: Record<string, string>; post: Record<string, string> }, dir: string): Promise<ServerProcess> {
  const file = path.join(dir, 'bare-answers.json');
  writeFileSync(file, JSON.stringify(answers));
  const execArgv = process.execArgv.filter((a) => !a.startsWith('--cpu-prof') && !a.startsWith('--heap-prof'));
  const child = fork(fileURLToPath(new URL('./bare-server.ts', import.meta.url)), [file], { execArgv, stdio: ['ignore', 2, 2, 'ipc'] });
  pinServer(child.pid!);
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (m: { port: number }) => resolve(m.port));
    child.once('exit', (code) => reject(new Error(`bare server exited (${code})`)));
  });
  return handle(child, `http://127.0.0.1:${port}`);
}

/** Waits until `url` answers 200, or the process exits. */
async function waitUp(child: ChildProcess, url: string, timeoutMs: number, what: string): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (child.exitCode !== null) {
      const output = (child as ChildProcess & { output?: () => string }).output?.() ?? '';
      throw new Error(`${what} exited with code ${child.exitCode}:\n${output}`);
    }
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${what} did not answer ${url} within ${timeoutMs} ms`);
}

/** Extra node flags for the metarelay process, e.g. BENCH_SERVER_NODE_OPTIONS=--cpu-prof. */
function serverNodeArgs(): string[] {
  return (process.env.BENCH_SERVER_NODE_OPTIONS ?? '').split(' ').filter(Boolean);
}

function spawnMetarelay(args: string[], env: Record<string, string | undefined>, logFile: string): ChildProcess {
  const out = logFile;
  const child = spawn(process.execPath, [...serverNodeArgs(), path.join(REPO_ROOT, 'bin/metarelay.mjs'), ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    // stdout and stderr go to a file, as a service's logs go to its collector.
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Pinned before it starts anything of its own (dev's anvil inherits the CPU).
  pinServer(child.pid!);
  const chunks: Buffer[] = [];
  let size = 0;
  // Only the first 64 KB are kept, for error messages; the rest is read and dropped.
  const keep = (b: Buffer) => {
    if (size < 65_536) {
      chunks.push(b);
      size += b.length;
    }
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  child.once('exit', () => writeFileSync(out, Buffer.concat(chunks)));
  (child as ChildProcess & { output?: () => string }).output = () => Buffer.concat(chunks).toString('utf8').slice(-2_000);
  return child;
}

export interface DevProcess extends ServerProcess {
  manifest: { baseUrl: string; accessKey: string; chain: { chainId: number; name: string; rpcUrl: string }; contracts: Record<string, string> };
}

/**
 * `metarelay dev` (what `npm start` runs) on a fresh data folder: its own anvil, PGlite, worker, watcher,
 * indexer and dispatcher. `databaseUrl`: a PostgreSQL database instead of PGlite (dev honours DATABASE_URL).
 */
export async function startDev(dataDir: string, opts: { databaseUrl?: string } = {}): Promise<DevProcess> {
  const manifestPath = path.join(dataDir, 'dev.json');
  const child = spawnMetarelay(['dev', '--port', '0', '--data', dataDir], { DATABASE_URL: opts.databaseUrl }, path.join(dataDir, 'dev.log'));
  const until = Date.now() + 180_000;
  while (!existsSync(manifestPath)) {
    if (child.exitCode !== null) throw new Error(`metarelay dev exited with code ${child.exitCode}; see ${dataDir}/dev.log`);
    if (Date.now() > until) throw new Error('metarelay dev did not write its manifest within 180 s');
    await new Promise((r) => setTimeout(r, 250));
  }
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as DevProcess['manifest'];
  await waitUp(child, `${manifest.baseUrl}/health`, 30_000, 'metarelay dev');
  progress(`metarelay dev (pid ${child.pid}) on ${manifest.baseUrl}`);
  return { ...handle(child, manifest.baseUrl), manifest };
}

/** `metarelay serve --config <file>` with the config's in-process worker and dispatcher. */
export async function startServe(configFile: string, port: number, logFile: string): Promise<ServerProcess> {
  const child = spawnMetarelay(['serve', '--config', configFile, '--port', String(port)], {}, logFile);
  const baseUrl = `http://127.0.0.1:${port}`;
  await waitUp(child, `${baseUrl}/health`, 120_000, 'metarelay serve');
  progress(`metarelay serve (pid ${child.pid}) on ${baseUrl}`);
  return handle(child, baseUrl);
}

/**
 * `metarelay relayer --config <file>`: the dispatchers alone, no HTTP. `started` says when it is up
 * (e.g. it holds a sender lease in the database); it has `timeoutMs` to get there.
 */
export async function startRelayerOnly(configFile: string, logFile: string, started: () => Promise<boolean>, timeoutMs = 120_000): Promise<ServerProcess> {
  const child = spawnMetarelay(['relayer', '--config', configFile], {}, logFile);
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`metarelay relayer exited with code ${child.exitCode}:\n${(child as ChildProcess & { output?: () => string }).output?.() ?? ''}`);
    if (await started().catch(() => false)) break;
    if (Date.now() > until) {
      await stopChild(child);
      throw new Error(`metarelay relayer did not start within ${timeoutMs} ms`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  progress(`metarelay relayer (pid ${child.pid})`);
  return handle(child, '');
}

/** CPU used so far (µs) by this process, every PostgreSQL process, every anvil, the rest of the machine, and idle. */
export interface CpuSnapshot {
  self: number;
  postgres: number;
  anvil: number;
  machineBusy: number;
  machineIdle: number;
}

/**
 * Where a phase's CPU went, read from /proc (the processes of the machine) and /proc/stat (the
 * machine): on a 2-core machine shared by the service, PostgreSQL and anvil, the sum is what bounds
 * a rate, and each share says what a dedicated host would take off it.
 */
export function cpuSnapshot(): CpuSnapshot {
  const snap: CpuSnapshot = { self: processCpuUs(process.pid), postgres: 0, anvil: 0, machineBusy: 0, machineIdle: 0 };
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const us = (Number(fields[11]) + Number(fields[12])) * TICK_US;
    if (comm === 'postgres') snap.postgres += us;
    else if (comm === 'anvil') snap.anvil += us;
  }
  const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal
  snap.machineIdle = (cpu[3] + cpu[4]) * TICK_US;
  snap.machineBusy = (cpu[0] + cpu[1] + cpu[2] + cpu[5] + cpu[6] + cpu[7]) * TICK_US;
  return snap;
}

/** CPU ms per unit of work between two snapshots, by process group, and how busy the machine was. */
export function cpuPerUnit(a: CpuSnapshot, b: CpuSnapshot, units: number) {
  const ms = (k: keyof CpuSnapshot) => Math.round(((b[k] - a[k]) / 1000 / units) * 1000) / 1000;
  const busy = b.machineBusy - a.machineBusy;
  const all = busy + (b.machineIdle - a.machineIdle);
  return {
    metarelayAndClientMs: ms('self'),
    postgresMs: ms('postgres'),
    anvilMs: ms('anvil'),
    machineMs: ms('machineBusy'),
    machineBusyShare: all > 0 ? Math.round((busy / all) * 1000) / 1000 : 0,
  };
}
