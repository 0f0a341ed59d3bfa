// Issue #19: does `serve`'s memory grow with time when nothing is asked of it? The soak saw RSS rise
// ~6.6 MB/min whatever the request rate. This runs one `serve` (dispatcher on, 4 senders, PostgreSQL,
// anvil mining every second) with no traffic, samples RSS every 5 s, and writes V8 heap snapshots
// (SIGUSR2, --heapsnapshot-signal) after the warm-up and at the end, so the two can be compared by
// constructor (bench/heap-diff.ts).
//
//   npx tsx bench/relayer-memory.ts            # BENCH_MINUTES (10), BENCH_SNAPSHOTS (1: write them)
//   BENCH_RATE=20 npx tsx bench/relayer-memory.ts   # the same under a steady open-loop load (meta-txns/s)
//
// Besides RSS it samples V8's own figures from the process's /metrics (heap used, heap total, external),
// which tell a leak (heap used after GC keeps rising) from V8 growing its heap lazily (RSS rises, heap
// used does not).
import { readdirSync, renameSync } from 'node:fs';
import path from 'node:path';
import { rpcCall } from '../src/devchain/index.ts';
import { envNumber, progress, runBench } from './lib/harness.ts';
import { ADMIN_TOKEN, startCluster } from './lib/relayer-cluster.ts';
import { HeadWatch } from './lib/relayer-bench.ts';
import { callRelayer, newUsers, openLoop, readyWallets, sampleProcesses, sendBody, signJobs } from './lib/relayer-load.ts';

const MINUTES = envNumber('BENCH_MINUTES', 10);
const SNAPSHOTS = envNumber('BENCH_SNAPSHOTS', 1) === 1;
const RATE = envNumber('BENCH_RATE', 0);
const OUT = process.env.BENCH_SNAPSHOT_DIR ?? '/tmp';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function snapshot(pid: number, cwd: string, name: string): Promise<string | undefined> {
  const before = new Set(readdirSync(cwd).filter((f) => f.endsWith('.heapsnapshot')));
  process.kill(pid, 'SIGUSR2');
  for (let i = 0; i < 240; i++) {
    await sleep(500);
    const fresh = readdirSync(cwd).filter((f) => f.endsWith('.heapsnapshot') && !before.has(f));
    if (fresh.length) {
      await sleep(3_000); // written in one go by the signal handler; give it time to close
      const to = path.join(OUT, `${name}.heapsnapshot`);
      renameSync(path.join(cwd, fresh[0]), to);
      return to;
    }
  }
  return undefined;
}

/** V8's heap figures from prom-client's default metrics, in MB. */
async function heapOf(baseUrl: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${baseUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
  const pick = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? NaN) / 1e6;
  return { heapUsed: pick('nodejs_heap_size_used_bytes'), heapTotal: pick('nodejs_heap_size_total_bytes'), external: pick('nodejs_external_memory_bytes') };
}

runBench(async (cleanup) => {
  if (SNAPSHOTS) process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} --heapsnapshot-signal=SIGUSR2`.trim();
  const cluster = await startCluster(cleanup, { senders: 4 });
  await rpcCall(cluster.rpcUrl, 'evm_setAutomine', [false]);
  await rpcCall(cluster.rpcUrl, 'evm_setIntervalMining', [1]);
  const serve = await cluster.serve('serve', true);
  const heap: Array<[number, Record<string, number>]> = [];
  const t0 = Date.now();
  const heapTimer = setInterval(
    () =>
      void heapOf(serve.baseUrl).then(
        (h) => heap.push([Math.round((Date.now() - t0) / 1000), h]),
        () => {},
      ),
    5_000,
  );
  cleanup.add('heap sampler', () => clearInterval(heapTimer));
  let load: Promise<unknown> = Promise.resolve();
  if (RATE > 0) {
    await cluster.sponsorToken(serve.relayerUrl);
    const total = RATE * 60 * (MINUTES + 1);
    const users = newUsers(200);
    await readyWallets(cluster.rpcUrl, cluster.chainId, cluster.token, users);
    const plan = Array.from({ length: total }, (_, i) => ({ user: users[i % users.length], space: BigInt(Math.floor(i / users.length) + 1), n: 0n }));
    const jobs = await signJobs(cluster.chainId, cluster.token, plan);
    const heads = new HeadWatch(cluster.rpcUrl);
    await heads.ready();
    cleanup.add('head watch', () => heads.stop());
    progress(`load: ${total} meta-transactions at ${RATE}/s`);
    load = openLoop(jobs, RATE, 1, 1_000, heads, (job) => callRelayer(serve.relayerUrl, cluster.accessKey, 'SendMetaTxn', sendBody(job)));
  }
  const rss = sampleProcesses({ serve: serve.pid }, 5_000);
  const cwd = path.resolve(import.meta.dirname, '..');
  await sleep(60_000);
  const first = SNAPSHOTS ? await snapshot(serve.pid, cwd, 'memory-start') : undefined;
  progress(`idle for ${MINUTES} min`);
  for (let m = 1; m <= MINUTES; m++) {
    await sleep(60_000);
    const last = rss.series[rss.series.length - 1];
    const h = heap[heap.length - 1]?.[1];
    progress(`minute ${m}: RSS ${last?.rssMb.serve} MB, heap used ${h?.heapUsed.toFixed(1)} of ${h?.heapTotal.toFixed(1)} MB, external ${h?.external.toFixed(1)} MB`);
  }
  const second = SNAPSHOTS ? await snapshot(serve.pid, cwd, 'memory-end') : undefined;
  await load;
  return { bench: 'relayer-memory', minutes: MINUTES, rate: RATE, heap, snapshots: [first, second], rss: rss.stop(), series: rss.series.map((s) => [s.t, s.rssMb.serve]) };
});
