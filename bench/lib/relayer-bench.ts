// Helpers for the relayer benchmarks that run a real relayer on a real anvil (test/support/relayer-env.ts)
// outside vitest (bench/relayer-intake.ts and bench/relayer-dispatch.ts): the test-database hand-over,
// the head watch (with a base-fee driver, both in a worker thread) and the statistics.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { REPO_ROOT } from '../../src/devchain/index.ts';
import globalSetup from '../../test/support/global-setup.ts';
import { percentile } from '../support.ts';
import { progress, type Cleanup } from './harness.ts';
import { FINAL_STATUSES } from '../../src/relayer/store.ts';

/**
 * The test database outside vitest: runs the suite's own global setup (PGlite template folder, or a
 * PostgreSQL template database) and hands what it provides to test/support/db.ts the way vitest does.
 */
export async function provideTestDbContext(cleanup: Cleanup): Promise<void> {
  // global-setup and db.ts resolve node_modules/.cache relative to the working directory.
  process.chdir(REPO_ROOT);
  const provided: Record<string, unknown> = {};
  const teardown = await globalSetup({ provide: (k: string, v: unknown) => void (provided[k] = v) } as unknown as Parameters<typeof globalSetup>[0]);
  if (teardown) cleanup.add('drop the test template database', teardown);
  // vitest's inject() reads globalThis.__vitest_worker__.providedContext.
  Object.defineProperty(globalThis, '__vitest_worker__', { value: { providedContext: provided }, configurable: true, writable: true, enumerable: false });
}

export const round3 = (x: number) => Math.round(x * 1000) / 1000;

/** The middle item by `key` (the upper middle of an even count): the median round of a repeated baseline, whole. */
export function medianBy<T>(items: readonly T[], key: (item: T) => number): T {
  return [...items].sort((a, b) => key(a) - key(b))[Math.floor(items.length / 2)];
}

export interface Dist {
  n: number;
  min?: number;
  p50?: number;
  p95?: number;
  p99?: number;
  max?: number;
  mean?: number;
}

export function dist(values: number[]): Dist {
  const s = [...values].sort((a, b) => a - b);
  if (!s.length) return { n: 0 };
  return {
    n: s.length,
    min: round3(s[0]),
    p50: round3(percentile(s, 50)),
    p95: round3(percentile(s, 95)),
    p99: round3(percentile(s, 99)),
    max: round3(s[s.length - 1]),
    mean: round3(s.reduce((a, b) => a + b, 0) / s.length),
  };
}

export function histogram(values: number[]): Record<string, number> {
  const h: Record<string, number> = {};
  for (const v of [...values].sort((a, b) => a - b)) h[String(v)] = (h[String(v)] ?? 0) + 1;
  return h;
}

/** Event-loop delay of this process while fn runs. */
export async function withLoopDelay<T>(fn: () => Promise<T>): Promise<{ value: T; eventLoopDelayMs: { p50: number; p99: number; max: number } }> {
  const h = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
  try {
    const value = await fn();
    return { value, eventLoopDelayMs: { p50: round3(h.percentile(50) / 1e6), p99: round3(h.percentile(99) / 1e6), max: round3(h.max / 1e6) } };
  } finally {
    h.disable();
  }
}

// ---------------------------------------------------------------------------------------------------
// The chain head, polled every 20 ms by a worker thread: PGlite runs on the main thread and can stall
// its event loop for a while, which would make a main-thread poller report a stale head.
//
// Optionally the same worker steers the base fee: `setBaseFees(schedule)` makes it call
// anvil_setNextBlockBaseFeePerGas with schedule[i] as soon as it sees the i-th new block after the
// call (the last value is held), so each value lands before the next block is mined without waiting
// on the main thread.

const HEAD_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const view = new Int32Array(workerData.shared);
const seen = [];
const feeLog = [];
let schedule = null;
let step = 0;
let busy = false;
async function call(method, params) {
  const res = await fetch(workerData.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  const body = await res.json();
  if (body.error) throw new Error(method + ': ' + body.error.message);
  return body.result;
}
async function poll() {
  if (busy) return;
  busy = true;
  try {
    const n = Number(BigInt(await call('eth_blockNumber', [])));
    if (n !== Atomics.load(view, 0)) {
      const first = Atomics.load(view, 0) < 0;
      Atomics.store(view, 0, n);
      seen.push({ block: n, at: Date.now() });
      if (schedule && !first) {
        const wei = schedule[Math.min(step, schedule.length - 1)];
        step++;
        try {
          await call('anvil_setNextBlockBaseFeePerGas', ['0x' + BigInt(wei).toString(16)]);
          feeLog.push({ afterBlock: n, nextBaseFee: wei, at: Date.now() });
        } catch (e) { feeLog.push({ afterBlock: n, error: String(e), at: Date.now() }); }
      }
    }
  } catch {} finally { busy = false; }
}
poll();
const timer = setInterval(poll, 20);
parentPort.on('message', (m) => {
  if (m === 'history') parentPort.postMessage({ seen, feeLog });
  else if (m === 'stop') { clearInterval(timer); parentPort.close(); }
  else if (m && m.schedule !== undefined) { schedule = m.schedule; step = 0; parentPort.postMessage({ ack: true }); }
});
`;

export class HeadWatch {
  private readonly view = new Int32Array(new SharedArrayBuffer(4));
  private readonly worker: Worker;
  private seen: Array<{ block: number; at: number }> = [];
  feeLog: Array<{ afterBlock: number; nextBaseFee?: string; error?: string; at: number }> = [];

  constructor(rpcUrl: string) {
    Atomics.store(this.view, 0, -1);
    this.worker = new Worker(HEAD_WORKER, { eval: true, workerData: { url: rpcUrl, shared: this.view.buffer } });
  }

  /** The latest head the worker has seen (no I/O). */
  get head(): number {
    return Atomics.load(this.view, 0);
  }

  async ready() {
    while (this.head < 0) await new Promise((r) => setTimeout(r, 10));
  }

  async waitFor(block: number, timeoutMs = 60_000) {
    const t0 = Date.now();
    while (this.head < block) {
      if (Date.now() - t0 > timeoutMs) throw new Error(`head ${this.head} did not reach ${block} in ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** From the next new block on, sets each following block's base fee from `weis` (decimal strings); null stops. */
  async setBaseFees(weis: string[] | null) {
    await new Promise((resolve) => {
      const on = (m: { ack?: boolean }) => {
        if (m?.ack) {
          this.worker.off('message', on);
          resolve(undefined);
        }
      };
      this.worker.on('message', on);
      this.worker.postMessage({ schedule: weis });
    });
  }

  /** Fetches the worker's list of when each block was first seen (and the base fees it set). */
  async refresh() {
    const r = await new Promise<{ seen: Array<{ block: number; at: number }>; feeLog: HeadWatch['feeLog'] }>((resolve) => {
      const on = (m: { seen?: unknown }) => {
        if (m?.seen) {
          this.worker.off('message', on);
          resolve(m as never);
        }
      };
      this.worker.on('message', on);
      this.worker.postMessage('history');
    });
    this.seen = r.seen;
    this.feeLog = r.feeLog;
  }

  /** The head at a wall-clock time (ms since epoch), from the last refresh(). */
  at(t: number): number {
    let b = this.seen[0]?.block ?? -1;
    for (const s of this.seen) {
      if (s.at > t) break;
      b = s.block;
    }
    return b;
  }

  /** When a block was first seen (ms since epoch), from the last refresh(); undefined if never seen. */
  seenAt(block: number): number | undefined {
    return this.seen.find((s) => s.block === block)?.at ?? this.seen.find((s) => s.block > block)?.at;
  }

  /** Mean time between blocks first seen in [from, to], from the last refresh(). */
  intervalMs(from: number, to: number): number {
    const xs = this.seen.filter((s) => s.at >= from && s.at <= to);
    if (xs.length < 2) return NaN;
    return Math.round((xs[xs.length - 1].at - xs[0].at) / (xs[xs.length - 1].block - xs[0].block));
  }

  async stop() {
    this.worker.postMessage('stop');
    await this.worker.terminate();
  }
}

/** Reads the rows of `ids` until every one has a final status, or `limitMs` passes; logs progress every 5 s. */
export async function waitFinal<R extends { status: string }>(read: () => Promise<Map<string, R>>, ids: string[], label: string, limitMs: number) {
  const t0 = Date.now();
  let lastLog = Date.now();
  for (;;) {
    const rows = await read();
    const open = ids.filter((id) => !FINAL_STATUSES.has(rows.get(id)?.status ?? ''));
    if (open.length === 0) return { rows, settleMs: Date.now() - t0, timedOut: false };
    if (Date.now() - t0 > limitMs) {
      progress(`${label}: ${open.length} of ${ids.length} still not final after ${limitMs / 1000} s`);
      return { rows, settleMs: Date.now() - t0, timedOut: true };
    }
    if (Date.now() - lastLog > 5_000) {
      lastLog = Date.now();
      const by: Record<string, number> = {};
      for (const id of ids) by[rows.get(id)?.status ?? 'MISSING'] = (by[rows.get(id)?.status ?? 'MISSING'] ?? 0) + 1;
      progress(`${label}: waiting, ${JSON.stringify(by)}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}
