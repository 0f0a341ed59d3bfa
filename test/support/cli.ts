import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { format } from 'node:util';
import { vi } from 'vitest';
import { builtBin } from './build.ts';

/**
 * The checkout's bin, which runs src/ through tsx (`npm start`). cli-usage.test.ts runs it; the other
 * tests run the compiled build (support/build.ts), the code the package runs.
 */
export const SOURCE_BIN = resolve('bin/metarelay.mjs');

/**
 * V8 flags for a CLI process. --liftoff-only: PGlite's 9 MB of WebAssembly is run by V8's baseline
 * compiler alone, without the optimising tier compiling it again in the background, which for a
 * process of a few queries is wasted work: half the CPU of a `metarelay keys create` on PGlite, and
 * less CPU for the serve, relayer, worker and dev processes of the tests too (4 serve/worker test
 * files: 64.6/53.6 s -> 49.7/40.1 s user), whose databases see a test's load, not production's.
 */
const NODE_FLAGS = ['--liftoff-only'];

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the real binary (built) to completion. */
export function runCli(args: string[], env: Record<string, string> = {}, timeoutMs = 60_000): Promise<CliResult> {
  return runNode([...NODE_FLAGS, builtBin(), ...args], env, timeoutMs);
}

/**
 * Runs several commands of the built CLI in one node process, one after the other (cli-batch.mjs), in
 * `cwd`: each answers as its own process would (stdout, stderr, exit code), for ~0.2 s of CPU less
 * than a process of its own. For commands whose own work is what is checked (usage, refusals, lists);
 * what is about the process itself (its exit, signals, the bin) is checked with runCli's processes.
 */
export async function runBatch(argvs: string[][], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}, timeoutMs = 120_000): Promise<CliResult[]> {
  const main = resolve(dirname(builtBin()), '../dist/cli/main.js');
  const child = spawn(process.execPath, [...NODE_FLAGS, resolve(import.meta.dirname, 'cli-batch.mjs'), main], {
    cwd: opts.cwd,
    env: opts.env ?? process.env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  child.stdin.end(JSON.stringify(argvs));
  // A command that hangs (rather than answering) is killed, and the batch fails saying so.
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((r) => child.on('close', r)).finally(() => clearTimeout(timer));
  if (code !== 0) throw new Error(`the batch of ${argvs.length} CLI commands exited ${code}:\n${stdout}\n${stderr}`);
  const results = JSON.parse(stdout) as CliResult[];
  if (results.length !== argvs.length) throw new Error(`the batch answered ${results.length} of ${argvs.length} commands:\n${stderr}`);
  return results;
}

/**
 * The CLI's main() in this process, its console captured, and the exit code it set: a command's own
 * work without a node, the CLI's modules and PGlite's compile of its own (~0.3 s of CPU a command on
 * PGlite). The process itself (the build, the bin, the code the shell sees) is what runCli checks.
 */
export async function runMain(args: string[]): Promise<CliResult> {
  const { main } = await import('../../src/cli/main.ts');
  const out = { stdout: '', stderr: '' };
  const log = vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void (out.stdout += `${format(...a)}\n`));
  const err = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void (out.stderr += `${format(...a)}\n`));
  // Progress lines (refresh, backfill) are written to the stream itself.
  const progress = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    out.stderr += String(chunk);
    return true;
  });
  const before = process.exitCode;
  process.exitCode = undefined;
  try {
    await main(args);
    return { code: Number(process.exitCode ?? 0), ...out };
  } finally {
    process.exitCode = before;
    log.mockRestore();
    err.mockRestore();
    progress.mockRestore();
  }
}

/** Runs a Node script (e.g. one of examples/) to completion. */
export function runNode(args: string[], env: Record<string, string> = {}, timeoutMs = 60_000): Promise<CliResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`node ${args.join(' ')} did not finish in ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    // 'close', not 'exit': at 'exit' the pipes may still hold the output's tail (a loaded machine
    // showed an exit code 0 with an empty stdout).
    child.on('close', (code) => {
      clearTimeout(timer);
      resolvePromise({ code, stdout, stderr });
    });
  });
}

export interface LongRunning {
  child: ChildProcess;
  output(): string;
  /** Resolves when the output matches, rejects if the process exits first. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export function startCli(args: string[], env: Record<string, string> = {}): LongRunning {
  const child = spawn(process.execPath, [...NODE_FLAGS, builtBin(), ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const listeners = new Set<() => void>();
  const onData = (d: Buffer) => {
    out += d.toString();
    for (const l of listeners) l();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return {
    child,
    output: () => out,
    waitFor(pattern, timeoutMs = 90_000) {
      return new Promise((resolvePromise, reject) => {
        const check = () => {
          const m = out.match(pattern);
          if (m) {
            cleanup();
            resolvePromise(m);
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`timed out waiting for ${pattern}; output so far:\n${out}`));
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        void exited.then((code) => {
          if (listeners.has(check)) {
            cleanup();
            reject(new Error(`process exited (${code}) before ${pattern}; output:\n${out}`));
          }
        });
        check();
      });
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
