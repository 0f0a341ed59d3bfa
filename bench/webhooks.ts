// Issue #15: webhook delivery throughput (events/s delivered to a local receiver answering 200) and the
// time from the committing of a state change's transaction to the receiver's 200 (p50/p99).
//
//   METARELAY_TEST_DB=pglite   npx tsx bench/webhooks.ts
//   METARELAY_TEST_DB=postgres npx tsx bench/webhooks.ts      # 127.0.0.1:5432 (METARELAY_TEST_PG_URL)
//
// Options: BENCH_EVENTS (5000, throughput phase), BENCH_CONCURRENCY (webhooks.concurrency, default 16), BENCH_LATENCY_EVENTS (300), BENCH_RATE (50 events/s
// in the latency phase).
//
// Throughput: BENCH_EVENTS events are committed (100 per transaction) with no worker running, then one
// delivery worker (the default settings: 16 in flight, claims of 64) is started; the figure is events
// delivered per second until the receiver has them all. Latency: with the worker idle, one event per
// transaction at BENCH_RATE/s, the bell rung inside the transaction as the relayer's status hook does;
// measured from the transaction's commit to the moment the receiver sends its 200.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseConfig } from '../src/config/load.ts';
import { DeliveryWorker } from '../src/events/delivery.ts';
import { appendEvents, EventBell, outbox } from '../src/events/outbox.ts';
import { createPoster } from '../src/events/post.ts';
import { webhookStore } from '../src/events/webhook-store.ts';
import { projectRepo } from '../src/store/projects.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { benchDb, log, summarize } from './support.ts';

const kind = (process.env.METARELAY_TEST_DB ?? 'pglite') as 'pglite' | 'postgres';
const N = Number(process.env.BENCH_EVENTS ?? 5000);
const L = Number(process.env.BENCH_LATENCY_EVENTS ?? 300);
const RATE = Number(process.env.BENCH_RATE ?? 50);

const { db, drop } = await benchDb(kind);
const answered = new Map<string, number>();
let count = 0;
let onCount: (() => void) | undefined;
const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200).end();
    answered.set(String(req.headers['metarelay-event-id']), performance.now());
    count++;
    onCount?.();
  });
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
const waitFor = (n: number) => new Promise<void>((r) => (onCount = () => count >= n && r()));

const settings = { ...parseConfig({}).webhooks, ...(process.env.BENCH_CONCURRENCY ? { concurrency: Number(process.env.BENCH_CONCURRENCY) } : {}) };
const project = await projectRepo(db).create('bench');
const store = webhookStore(db);
await store.create({ projectId: project.id, url, events: ['*'], chainIds: null, description: '' });
const bell = new EventBell();
const post = createPoster({ allowPrivateNetworks: true, allowedPrivateHosts: [] });
const worker = new DeliveryWorker({ store, outbox: outbox(db), post, bell, log: createLogger('silent'), settings });
const payload = (i: number) => ({ chainId: 1, metaTxnId: i.toString(16).padStart(64, '0'), status: 'SUCCEEDED', receipt: { logs: [], txnHash: `0x${'ab'.repeat(32)}` } });

// Throughput.
for (let i = 0; i < N; i += 100) {
  await db.transaction((tx) =>
    appendEvents(
      tx,
      Array.from({ length: Math.min(100, N - i) }, (_, j) => ({ type: 'metatxn.status' as const, chainId: 1, projectId: project.id, subject: `m${i + j}`, data: payload(i + j) })),
    ),
  );
}
const done = waitFor(N);
const t0 = performance.now();
worker.start();
await done;
const seconds = (performance.now() - t0) / 1000;
const throughput = Math.round(N / seconds);
log(`throughput: ${N} events in ${seconds.toFixed(2)} s = ${throughput} events/s`);

// Latency.
const committed = new Map<string, number>();
const base = count;
const latencyDone = waitFor(base + L);
for (let i = 0; i < L; i++) {
  const [id] = await db.transaction(async (tx) => {
    const ids = await appendEvents(tx, [{ type: 'metatxn.status', chainId: 1, projectId: project.id, subject: `l${i}`, data: payload(N + i) }]);
    bell.ring();
    return ids;
  });
  committed.set(`evt_${id}`, performance.now());
  await new Promise((r) => setTimeout(r, 1000 / RATE));
}
await latencyDone;
const samples = [...committed].map(([id, at]) => answered.get(id)! - at);
const latency = summarize(samples);
log(`commit → 200: ${JSON.stringify(latency)}`);

await worker.stop();
post.close();
server.close();
await drop();
console.log(JSON.stringify({ db: kind, concurrency: settings.concurrency, events: N, eventsPerSec: throughput, latencyEvents: L, rate: RATE, commitTo200: latency }));
