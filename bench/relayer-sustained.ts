// Issue #19: blocks from SendMetaTxn to inclusion at a sustained rate — 100 meta-transactions/s for
// 60 s, open loop (request i goes out at start + i / rate whatever the earlier answers), over HTTP, on
// an anvil that mines a block every second, with the dispatcher in the serving process (as
// `metarelay serve` runs it).
//
//   METARELAY_TEST_DB=postgres npx tsx bench/relayer-sustained.ts      # 127.0.0.1:5432 (METARELAY_TEST_PG_URL)
//   METARELAY_TEST_DB=pglite   npx tsx bench/relayer-sustained.ts
//   BENCH_SECONDS=10 METARELAY_TEST_DB=postgres npx tsx bench/relayer-sustained.ts   # short check
//
// Options: BENCH_RATE (100 meta-transactions/s), BENCH_SECONDS (60), BENCH_WALLETS (500), BENCH_SENDERS
// (4: anvil accounts 1..n), BENCH_MAX_IN_FLIGHT (1000: a guard only; `lateMs` says if it ever bound),
// BENCH_SETTLE_S (300), BENCH_BATCH_SIZE (the relayer's batchSize; unset: its default).
//
// The relayer is the test environment's (test/support/relayer-env.ts: Sequence v2 contracts, a fee
// token, a sponsorship rule for it), in this process, listening on a port; the load goes over real
// HTTP (fetch, keep-alive) from the same process. Before timing, while anvil still automines, every
// wallet is deployed through the factory and holds the token, and every bundle is signed: one
// sponsored ERC20 transfer each, of wallet k mod W in its own nonce space (nonce 0), so they are
// independent and arrive round-robin over the wallets. Anvil then mines every second.
//
// Reported: achieved rate (accepted per second, first request out to last answer in; and how late
// requests went out against the schedule), blocks to inclusion = receipt block − head when the request
// went out (1 = the next block) p50/p95/max with a histogram, split into blocks queued and blocks from
// broadcast; the relayer's backlog (QUEUED, SENT rows) every second; node calls per meta-transaction by
// method (metarelay_chain_rpc_calls_total, intake and dispatcher together); CPU of this process per
// meta-transaction. Anchor, same run and path: closed-loop Ping (16 in flight) and the block interval.
//
// Result JSON on stdout; progress on stderr.
import { rpcCall } from '../src/devchain/index.ts';
import { TEST_DB } from '../test/support/env.ts';
import { sponsor, startRelayerEnv } from '../test/support/relayer-env.ts';
import { startTokenChain } from '../test/support/token-chain.ts';
import { chainRpcCallsByMethod, envNumber, machineInfo, progress, runBench } from './lib/harness.ts';
import { HeadWatch, provideTestDbContext, round3, withLoopDelay } from './lib/relayer-bench.ts';
import {
  anvilKey,
  benchCommand,
  callRelayer,
  closedLoop,
  diffCounts,
  dispatchRate,
  inclusion,
  intakeSummary,
  metaRows,
  newUsers,
  openLoop,
  perItem,
  readyWallets,
  sampleQueue,
  signJobs,
  sendBody,
  waitAllFinal,
  distOf,
  type Job,
} from './lib/relayer-load.ts';

const RATE = envNumber('BENCH_RATE', 100);
const SECONDS = envNumber('BENCH_SECONDS', 60);
const WALLETS = envNumber('BENCH_WALLETS', 500);
const SENDERS = envNumber('BENCH_SENDERS', 4);
const MAX_IN_FLIGHT = envNumber('BENCH_MAX_IN_FLIGHT', 1_000);
const SETTLE_MS = envNumber('BENCH_SETTLE_S', 300) * 1000;
const WARMUP = 40;
const BATCH_SIZE = process.env.BENCH_BATCH_SIZE ? envNumber('BENCH_BATCH_SIZE', 1) : undefined;

runBench(async (cleanup) => {
  const loadavgAtStart = machineInfo().loadavg1m;
  await provideTestDbContext(cleanup);
  const chain = await startTokenChain();
  cleanup.add('anvil', () => chain.stop());
  const env = await startRelayerEnv({
    chain,
    // One client address and one key send everything: their queue shares must not cap the run.
    relayer: { senderKeys: Array.from({ length: SENDERS }, (_, i) => anvilKey(i + 1)), maxQueuedPerAddress: 1_000_000, maxQueuedPerKey: 1_000_000, ...(BATCH_SIZE ? { batchSize: BATCH_SIZE } : {}) },
  });
  cleanup.add('relayer env', async () => {
    const closing = env.close();
    env.app.server.closeAllConnections();
    await closing;
  });
  progress(`relayer ${env.relayerUrl}, anvil ${env.rpcUrl}, database ${TEST_DB}, ${SENDERS} senders, batchSize ${BATCH_SIZE ?? 'default'}`);
  await sponsor(env, 'CONTRACT', env.token);

  const total = Math.round(RATE * SECONDS);
  const users = newUsers(WALLETS);
  await readyWallets(env.rpcUrl, env.chainId, env.token, users);
  // Space 0 for the warm-up, 1.. for the measured stream; job k belongs to wallet k mod W.
  const warm = await signJobs(
    env.chainId,
    env.token,
    users.slice(0, WARMUP).map((user) => ({ user, space: 0n, n: 0n })),
  );
  const slots = Array.from({ length: total }, (_, k) => ({ user: users[k % WALLETS], space: BigInt(1 + Math.floor(k / WALLETS)), n: 0n }));
  const signStart = Date.now();
  const jobs = await signJobs(env.chainId, env.token, slots);
  progress(`${jobs.length} bundles signed in ${Date.now() - signStart} ms`);

  await rpcCall(env.rpcUrl, 'evm_setAutomine', [false]);
  await rpcCall(env.rpcUrl, 'evm_setIntervalMining', [1]);
  const heads = new HeadWatch(env.rpcUrl);
  await heads.ready();
  cleanup.add('head watch', () => heads.stop());
  await heads.waitFor(heads.head + 2, 10_000);
  progress(`anvil mines every second (head ${heads.head})`);

  const send = (job: Job) => callRelayer(env.relayerUrl, env.accessKey, 'SendMetaTxn', sendBody(job));
  {
    const w = await closedLoop(warm, 16, 1, heads, send);
    const ids = w.samples.flatMap((s) => (s.id ? [s.id] : []));
    if (ids.length !== warm.length) throw new Error(`warm-up: ${JSON.stringify(intakeSummary(w.samples).refused)}`);
    await waitAllFinal(env.services.db, env.chainId, ids, 'warm-up', 120_000);
    progress('warm-up done');
  }
  const pingJobs = jobs.slice(0, 500);
  const ping = await closedLoop(pingJobs, 16, 1, heads, () => callRelayer(env.relayerUrl, env.accessKey, 'Ping', {}));
  const pingRps = round3((pingJobs.length / (ping.end - ping.start)) * 1000);
  progress(`ping: ${pingRps} req/s (16 in flight)`);

  const rpcBefore = await chainRpcCallsByMethod(env.services);
  const cpuBefore = process.cpuUsage();
  const queue = sampleQueue(env.services.db, env.chainId);
  const runStart = Date.now();
  progress(`sending ${total} at ${RATE}/s for ${SECONDS} s`);
  const { value: ran, eventLoopDelayMs } = await withLoopDelay(() => openLoop(jobs, RATE, 1, MAX_IN_FLIGHT, heads, send));
  const intake = intakeSummary(ran.samples);
  progress(`sent: ${intake.accepted}/${total} accepted, ${intake.acceptedPerSec}/s`);
  const ids = ran.samples.flatMap((s) => (s.id ? [s.id] : []));
  const settled = await waitAllFinal(env.services.db, env.chainId, ids, 'settle', SETTLE_MS);
  const runEnd = Date.now();
  const cpu = process.cpuUsage(cpuBefore);
  const backlog = await queue.stop();
  const rpc = diffCounts(await chainRpcCallsByMethod(env.services), rpcBefore);
  await heads.refresh();
  const rows = await metaRows(env.services.db, env.chainId, ids);
  const inc = inclusion(ran.samples, rows, heads);
  const issuedLate = ran.samples.map((s) => s.startedAt - s.dueAt);
  const cpuMs = (cpu.user + cpu.system) / 1000;

  return {
    bench: 'relayer-sustained',
    issue: 19,
    db: TEST_DB,
    command: benchCommand(),
    rate: RATE,
    seconds: SECONDS,
    metaTxns: total,
    wallets: WALLETS,
    senders: SENDERS,
    batchSize: BATCH_SIZE ?? null,
    blockTimeS: 1,
    machine: { ...machineInfo(), loadavgAtStart },
    summary: {
      offeredPerSec: RATE,
      achievedAcceptedPerSec: intake.acceptedPerSec,
      accepted: `${intake.accepted}/${total}`,
      issuedLateMs: distOf(issuedLate),
      sendLatencyMs: intake.latencyMs,
      blocksToInclusion: { p50: inc.blocksToInclusion.p50, p95: inc.blocksToInclusion.p95, max: inc.blocksToInclusion.max },
      blocksQueued: { p50: inc.blocksQueued.p50, p95: inc.blocksQueued.p95, max: inc.blocksQueued.max },
      blocksFromBroadcast: { p50: inc.blocksFromBroadcast.p50, p95: inc.blocksFromBroadcast.p95, max: inc.blocksFromBroadcast.max },
      statuses: inc.statuses,
      maxQueued: backlog.maxQueued,
      maxSent: backlog.maxSent,
      nodeCallsPerMetaTxn: perItem(rpc, intake.accepted).perMetaTxn,
      nodeCallsPerMetaTxnByMethod: perItem(rpc, intake.accepted).perMetaTxnByMethod,
      // Everything in this process (HTTP client and server, intake, dispatcher, head watch).
      cpuMsPerMetaTxn: round3(cpuMs / Math.max(1, intake.accepted)),
      processCpuCores: round3(cpuMs / (runEnd - runStart)),
      pingRps,
      blockIntervalMs: heads.intervalMs(runStart, runEnd),
    },
    intake: { ...intake, maxInFlightSeen: ran.maxInFlightSeen, eventLoopDelayMs },
    inclusion: inc,
    dispatch: dispatchRate(rows.values()),
    settle: settled,
    chainRpc: { counts: rpc, ...perItem(rpc, intake.accepted) },
    queueDepth: backlog,
  };
});
