import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface LoadTarget {
  url: string;
  method: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
}

export interface LoadSummary {
  durationS: number;
  requests: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  non2xx: number;
  errors: number;
  timeouts: number;
}

export interface LoadRequest {
  id: number;
  target: LoadTarget;
  connections: number;
  seconds: number;
}

export type LoadResponse = { id: number; ok: true; summary: LoadSummary } | { id: number; ok: false; error: string };

export interface LoadGenerator {
  run(target: LoadTarget, opts: { connections: number; seconds: number }): Promise<LoadSummary>;
  stop(): Promise<void>;
}

/** Forks the autocannon worker; one run at a time. */
export function startLoadGenerator(): LoadGenerator {
  // Inherit tsx's loader flags but not profiling ones: a profile should show the server only.
  const execArgv = process.execArgv.filter((a) => !a.startsWith('--cpu-prof') && !a.startsWith('--heap-prof'));
  // The child's stdout goes to our stderr: our stdout carries nothing but the result JSON.
  const child: ChildProcess = fork(fileURLToPath(new URL('./load-worker.ts', import.meta.url)), [], {
    execArgv,
    stdio: ['ignore', 2, 2, 'ipc'],
  });
  const waiting = new Map<number, { resolve: (s: LoadSummary) => void; reject: (e: Error) => void }>();
  let nextId = 1;
  let exited = false;
  child.on('message', (m: LoadResponse) => {
    const w = waiting.get(m.id);
    if (!w) return;
    waiting.delete(m.id);
    if (m.ok) w.resolve(m.summary);
    else w.reject(new Error(`load generator: ${m.error}`));
  });
  const gone = new Promise<void>((r) =>
    child.once('exit', (code, signal) => {
      exited = true;
      for (const w of waiting.values()) w.reject(new Error(`load generator exited (code ${code}, signal ${signal})`));
      waiting.clear();
      r();
    }),
  );
  return {
    run(target, opts) {
      if (exited) return Promise.reject(new Error('load generator is not running'));
      const id = nextId++;
      return new Promise((resolve, reject) => {
        waiting.set(id, { resolve, reject });
        const req: LoadRequest = { id, target, connections: opts.connections, seconds: opts.seconds };
        child.send(req);
      });
    },
    async stop() {
      if (exited) return;
      child.disconnect();
      const timer = setTimeout(() => child.kill('SIGKILL'), 3_000);
      await gone;
      clearTimeout(timer);
    },
  };
}
