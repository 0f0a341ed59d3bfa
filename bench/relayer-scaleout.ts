// Issue #19: scale-out. Real processes of the one binary on one PostgreSQL database, in the same run:
//
//   single   1 × `metarelay serve` with its in-process dispatcher
//   scaled   2 × `metarelay serve` (relayer.inProcessDispatcher: false: API only)
//            + 2 × `metarelay relayer` (dispatch only, no HTTP)
//
//   npx tsx bench/relayer-scaleout.ts                                   # PostgreSQL at 127.0.0.1:5432 (BENCH_PG_URL)
//   BENCH_PER_CONFIG=500 npx tsx bench/relayer-scaleout.ts              # short check
//
// Options: BENCH_PER_CONFIG (2000 meta-transactions per configuration), BENCH_CONCURRENCY (32 requests in
// flight, spread round-robin over the API processes: no load balancer), BENCH_WALLETS (500),
// BENCH_SENDERS (8: anvil accounts 1..8, shared by the dispatching processes through their leases),
// BENCH_SETTLE_S (300).
//
// Each configuration runs two phases on fresh bundles (sponsored ERC20 transfers of deployed wallets,
// one nonce space each, signed before timing; anvil mines every second):
//   intake    every sender stopped (StopSender, the admin RPC), BENCH_PER_CONFIG SendMetaTxn closed-loop:
//             accepted per second and CPU per process; the dispatchers take nothing meanwhile.
//   dispatch  every sender started again (StartSender): the backlog drains; broadcasts and inclusions
//             per second (sent_at / mined_at of the rows), time to all final, CPU per process.
// CPU of each metarelay process comes from /proc/<pid>/stat (utime + stime), of anvil likewise, and of
// PostgreSQL from the backends serving this run's database (pg_stat_activity pids, /proc). CPU-ms per
// meta-transaction by role is the figure that blurs least on a shared machine: with c cores free, a
// role whose processes use x CPU-ms per meta-transaction reaches at most c × 1000 / x per second.
//
// Result JSON on stdout; progress on stderr.
import { readFileSync } from 'node:fs';
import { rpcCall } from '../src/devchain/index.ts';
import { envNumber, machineInfo, progress, runBench } from './lib/harness.ts';
import { processCpuUs, type ServerProcess } from './lib/processes.ts';
import { ADMIN_TOKEN, startCluster, type Cluster } from './lib/relayer-cluster.ts';
import { HeadWatch, round3 } from './lib/relayer-bench.ts';
import {
  benchCommand,
  callRelayer,
  closedLoop,
  diffCounts,
  dispatchRate,
  intakeSummary,
  metaRows,
  newUsers,
  perItem,
  readyWallets,
  sampleProcesses,
  scrapeChainRpcCalls,
  sendBody,
  signJobs,
  waitAllFinal,
  type Job,
} from './lib/relayer-load.ts';

const PER_CONFIG = envNumber('BENCH_PER_CONFIG', 2_000);
const CONCURRENCY = envNumber('BENCH_CONCURRENCY', 32);
const WALLETS = envNumber('BENCH_WALLETS', 500);
const SENDERS = envNumber('BENCH_SENDERS', 8);
const SETTLE_MS = envNumber('BENCH_SETTLE_S', 300) * 1000;
const WARMUP = 20;

type Config = 'single' | 'scaled';

/** PIDs of the PostgreSQL backends connected to the run's database. */
async function pgBackends(cluster: Cluster): Promise<number[]> {
  const name = new URL(cluster.bdb.location).pathname.slice(1);
  const r = await cluster.bdb.db.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [name]);
  return r.rows.map((x) => Number(x.pid));
}

function cpuOf(pids: number[]): number {
  let us = 0;
  for (const pid of pids) {
    try {
      us += processCpuUs(pid);
    } catch {
      /* gone */
    }
  }
  return us;
}

/**
 * CPU used by the processes, anvil and this run's PostgreSQL backends while `fn` runs. Backends come
 * and go with the pools, so they are sampled every 500 ms: each one counts from when it was first seen
 * (0 if it appeared during the phase) to when it was last seen.
 */
async function measured<T>(cluster: Cluster, procs: Record<string, ServerProcess>, fn: () => Promise<T>) {
  const sampler = sampleProcesses(Object.fromEntries(Object.entries(procs).map(([k, p]) => [k, p.pid])));
  const pg = new Map<number, { first: number; last: number }>();
  const samplePg = async (initial: boolean) => {
    for (const pid of await pgBackends(cluster).catch(() => [] as number[])) {
      const us = cpuOf([pid]);
      const e = pg.get(pid);
      if (e) e.last = Math.max(e.last, us);
      else pg.set(pid, { first: initial ? us : 0, last: us });
    }
  };
  await samplePg(true);
  let sampling = true;
  const pgLoop = (async () => {
    while (sampling) {
      await new Promise((r) => setTimeout(r, 500));
      await samplePg(false);
    }
  })();
  const anvilBefore = processCpuUs(cluster.chain.anvil.pid);
  const benchBefore = process.cpuUsage();
  const t0 = Date.now();
  const value = await fn();
  const wallMs = Date.now() - t0;
  const bench = process.cpuUsage(benchBefore);
  sampling = false;
  await pgLoop;
  await samplePg(false);
  let pgUs = 0;
  for (const e of pg.values()) pgUs += e.last - e.first;
  const procStats = sampler.stop();
  return {
    value,
    wallMs,
    cpu: {
      ...procStats,
      anvilS: round3((processCpuUs(cluster.chain.anvil.pid) - anvilBefore) / 1e6),
      postgresS: round3(pgUs / 1e6),
      postgresBackends: pg.size,
      benchProcessS: round3((bench.user + bench.system) / 1e6),
    },
  };
}

async function runConfig(cluster: Cluster, heads: HeadWatch, config: Config, jobs: Job[], warm: Job[], first: boolean) {
  progress(`${config}: starting processes`);
  const procs: Record<string, ServerProcess & { relayerUrl?: string }> = {};
  const apis: Array<ServerProcess & { relayerUrl: string }> = [];
  if (config === 'single') {
    apis.push((procs.serve = await cluster.serve('single-serve', true)));
  } else {
    apis.push((procs['serve-1'] = await cluster.serve('scaled-serve-1', false)));
    apis.push((procs['serve-2'] = await cluster.serve('scaled-serve-2', false)));
    procs['relayer-1'] = await cluster.relayer('scaled-relayer-1');
    procs['relayer-2'] = await cluster.relayer('scaled-relayer-2');
  }
  const dispatchers = config === 'single' ? 1 : 2;
  for (let i = 0; (await cluster.leaseHolders()) < dispatchers; i++) {
    if (i > 240) throw new Error(`${config}: ${dispatchers} dispatching processes do not all hold a sender lease after 60 s`);
    await new Promise((r) => setTimeout(r, 250));
  }
  if (first) await cluster.sponsorToken(apis[0].relayerUrl);
  const send = (job: Job, t: number) => callRelayer(apis[t].relayerUrl, cluster.accessKey, 'SendMetaTxn', sendBody(job));

  // Warm-up (JIT, caches, connection pools) through every API process and dispatcher: not measured.
  {
    const w = await closedLoop(warm, 8, apis.length, heads, send);
    const ids = w.samples.flatMap((s) => (s.id ? [s.id] : []));
    if (ids.length !== warm.length) throw new Error(`${config} warm-up refused: ${JSON.stringify(intakeSummary(w.samples).refused)}`);
    const done = await waitAllFinal(cluster.bdb.db, cluster.chainId, ids, `${config} warm-up`, 120_000);
    if (done.timedOut) throw new Error(`${config} warm-up did not finish`);
  }
  const leaseOwners = await cluster.bdb.db.query<{ owner: string; n: string }>('SELECT owner, count(*)::text AS n FROM relay_senders WHERE chain_id = $1 AND lease_until > now() GROUP BY owner', [
    cluster.chainId,
  ]);

  await cluster.switchSenders(apis[0].relayerUrl, false);
  await new Promise((r) => setTimeout(r, 1_000)); // every holder's next pass sees it
  const rpc0 = await Promise.all(apis.map((a) => scrapeChainRpcCalls(a.baseUrl, ADMIN_TOKEN)));
  progress(`${config}: intake of ${jobs.length}, ${CONCURRENCY} in flight over ${apis.length} API process(es)`);
  const intake = await measured(cluster, procs, () => closedLoop(jobs, CONCURRENCY, apis.length, heads, send));
  const rpc1 = await Promise.all(apis.map((a) => scrapeChainRpcCalls(a.baseUrl, ADMIN_TOKEN)));
  const summary = intakeSummary(intake.value.samples);
  progress(`${config}: ${summary.accepted}/${jobs.length} accepted, ${summary.acceptedPerSec}/s`);
  const ids = intake.value.samples.flatMap((s) => (s.id ? [s.id] : []));
  const backlog = await cluster.bdb.db.query<{ status: string; n: string }>('SELECT status, count(*)::text AS n FROM meta_txns WHERE chain_id = $1 AND id = ANY($2) GROUP BY status', [
    cluster.chainId,
    ids,
  ]);

  progress(`${config}: dispatch of the backlog`);
  const dispatchStart = Date.now();
  const dispatch = await measured(cluster, procs, async () => {
    await cluster.switchSenders(apis[0].relayerUrl, true);
    return waitAllFinal(cluster.bdb.db, cluster.chainId, ids, `${config} dispatch`, SETTLE_MS);
  });
  const rows = await metaRows(cluster.bdb.db, cluster.chainId, ids);
  const rate = dispatchRate(rows.values());
  const lastMined = Math.max(...[...rows.values()].map((r) => r.mined_at ?? 0));
  const senders = new Set([...rows.values()].map((r) => r.sender));
  const intakeRpc = diffCounts(sumCounts(rpc1), sumCounts(rpc0));
  for (const p of Object.values(procs)) await p.stop();
  const logs = Object.keys(procs).map((name) => {
    try {
      const text = readFileSync(`${cluster.dir}/${config === 'single' ? 'single-serve' : `scaled-${name}`}.log`, 'utf8');
      return { name, errorLines: text.split('\n').filter((l) => /"level":(50|60)/.test(l)).length };
    } catch {
      return { name, errorLines: null };
    }
  });
  const cpuPer = (s: number) => round3((s * 1000) / Math.max(1, ids.length));
  const roleCpu = (phase: typeof intake.cpu, names: string[]) => names.reduce((a, n) => a + ((phase.perProcess[n] as { cpuS?: number } | undefined)?.cpuS ?? 0), 0);
  const apiNames = config === 'single' ? ['serve'] : ['serve-1', 'serve-2'];
  const dispNames = config === 'single' ? ['serve'] : ['relayer-1', 'relayer-2'];
  return {
    config,
    processes: Object.fromEntries(Object.entries(procs).map(([k, p]) => [k, p.pid])),
    leasesAfterWarmUp: leaseOwners.rows.map((r) => Number(r.n)),
    intake: {
      ...summary,
      backlogStatuses: Object.fromEntries(backlog.rows.map((r) => [r.status, Number(r.n)])),
      nodeCalls: { note: 'API processes (metrics scraped from /metrics)', ...perItem(intakeRpc, summary.accepted) },
      cpu: intake.cpu,
      cpuMsPerMetaTxn: {
        metarelayApi: cpuPer(roleCpu(intake.cpu, apiNames)),
        postgres: cpuPer(intake.cpu.postgresS),
        anvil: cpuPer(intake.cpu.anvilS),
        loadGenerator: cpuPer(intake.cpu.benchProcessS),
      },
    },
    dispatch: {
      ...rate,
      statuses: dispatch.value.statuses,
      timedOut: dispatch.value.timedOut,
      // StartSender to the last receipt recorded.
      drainMs: lastMined - dispatchStart,
      drainedPerSec: round3((ids.length / Math.max(1, lastMined - dispatchStart)) * 1000),
      sendersUsed: senders.size,
      cpu: dispatch.cpu,
      cpuMsPerMetaTxn: {
        metarelayDispatch: cpuPer(roleCpu(dispatch.cpu, dispNames)),
        postgres: cpuPer(dispatch.cpu.postgresS),
        anvil: cpuPer(dispatch.cpu.anvilS),
      },
    },
    logs,
  };
}

runBench(async (cleanup) => {
  const loadavgAtStart = machineInfo().loadavg1m;
  const cluster = await startCluster(cleanup, { senders: SENDERS });
  progress(`anvil ${cluster.rpcUrl}, database ${cluster.bdb.location}`);
  const users = newUsers(WALLETS);
  await readyWallets(cluster.rpcUrl, cluster.chainId, cluster.token, users);
  const perWallet = Math.ceil(PER_CONFIG / WALLETS);
  // Space 0: warm-ups (two per wallet would share it, so the scaled warm-up takes space 1); the configs' streams after.
  const configs: Config[] = ['single', 'scaled'];
  const jobs: Record<Config, Job[]> = { single: [], scaled: [] };
  const warm: Record<Config, Job[]> = { single: [], scaled: [] };
  for (const [c, config] of configs.entries()) {
    warm[config] = await signJobs(
      cluster.chainId,
      cluster.token,
      users.slice(0, WARMUP).map((user) => ({ user, space: BigInt(c), n: 0n })),
    );
    const base = 2 + c * perWallet;
    jobs[config] = await signJobs(
      cluster.chainId,
      cluster.token,
      Array.from({ length: PER_CONFIG }, (_, k) => ({ user: users[k % WALLETS], space: BigInt(base + Math.floor(k / WALLETS)), n: 0n })),
    );
  }
  progress(`${configs.length} × ${PER_CONFIG} bundles signed`);
  await rpcCall(cluster.rpcUrl, 'evm_setAutomine', [false]);
  await rpcCall(cluster.rpcUrl, 'evm_setIntervalMining', [1]);
  const heads = new HeadWatch(cluster.rpcUrl);
  await heads.ready();
  cleanup.add('head watch', () => heads.stop());

  const results: Record<Config, Awaited<ReturnType<typeof runConfig>>> = {} as never;
  for (const [i, config] of configs.entries()) results[config] = await runConfig(cluster, heads, config, jobs[config], warm[config], i === 0);
  const s = results.single;
  const x = results.scaled;
  return {
    bench: 'relayer-scaleout',
    issue: 19,
    db: 'postgres',
    command: benchCommand(),
    perConfig: PER_CONFIG,
    concurrency: CONCURRENCY,
    wallets: WALLETS,
    senders: SENDERS,
    blockTimeS: 1,
    machine: { ...machineInfo(), loadavgAtStart },
    summary: {
      intakePerSec: { single: s.intake.acceptedPerSec, scaled: x.intake.acceptedPerSec, ratio: round3(x.intake.acceptedPerSec / s.intake.acceptedPerSec) },
      dispatchBroadcastsPerSec: { single: s.dispatch.broadcastsPerSec, scaled: x.dispatch.broadcastsPerSec, ratio: round3((x.dispatch.broadcastsPerSec ?? 0) / (s.dispatch.broadcastsPerSec ?? 1)) },
      drainedPerSec: { single: s.dispatch.drainedPerSec, scaled: x.dispatch.drainedPerSec, ratio: round3(x.dispatch.drainedPerSec / s.dispatch.drainedPerSec) },
      intakeCpuMsPerMetaTxn: { single: s.intake.cpuMsPerMetaTxn, scaled: x.intake.cpuMsPerMetaTxn },
      dispatchCpuMsPerMetaTxn: { single: s.dispatch.cpuMsPerMetaTxn, scaled: x.dispatch.cpuMsPerMetaTxn },
      intakeCpuCores: { single: s.intake.cpu.perProcess, scaled: x.intake.cpu.perProcess },
      dispatchCpuCores: { single: s.dispatch.cpu.perProcess, scaled: x.dispatch.cpu.perProcess },
      succeeded: { single: s.dispatch.statuses.SUCCEEDED ?? 0, scaled: x.dispatch.statuses.SUCCEEDED ?? 0 },
    },
    results,
  };
});

/** Per-method counts added up over processes. */
function sumCounts(list: Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of list) for (const [k, v] of Object.entries(c)) out[k] = (out[k] ?? 0) + v;
  return out;
}
