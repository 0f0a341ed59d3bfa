// Issue #53: does a fleet of `serve` processes on one PostgreSQL database relay faster than one? Real
// processes of the one binary (each `serve` with its in-process dispatcher, as the README's fleet runs),
// 1 and 3 of them ALTERNATING (1, 3, 1, 3, …: a machine shared with others drifts, and alternation
// spreads the drift over both), in three modes:
//
//   oneRule    sponsored, every bundle covered by one CONTRACT rule (the token's): one rule's spend
//   manyRules  sponsored, each wallet covered by a WALLET rule of its own (another project)
//   gasless    the chain takes no fee and no rule covers anything (a third project): the control, what
//              part of the loss is each process's own work rather than the sponsorship's
//
//   npx tsx bench/relayer-fleet.ts                                     # PostgreSQL at 127.0.0.1:5432 (BENCH_PG_URL)
//   BENCH_ROUNDS=1 BENCH_PER_ROUND=300 BENCH_MODES=oneRule npx tsx bench/relayer-fleet.ts   # short check
//
// Options: BENCH_PER_ROUND (600 SendMetaTxn per round), BENCH_WARM (400 per process before them, not measured), BENCH_ROUNDS (2 pairs of 1 and 3 per mode),
// BENCH_DISPATCHERS (leader: one process dispatches, the default; every: each with a share of the senders),
// BENCH_CONCURRENCY (32 in flight, round-robin over the processes: no load balancer), BENCH_WALLETS
// (300; manyRules uses the first BENCH_RULES = 64, each with a WALLET rule), BENCH_MODES (oneRule,manyRules,gasless).
//
// A round: its processes start, warm up (BENCH_WARM SendMetaTxn through each, not measured), then
// BENCH_PER_ROUND SendMetaTxn closed-loop with the senders running (settling, which writes the same
// spend counters, runs meanwhile); then the round's backlog drains and its processes stop. Measured:
//   - accepted SendMetaTxn per second;
//   - pg_stat_activity every 50 ms: of this database's active backends (the sampler excluded), the share
//     waiting on a heavyweight lock (wait_event_type Lock: a row, a transaction id, an advisory lock) and
//     on a light one (LWLock), and which statements wait most (a hot row shows as one statement);
//   - CPU (utime + stime from /proc/<pid>/stat) per accepted meta-transaction of each metarelay process,
//     of all of them, and of the database's backends: with c cores free, a role using x CPU-ms per
//     meta-transaction reaches at most c × 1000 / x per second.
//   - what the work cost in round trips, counted rather than timed (so a loaded machine does not move it):
//     node calls (metarelay_chain_rpc_calls_total of each process, by method) and database transactions
//     (pg_stat_database's commits and rollbacks of the run's database, the sampler's own taken off) per
//     accepted meta-transaction, from the end of the warm-up to the end of the drain (the drain is the
//     round's dispatch and settling). What grows with the processes while the meta-transactions do not is
//     work split into smaller shares (intake groups, dispatcher passes) or done once per process.
// Per mode: the median of each figure over its rounds, and the ratio 3-process/1-process of throughput.
// The load average is read at every round's start. Result JSON on stdout; progress on stderr.
import { rpcCall } from '../src/devchain/index.ts';
import { accessKeyRepo } from '../src/store/access-keys.ts';
import { projectRepo } from '../src/store/projects.ts';
import { envNumber, machineInfo, progress, runBench } from './lib/harness.ts';
import { processCpuUs, type ServerProcess } from './lib/processes.ts';
import { ADMIN_TOKEN, startCluster, type Cluster } from './lib/relayer-cluster.ts';
import { HeadWatch, round3 } from './lib/relayer-bench.ts';
import {
  benchCommand,
  callRelayer,
  closedLoop,
  diffCounts,
  intakeSummary,
  newUsers,
  readyWallets,
  scrapeChainRpcCalls,
  sendBody,
  signJobs,
  waitAllFinal,
  type Job,
  type User,
} from './lib/relayer-load.ts';

const PER_ROUND = envNumber('BENCH_PER_ROUND', 600);
const ROUNDS = envNumber('BENCH_ROUNDS', 2);
const CONCURRENCY = envNumber('BENCH_CONCURRENCY', 32);
const WALLETS = envNumber('BENCH_WALLETS', 300);
const RULES = envNumber('BENCH_RULES', 64);
/**
 * SendMetaTxn per process before the measured ones (BENCH_WARM), as the Ping anchor is warmed with 1 000:
 * V8 optimises a process's hot paths only after many calls, and with 20 each (the default until 7 Dec)
 * a process of three served its measured share of 200 still half cold: 3/1 0.65 (one rule) and 0.67
 * (gasless) with 20, 0.82 and 0.84 with 400 in the next run on the same quiet machine; a fleet that
 * relays for hours runs warm.
 */
const WARM = envNumber('BENCH_WARM', 400);
/** relayer.dispatchers of the processes (BENCH_DISPATCHERS: leader, the default, or every). */
const DISPATCHERS = process.env.BENCH_DISPATCHERS === 'every' ? 'every' : 'leader';
const MODES = (process.env.BENCH_MODES ?? 'oneRule,manyRules,gasless').split(',') as Mode[];
type Mode = 'oneRule' | 'manyRules' | 'gasless';

async function admin(relayerUrl: string, method: string, body: unknown) {
  const res = await fetch(`${relayerUrl}/rpc/Relayer/${method}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method}: HTTP ${res.status} ${await res.text()}`);
}

/**
 * pg_stat_activity of the run's database every `everyMs` while sampling: active backends, those
 * waiting on a lock (heavyweight, and LWLock), and the waiting statements by how often they were seen.
 */
function sampleWaits(cluster: Cluster, everyMs = 50) {
  const name = new URL(cluster.bdb.location).pathname.slice(1);
  let active = 0;
  let lock = 0;
  let lwlock = 0;
  let samples = 0;
  const waits = new Map<string, number>();
  let on = true;
  const loop = (async () => {
    while (on) {
      const r = await cluster.bdb.db
        .query<{ state: string | null; wait_event_type: string | null; wait_event: string | null; q: string }>(
          `SELECT state, wait_event_type, wait_event, left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS q FROM pg_stat_activity
            WHERE datname = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
          [name],
        )
        .catch(() => ({ rows: [] }));
      samples++;
      for (const b of r.rows) {
        if (b.state !== 'active') continue;
        active++;
        if (b.wait_event_type === 'Lock') lock++;
        if (b.wait_event_type === 'LWLock') lwlock++;
        if (b.wait_event_type === 'Lock' || b.wait_event_type === 'LWLock') {
          const k = `${b.wait_event_type}/${b.wait_event}: ${b.q}`;
          waits.set(k, (waits.get(k) ?? 0) + 1);
        }
      }
      await new Promise((res) => setTimeout(res, everyMs));
    }
  })();
  return async () => {
    on = false;
    await loop;
    return {
      samples,
      meanActive: round3(active / Math.max(1, samples)),
      lockWaitShare: round3(lock / Math.max(1, active)),
      lwlockWaitShare: round3(lwlock / Math.max(1, active)),
      topWaits: [...waits.entries()]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 5)
        .map(([k, n]) => ({ share: round3(n / Math.max(1, active)), wait: k })),
    };
  };
}

/** Commits and rollbacks of the run's database so far (pg_stat_database; each backend reports them within about a second). */
async function dbTransactions(cluster: Cluster): Promise<number> {
  const name = new URL(cluster.bdb.location).pathname.slice(1);
  const r = await cluster.bdb.db.query<{ n: string }>('SELECT (xact_commit + xact_rollback)::text AS n FROM pg_stat_database WHERE datname = $1', [name]);
  return Number(r.rows[0]?.n ?? 0);
}
/** pg_stat_database is reported by each backend at most once a second, and when it goes idle. */
const STATS_SETTLE_MS = 1_500;

/** CPU-µs of the database's client backends now (pids come and go with the pools: see relayer-scaleout.ts). */
async function backendPids(cluster: Cluster): Promise<number[]> {
  const name = new URL(cluster.bdb.location).pathname.slice(1);
  const r = await cluster.bdb.db.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [name]);
  return r.rows.map((x) => Number(x.pid));
}
const cpuOr0 = (pid: number) => {
  try {
    return processCpuUs(pid);
  } catch {
    return 0;
  }
};

interface Plan {
  mode: Mode;
  procs: 1 | 3;
  jobs: Job[];
  warm: Job[];
  accessKey: string;
}

async function runRound(cluster: Cluster, heads: HeadWatch, plan: Plan, round: number) {
  const label = `${plan.mode} ×${plan.procs} (round ${round})`;
  const loadavg = machineInfo().loadavg1m;
  const procs: Array<ServerProcess & { relayerUrl: string }> = [];
  for (let i = 0; i < plan.procs; i++) procs.push(await cluster.serve(`${plan.mode}-${plan.procs}-${round}-${i}`, true, plan.mode === 'gasless'));
  // relayer.dispatchers `leader` (the default): one process of the fleet dispatches the chain; `every`: each.
  const holders = DISPATCHERS === 'every' ? plan.procs : 1;
  for (let i = 0; (await cluster.leaseHolders()) < holders; i++) {
    if (i > 240) throw new Error(`${label}: not ${holders} processes holding a sender lease after 60 s`);
    await new Promise((r) => setTimeout(r, 250));
  }
  const send = (job: Job, t: number) => callRelayer(procs[t].relayerUrl, plan.accessKey, 'SendMetaTxn', sendBody(job));
  {
    const w = await closedLoop(plan.warm, 8, procs.length, heads, send);
    const ids = w.samples.flatMap((s) => (s.id ? [s.id] : []));
    if (ids.length !== plan.warm.length) throw new Error(`${label} warm-up refused: ${JSON.stringify(intakeSummary(w.samples).refused)}`);
    await waitAllFinal(cluster.bdb.db, cluster.chainId, ids, `${label} warm-up`, 120_000);
  }
  progress(`${label}: ${plan.jobs.length} SendMetaTxn, ${CONCURRENCY} in flight, load ${loadavg}`);
  await new Promise((r) => setTimeout(r, STATS_SETTLE_MS));
  const calls0 = await Promise.all(procs.map((p) => scrapeChainRpcCalls(p.baseUrl, ADMIN_TOKEN)));
  const tx0 = await dbTransactions(cluster);
  const cpu0 = procs.map((p) => p.cpuUs());
  const pg0 = new Map((await backendPids(cluster)).map((pid) => [pid, cpuOr0(pid)]));
  const stopWaits = sampleWaits(cluster);
  const loop = await closedLoop(plan.jobs, CONCURRENCY, procs.length, heads, send);
  const waits = await stopWaits();
  const pgUs = (await backendPids(cluster)).reduce((a, pid) => a + cpuOr0(pid) - (pg0.get(pid) ?? 0), 0);
  const cpuUs = procs.map((p, i) => p.cpuUs() - cpu0[i]);
  const summary = intakeSummary(loop.samples);
  const ids = loop.samples.flatMap((s) => (s.id ? [s.id] : []));
  progress(`${label}: ${summary.accepted} accepted, ${summary.acceptedPerSec}/s, lock waits ${waits.lockWaitShare} of active backends`);
  const done = await waitAllFinal(cluster.bdb.db, cluster.chainId, ids, `${label} drain`, 300_000);
  const calls = (await Promise.all(procs.map((p) => scrapeChainRpcCalls(p.baseUrl, ADMIN_TOKEN)))).map((c, i) => diffCounts(c, calls0[i]));
  await new Promise((r) => setTimeout(r, STATS_SETTLE_MS));
  // This process's own statements in between (the sampler's, the CPU reads', waitAllFinal's polls) are
  // not the fleet's: waitAllFinal's are few next to a round's, the sampler's are counted and taken off.
  const txns = (await dbTransactions(cluster)) - tx0 - waits.samples - 3;
  for (const p of procs) await p.stop();
  const n = Math.max(1, summary.accepted);
  const sum = (c: Record<string, number>) => Object.values(c).reduce((a, b) => a + b, 0);
  const byMethod = new Map<string, number>();
  for (const c of calls) for (const [k, v] of Object.entries(c)) byMethod.set(k, (byMethod.get(k) ?? 0) + v);
  return {
    mode: plan.mode,
    procs: plan.procs,
    round,
    loadavg1mAtStart: loadavg,
    acceptedPerSec: summary.acceptedPerSec,
    accepted: summary.accepted,
    refused: summary.refused,
    latencyMs: summary.latencyMs,
    waits,
    cpuMsPerMetaTxn: {
      perProcess: cpuUs.map((us) => round3(us / 1000 / n)),
      metarelay: round3(cpuUs.reduce((a, b) => a + b, 0) / 1000 / n),
      postgres: round3(pgUs / 1000 / n),
    },
    cpuCoresPerProcess: cpuUs.map((us) => round3(us / 1000 / summary.wallMs)),
    perMetaTxn: {
      nodeCalls: round3(calls.reduce((a, c) => a + sum(c), 0) / n),
      nodeCallsPerProcess: calls.map((c) => round3(sum(c) / n)),
      nodeCallsByMethod: Object.fromEntries([...byMethod].sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, round3(v / n)])),
      dbTransactions: round3(txns / n),
    },
    drained: { statuses: done.statuses, timedOut: done.timedOut },
  };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

runBench(async (cleanup) => {
  const loadavgAtStart = machineInfo().loadavg1m;
  const cluster = await startCluster(cleanup, { senders: 8 });
  progress(`anvil ${cluster.rpcUrl}, database ${cluster.bdb.location}`);
  const users = newUsers(WALLETS);
  await readyWallets(cluster.rpcUrl, cluster.chainId, cluster.token, users);
  // The sponsors are set up through one process's admin RPC, started for that alone.
  const setup = await cluster.serve('setup', false);
  const keys: Record<Mode, string> = { oneRule: cluster.accessKey, manyRules: '', gasless: '' };
  for (const mode of ['manyRules', 'gasless'] as const) {
    const project = await projectRepo(cluster.bdb.db).create(`bench ${mode}`);
    keys[mode] = (await accessKeyRepo(cluster.bdb.db).create(project.id, 'bench')).key;
    if (mode === 'manyRules') {
      for (const u of users.slice(0, RULES)) await admin(setup.relayerUrl, 'AddGasSponsor', { projectId: project.id, address: u.wallet.address, kind: 'WALLET', name: 'bench wallet' });
    }
  }
  await cluster.sponsorToken(setup.relayerUrl);
  await setup.stop();

  // Every bundle its own nonce space of its wallet (nonce 0): no two in flight share a nonce.
  const nextSpace = new Map<User, bigint>();
  const slots = (from: User[], n: number) =>
    Array.from({ length: n }, (_, k) => {
      const user = from[k % from.length];
      const space = nextSpace.get(user) ?? 1n;
      nextSpace.set(user, space + 1n);
      return { user, space, n: 0n };
    });
  const plans: Plan[] = [];
  for (const mode of MODES) {
    const from = mode === 'manyRules' ? users.slice(0, RULES) : users;
    for (let r = 0; r < ROUNDS; r++) {
      for (const procs of [1, 3] as const) {
        plans.push({
          mode,
          procs,
          warm: await signJobs(cluster.chainId, cluster.token, slots(from, WARM * procs)),
          jobs: await signJobs(cluster.chainId, cluster.token, slots(from, PER_ROUND)),
          accessKey: keys[mode],
        });
      }
    }
  }
  progress(`${plans.length} rounds signed`);
  await rpcCall(cluster.rpcUrl, 'evm_setAutomine', [false]);
  await rpcCall(cluster.rpcUrl, 'evm_setIntervalMining', [1]);
  const heads = new HeadWatch(cluster.rpcUrl);
  await heads.ready();
  cleanup.add('head watch', () => heads.stop());

  const rounds: Awaited<ReturnType<typeof runRound>>[] = [];
  for (const [i, plan] of plans.entries()) rounds.push(await runRound(cluster, heads, plan, Math.floor(i / 2) % ROUNDS));

  const summary = Object.fromEntries(
    MODES.map((mode) => {
      const of = (procs: number) => rounds.filter((r) => r.mode === mode && r.procs === procs);
      const fig = (procs: number) => ({
        acceptedPerSec: median(of(procs).map((r) => r.acceptedPerSec)),
        lockWaitShare: median(of(procs).map((r) => r.waits.lockWaitShare)),
        lwlockWaitShare: median(of(procs).map((r) => r.waits.lwlockWaitShare)),
        metarelayCpuMsPerMetaTxn: median(of(procs).map((r) => r.cpuMsPerMetaTxn.metarelay)),
        postgresCpuMsPerMetaTxn: median(of(procs).map((r) => r.cpuMsPerMetaTxn.postgres)),
        nodeCallsPerMetaTxn: median(of(procs).map((r) => r.perMetaTxn.nodeCalls)),
        dbTransactionsPerMetaTxn: median(of(procs).map((r) => r.perMetaTxn.dbTransactions)),
        loadavg1m: median(of(procs).map((r) => r.loadavg1mAtStart)),
      });
      const [one, three] = [fig(1), fig(3)];
      return [mode, { one, three, ratio3to1: round3(three.acceptedPerSec / one.acceptedPerSec), perRound: of(1).map((r, i) => [r.acceptedPerSec, of(3)[i]?.acceptedPerSec]) }];
    }),
  );
  return {
    bench: 'relayer-fleet',
    issue: 53,
    db: 'postgres',
    command: benchCommand(),
    perRound: PER_ROUND,
    rounds: ROUNDS,
    concurrency: CONCURRENCY,
    wallets: WALLETS,
    rules: RULES,
    machine: { ...machineInfo(), loadavgAtStart },
    summary,
    results: rounds,
  };
});
