// The local receiver of bench/webhooks.ts: verifies each delivery's signature as a real receiver
// would (src/events/signature.ts), answers 200 (401 on a bad signature), and notes when each event id
// was answered. Run in a process of its own (the default), so the bench's figure is the service's CPU
// and not the receiver's; or in the service's process (BENCH_RECEIVER=inproc) to compare.
import { fork } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { SIGNATURE_HEADER, verifySignature } from '../../src/events/signature.ts';

/** One answered request: the event id, when its 200 went (ms on the shared wall clock), whether the signature verified. */
export type Arrival = [id: string, at: number, signed: boolean];

/** Milliseconds since the epoch with sub-millisecond precision, comparable between processes on one machine. */
export const wallMs = () => performance.timeOrigin + performance.now();

function listen(secret: string, onArrival: (a: Arrival) => void): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const signed = verifySignature(secret, String(req.headers[SIGNATURE_HEADER] ?? ''), Buffer.concat(chunks).toString('utf8'));
      res.writeHead(signed ? 200 : 401).end();
      onArrival([String(req.headers['metarelay-event-id']), wallMs(), signed]);
    });
  });
  // The worker keeps connections alive; the server must not close them first under a long run.
  server.keepAliveTimeout = 60_000;
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

export interface Receiver {
  url: string;
  /** CPU the receiver has used (µs), when it runs in a process of its own. */
  cpuUs(): Promise<number | undefined>;
  close(): Promise<void>;
}

export async function startReceiver(mode: 'child' | 'inproc', secret: string, onArrival: (a: Arrival) => void): Promise<Receiver> {
  if (mode === 'inproc') {
    const server = await listen(secret, onArrival);
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
      cpuUs: async () => undefined,
      close: () => new Promise((r) => server.close(() => r())),
    };
  }
  const execArgv = process.execArgv.filter((a) => !a.startsWith('--cpu-prof'));
  const child = fork(fileURLToPath(import.meta.url), ['--child'], { execArgv: [...execArgv, '--import', 'tsx'], env: { ...process.env, BENCH_SECRET: secret } });
  let cpuWaiter: ((us: number) => void) | undefined;
  const port = await new Promise<number>((resolve, reject) => {
    child.once('error', reject);
    child.on('message', (m: { port?: number; arrivals?: Arrival[]; cpuUs?: number }) => {
      if (m.port) resolve(m.port);
      for (const a of m.arrivals ?? []) onArrival(a);
      if (m.cpuUs !== undefined) cpuWaiter?.(m.cpuUs);
    });
  });
  return {
    url: `http://127.0.0.1:${port}/hook`,
    cpuUs: () =>
      new Promise((resolve) => {
        cpuWaiter = resolve;
        child.send('cpu');
      }),
    close: async () => {
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await gone;
    },
  };
}

if (process.argv.includes('--child') && process.send) {
  // Arrivals go to the parent in batches (every 10 ms): one IPC message per request would load the measured process.
  let pending: Arrival[] = [];
  const server = await listen(process.env.BENCH_SECRET ?? '', (a) => pending.push(a));
  setInterval(() => {
    if (pending.length === 0) return;
    process.send?.({ arrivals: pending });
    pending = [];
  }, 10);
  process.on('message', (m) => {
    if (m !== 'cpu') return;
    const u = process.cpuUsage();
    process.send?.({ cpuUs: u.user + u.system });
  });
  process.on('SIGTERM', () => process.exit(0));
  process.send({ port: (server.address() as AddressInfo).port });
}
