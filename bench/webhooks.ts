// Issue #15/#36: webhook delivery throughput (events/s delivered, signed, to a local receiver that
// verifies each signature) and the time from the committing of a state change's transaction to the
// receiver's 200 (p50/p99).
//
//   METARELAY_TEST_DB=pglite   npx tsx bench/webhooks.ts
//   METARELAY_TEST_DB=postgres npx tsx bench/webhooks.ts      # 127.0.0.1:5432 (METARELAY_TEST_PG_URL)
//
// Options: BENCH_EVENTS (5000, throughput phase), BENCH_CONCURRENCY (webhooks.concurrency, default 16),
// BENCH_LATENCY_EVENTS (300), BENCH_RATE (50 events/s in the latency phase), BENCH_RECEIVER (child: the
// receiver runs in a process of its own, the default; inproc: in this one), BENCH_PROFILE (a file: a
// CPU profile of this process over the throughput phase only, for `node bench/lib/profile-summary.mjs`).
//
// Throughput: BENCH_EVENTS events are committed (100 per transaction) with no worker running, then one
// delivery worker (the default settings: 16 in flight) is started; the figure is events delivered per
// second until the receiver has them all. Every delivery is signed with the endpoint's secret and the
// receiver verifies it (a bad signature is answered 401 and counted). Also reported for that phase: the
// SQL statements and transactions the worker ran per event, this process's CPU per event, the
// receiver's, and PostgreSQL's (every postgres process on the machine, from /proc).
// Latency: with the worker idle, one event per transaction at BENCH_RATE/s, the bell rung inside the
// transaction as the relayer's status hook does; measured from the transaction's commit to the moment
// the receiver sends its 200 (both on the wall clock of this machine).
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { loadavg } from 'node:os';
import { parseConfig } from '../src/config/load.ts';
import { DeliveryWorker } from '../src/events/delivery.ts';
import { appendEvents, EventBell, outbox } from '../src/events/outbox.ts';
import { createPoster } from '../src/untrusted/post.ts';
import { webhookStore } from '../src/events/webhook-store.ts';
import type { Db } from '../src/store/db.ts';
import { projectRepo } from '../src/store/projects.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { benchDb, log, summarize } from './support.ts';
import { type Arrival, startReceiver, wallMs } from './lib/webhook-receiver.ts';

const kind = (process.env.METARELAY_TEST_DB ?? 'pglite') as 'pglite' | 'postgres';
const N = Number(process.env.BENCH_EVENTS ?? 5000);
const L = Number(process.env.BENCH_LATENCY_EVENTS ?? 300);
const RATE = Number(process.env.BENCH_RATE ?? 50);
const RECEIVER = process.env.BENCH_RECEIVER === 'inproc' ? 'inproc' : 'child';
const load = () => loadavg().map((x) => Math.round(x * 100) / 100);
const loadBefore = load();

const { db: raw, drop } = await benchDb(kind);

/** Counts what the worker sends to the database (the same Db underneath: nothing is faked). */
const sql = { statements: 0, transactions: 0 };
const db: Db = {
  kind: raw.kind,
  query: (text, params) => (sql.statements++, raw.query(text, params)),
  exec: (text) => raw.exec(text),
  transaction: (fn) => {
    sql.transactions++;
    return raw.transaction((tx) => fn({ ...tx, query: (text, params) => (sql.statements++, tx.query(text, params)), exec: tx.exec, atCommit: tx.atCommit }));
  },
  close: () => raw.close(),
};

const answered = new Map<string, number>();
let requests = 0;
let badSignatures = 0;
let onArrival: (() => void) | undefined;
const arrive = ([id, at, signed]: Arrival) => {
  requests++;
  if (!signed) badSignatures++;
  else if (!answered.has(id)) answered.set(id, at);
  onArrival?.();
};
const waitFor = (n: number) => new Promise<void>((r) => (onArrival = () => answered.size >= n && r()));

const settings = { ...parseConfig({}).webhooks, ...(process.env.BENCH_CONCURRENCY ? { concurrency: Number(process.env.BENCH_CONCURRENCY) } : {}) };
const project = await projectRepo(raw).create('bench');
const store = webhookStore(db);
// The secret is the endpoint's own, as created for a user: the worker signs with it, the receiver checks.
const { webhook, secret } = await store.create({ projectId: project.id, url: 'http://127.0.0.1:1/hook', events: ['*'], chainIds: null, description: '' });
const receiver = await startReceiver(RECEIVER, secret, arrive);
await store.update(webhook.id, { url: receiver.url });
const bell = new EventBell();
const post = createPoster({ allowPrivateNetworks: true, allowedPrivateHosts: [], maxSockets: Math.max(64, settings.concurrency) });
const worker = new DeliveryWorker({ store, outbox: outbox(db), post, bell, log: createLogger('silent'), settings });
const payload = (i: number) => ({ chainId: 1, metaTxnId: i.toString(16).padStart(64, '0'), status: 'SUCCEEDED', receipt: { logs: [], txnHash: `0x${'ab'.repeat(32)}` } });

/** CPU (µs) of every postgres process now: the server's share of the work, when it runs on this machine. */
function postgresCpuUs(): number {
  let ticks = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (!stat.includes('(postgres)')) continue;
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // The process ended while it was read.
    }
  }
  return ticks * 10_000;
}

// Throughput.
for (let i = 0; i < N; i += 100) {
  await raw.transaction((tx) =>
    appendEvents(
      tx,
      Array.from({ length: Math.min(100, N - i) }, (_, j) => ({ type: 'metatxn.status' as const, chainId: 1, projectId: project.id, subject: `m${i + j}`, data: payload(i + j) })),
    ),
  );
}
const profiler = process.env.BENCH_PROFILE ? new Session() : undefined;
if (profiler) {
  profiler.connect();
  await profiler.post('Profiler.enable');
  await profiler.post('Profiler.start');
}
const done = waitFor(N);
sql.statements = sql.transactions = 0;
const cpu0 = process.cpuUsage();
const recv0 = await receiver.cpuUs();
const pg0 = postgresCpuUs();
const t0 = performance.now();
worker.start();
await done;
const seconds = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
const recvCpu = await receiver.cpuUs();
const pgCpu = postgresCpuUs() - pg0;
const perEvent = (x: number) => Math.round((x / N) * 1000) / 1000;
const throughput = {
  eventsPerSec: Math.round(N / seconds),
  seconds: Math.round(seconds * 100) / 100,
  statementsPerEvent: perEvent(sql.statements),
  transactionsPerEvent: perEvent(sql.transactions),
  serviceCpuUsPerEvent: Math.round((cpu.user + cpu.system) / N),
  receiverCpuUsPerEvent: recv0 === undefined || recvCpu === undefined ? null : Math.round((recvCpu - recv0) / N),
  postgresCpuUsPerEvent: kind === 'postgres' ? Math.round(pgCpu / N) : null,
};
if (profiler) {
  const { profile } = await profiler.post('Profiler.stop');
  writeFileSync(process.env.BENCH_PROFILE!, JSON.stringify(profile));
  profiler.disconnect();
}
log(`throughput: ${N} events in ${seconds.toFixed(2)} s = ${throughput.eventsPerSec} events/s ${JSON.stringify(throughput)}`);

// Latency.
const committed = new Map<string, number>();
const base = answered.size;
const latencyDone = waitFor(base + L);
for (let i = 0; i < L; i++) {
  const [id] = await raw.transaction(async (tx) => {
    const ids = await appendEvents(tx, [{ type: 'metatxn.status', chainId: 1, projectId: project.id, subject: `l${i}`, data: payload(N + i) }]);
    bell.ring();
    return ids;
  });
  committed.set(`evt_${id}`, wallMs());
  await new Promise((r) => setTimeout(r, 1000 / RATE));
}
await latencyDone;
const latency = summarize([...committed].map(([id, at]) => answered.get(id)! - at));
log(`commit → 200: ${JSON.stringify(latency)}`);

await worker.stop();
post.close();
await receiver.close();
await drop();
console.log(
  JSON.stringify({
    db: kind,
    receiver: RECEIVER,
    concurrency: settings.concurrency,
    events: N,
    ...throughput,
    requests,
    duplicates: requests - badSignatures - answered.size,
    badSignatures,
    latencyEvents: L,
    rate: RATE,
    commitTo200: latency,
    loadavg: { before: loadBefore, after: load() },
  }),
);
