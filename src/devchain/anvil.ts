import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { rpcCall } from './rpc.ts';

export interface AnvilHandle {
  rpcUrl: string;
  port: number;
  chainId: number;
  pid: number;
  stop(): Promise<void>;
  /** Its owner is stopping: an exit from now on (a Ctrl-C that reached anvil first) is not unexpected. */
  expectExit(): void;
}

export interface StartAnvilOptions {
  /** Seconds between blocks. Default 1; `null` or `0` means automine (a block per transaction). */
  blockTime?: number | null;
  chainId?: number;
  /** Default 0: let the OS pick a free port. */
  port?: number;
  binary?: string;
  /** Extra command-line arguments passed through to anvil. */
  args?: string[];
  log?: (msg: string) => void;
}

const START_TIMEOUT_MS = 15_000;
const STOP_GRACE_MS = 3_000;
const STDERR_KEEP_BYTES = 8_192;

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function anvilOnPath(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, 'anvil');
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

function anvilFromPackage(): string | undefined {
  try {
    const pkg = createRequire(import.meta.url).resolve('@foundry-rs/anvil-linux-amd64/package.json');
    const candidate = path.join(path.dirname(pkg), 'bin', 'anvil');
    return isExecutable(candidate) ? candidate : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Finds the anvil binary: explicit argument, then METARELAY_ANVIL, then PATH, then the
 * @foundry-rs/anvil-linux-amd64 package. An explicitly configured path that is not executable is an
 * error rather than a silent fallback, so a typo does not quietly run a different anvil.
 */
export function findAnvilBinary(configured?: string): string {
  for (const [source, value] of [
    ['configured path', configured],
    ['METARELAY_ANVIL', process.env.METARELAY_ANVIL],
  ] as const) {
    if (!value) continue;
    if (isExecutable(value)) return value;
    throw new Error(`anvil binary from ${source} (${value}) does not exist or is not executable`);
  }
  const found = anvilOnPath() ?? anvilFromPackage();
  if (found) return found;
  throw new Error(
    'anvil binary not found. Tried: a configured path (none given), METARELAY_ANVIL (unset), ' +
      '`anvil` on PATH, and the optional npm package @foundry-rs/anvil-linux-amd64 (bin/anvil). ' +
      'Install Foundry or the npm package, or set METARELAY_ANVIL to the binary.',
  );
}

/** How long after anvil's exit its owner's stop may begin for the exit to be expected (a Ctrl-C to the group). */
const STOP_FOLLOWS_MS = 2_000;

// Children still running when this process exits are killed, so no anvil outlives its parent.
const liveChildren = new Set<ChildProcess>();
let exitHookInstalled = false;
function trackChild(child: ChildProcess): void {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on('exit', () => {
      for (const c of liveChildren) c.kill('SIGKILL');
    });
  }
  liveChildren.add(child);
  child.once('exit', () => liveChildren.delete(child));
}

function buildArgs(opts: StartAnvilOptions, chainId: number): string[] {
  const args = ['--host', '127.0.0.1', '--port', String(opts.port ?? 0), '--chain-id', String(chainId)];
  const blockTime = opts.blockTime === undefined ? 1 : opts.blockTime;
  if (blockTime) args.push('--block-time', String(blockTime));
  return [...args, ...(opts.args ?? [])];
}

function waitForExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  if (await waitForExit(child, STOP_GRACE_MS)) return;
  child.kill('SIGKILL');
  await waitForExit(child, STOP_GRACE_MS);
}

/** Polls eth_chainId until it answers; undefined if startup was abandoned meanwhile. */
async function waitForChainId(rpcUrl: string, abandoned: () => boolean): Promise<number | undefined> {
  while (!abandoned()) {
    try {
      return Number(await rpcCall<string>(rpcUrl, 'eth_chainId', [], { timeoutMs: 1_000 }));
    } catch {
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  return undefined;
}

/** Spawns anvil on 127.0.0.1 and resolves once it answers eth_chainId. */
export async function startAnvil(opts: StartAnvilOptions = {}): Promise<AnvilHandle> {
  const binary = findAnvilBinary(opts.binary);
  const chainId = opts.chainId ?? 31337;
  const args = buildArgs(opts, chainId);
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  trackChild(child);

  let stderr = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-STDERR_KEEP_BYTES);
  });

  const describe = (why: string) => new Error(`anvil (${binary} ${args.join(' ')}) ${why}${stderr.trim() ? `\nstderr:\n${stderr.trim()}` : ''}`);

  return new Promise<AnvilHandle>((resolve, reject) => {
    let settled = false;
    const fail = (err: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      void terminate(child).finally(() => reject(err));
    };
    const timer = setTimeout(() => fail(describe(`did not become ready within ${START_TIMEOUT_MS / 1000} s`)), START_TIMEOUT_MS);

    child.once('error', (err) => fail(describe(`failed to start: ${err.message}`)));
    const onEarlyExit = (code: number | null, signal: NodeJS.Signals | null) => fail(describe(`exited during startup (code ${code}, signal ${signal})`));
    child.once('exit', onEarlyExit);

    // stdout must be drained for anvil's whole life: it logs every block and transaction there, and
    // a full pipe would block it.
    let stdoutHead = '';
    let port: number | undefined;
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      if (port !== undefined) return;
      stdoutHead = (stdoutHead + chunk).slice(-STDERR_KEEP_BYTES);
      const match = /Listening on 127\.0\.0\.1:(\d+)/.exec(stdoutHead);
      if (!match) return;
      port = Number(match[1]);
      const rpcUrl = `http://127.0.0.1:${port}`;
      const boundPort = port;
      waitForChainId(rpcUrl, () => settled).then(
        (answered) => {
          if (settled) return;
          if (answered !== chainId) {
            fail(describe(`answers chain id ${answered}, expected ${chainId}`));
            return;
          }
          settled = true;
          clearTimeout(timer);
          child.off('exit', onEarlyExit);
          let stopping = false;
          child.once('exit', (code, signal) => {
            // A terminal's Ctrl-C reaches every process of its group, anvil too (it exits 0 on SIGINT),
            // sometimes before this process has begun to stop it: that exit is expected once the stop
            // follows it, so it is judged a moment later.
            setTimeout(() => {
              if (!stopping) opts.log?.(`anvil ${child.pid} exited unexpectedly (code ${code}, signal ${signal}): ${stderr.trim()}`);
            }, STOP_FOLLOWS_MS).unref();
          });
          opts.log?.(`anvil ${child.pid} listening at ${rpcUrl} (chain ${chainId})`);
          const stop = () => {
            stopping = true;
            return terminate(child);
          };
          const expectExit = () => {
            stopping = true;
          };
          resolve({ rpcUrl, port: boundPort, chainId, pid: child.pid!, stop, expectExit });
        },
        (err: Error) => fail(describe(err.message)),
      );
    });
  });
}
