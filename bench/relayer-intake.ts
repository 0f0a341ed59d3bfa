// Issue #8: SendMetaTxn intake rate (requests/s accepted, i.e. decoded, simulated against the chain and
// persisted as QUEUED) and the time from SendMetaTxn to SUCCEEDED in blocks, for 200 bundles from 50
// wallets on an anvil that mines a block every second, with the dispatcher running in the same
// process (as `metarelay serve` runs it).
//
//   METARELAY_TEST_DB=pglite   npx tsx bench/relayer-intake.ts
//   METARELAY_TEST_DB=postgres npx tsx bench/relayer-intake.ts      # 127.0.0.1:5432 (METARELAY_TEST_PG_URL)
//
// Options: BENCH_WALLETS (50), BENCH_CONCURRENCY (16 requests in flight), BENCH_LAYOUT (spaces |
// sequential, see below), BENCH_SETTLE_S (180: how long to wait for final statuses), BENCH_TRANSPORTS
// (http,inject), BENCH_TANK (1: the project has a limited balance, each intake holds on it), BENCH_PING_ROUNDS
// (5 rounds of the Ping baseline, the median reported). Each round reports its node calls per relayed meta-transaction, by method
// (chainRpcDuringRound.perMetaTxnByMethod, from metarelay_chain_rpc_calls_total): issue #19's figure is
// BENCH_WALLETS=250 BENCH_TRANSPORTS=http (1 000 bundles).
//
// The relayer is the test environment's (test/support/relayer-env.ts: Sequence v2 contracts, a fee
// token, a sponsorship rule for it, two senders); anvil is switched from automine to interval mining
// (1 s) once everything is deployed and minted. Each round uses 50 fresh, undeployed wallets holding
// the sponsored token; every bundle is one sponsored ERC20 transfer, and all are signed before timing:
//
//   phase A  50 bundles, one per wallet, nonce space 0 / nonce 0, through the guest module (deploy +
//            execute); sent, then waited for until every one is final (a bundle of an undeployed
//            wallet cannot run before the wallet exists).
//   phase B  150 bundles, three per wallet, on the deployed wallets. BENCH_LAYOUT=spaces (default):
//            nonce spaces 1, 2, 3 (nonce 0 each: independent). BENCH_LAYOUT=sequential: space 0,
//            nonces 1, 2, 3 (the relayer must order them; a successor rides its predecessor's sender).
//
// Two rounds with their own wallets: `http` sends over real HTTP (fetch, keep-alive) to the listening
// server, `inject` through fastify's inject (no socket), both with BENCH_CONCURRENCY requests in flight.
// Baseline, same run, same paths and concurrency: as many `Ping` requests of the relayer service
// (access key checked, no simulation, no database write).
//
// Blocks to SUCCEEDED = block of the receipt − chain head when the request was issued (so 1 is the
// best possible: the next block). The head is tracked by polling eth_blockNumber every 20 ms.
//
// Result JSON on stdout; progress on stderr.
import { encodeFunctionData, type Address, type Hex } from 'viem';
import { rpcCall } from '../src/devchain/index.ts';
import { TEST_DB } from '../test/support/env.ts';
import { erc20, sponsor, startRelayerEnv, type RelayerEnv } from '../test/support/relayer-env.ts';
import { newSigner, signedBundle, walletFor, type SequenceTestWallet, type SignedBundle } from '../test/support/sequence-wallet.ts';
import { startTokenChain } from '../test/support/token-chain.ts';
import { HeadWatch, dist, histogram, medianBy, provideTestDbContext, round3, waitFinal, withLoopDelay } from './lib/relayer-bench.ts';
import { chainRpcCallsByMethod, envNumber, machineInfo, progress, runBench } from './lib/harness.ts';
import { planProbe } from './lib/plan-probe.ts';
import { IntakeProfile, cpuProfile, type CpuSummary } from './lib/intake-profile.ts';
import { callRelayer, type Answer } from './lib/relayer-load.ts';
import { cpuPerUnit, cpuSnapshot } from './lib/processes.ts';

const WALLETS = envNumber('BENCH_WALLETS', 50);
const CONCURRENCY = envNumber('BENCH_CONCURRENCY', 16);
// Rounds of the Ping baseline; the median round is the anchor (pingBaseline).
const PING_ROUNDS = Math.max(1, envNumber('BENCH_PING_ROUNDS', 5));
const SETTLE_MS = envNumber('BENCH_SETTLE_S', 180) * 1000;
const LAYOUT = (process.env.BENCH_LAYOUT ?? 'spaces') as 'spaces' | 'sequential';
// BENCH_TANK=1: the project gets a limited balance (AdjustProjectBalance), so each intake takes a hold on it.
const TANK = process.env.BENCH_TANK === '1';
if (LAYOUT !== 'spaces' && LAYOUT !== 'sequential') throw new Error(`BENCH_LAYOUT must be spaces or sequential, got "${LAYOUT}"`);
const MORE_PER_WALLET = 3;
// BENCH_TRANSPORTS=http for the HTTP round alone (BENCH_WALLETS=250: the 1 000-bundle round of issue #19).
const TRANSPORTS = (process.env.BENCH_TRANSPORTS ?? 'http,inject').split(',') as Array<'http' | 'inject'>;
const WARMUP_WALLETS = 8;
// BENCH_PROFILE=1: statements, stage times and a CPU profile of the first round's phase B (bench/lib/intake-profile.ts);
// on PostgreSQL also each statement's planning and running, custom and generic (bench/lib/plan-probe.ts;
// BENCH_PROBE_GROW=20000 probes after 20 000 finished meta-transactions joined the history).
const PROFILE = process.env.BENCH_PROFILE === '1' ? new IntakeProfile() : undefined;
let profiledCpu: CpuSummary | undefined;
const BLOCK_TIME_S = 1;
const MINTED = 1_000_000n;
const RECIPIENT: Address = '0x00000000000000000000000000000000000b0b00';

// ---------------------------------------------------------------------------------------------------
// Sending

type Transport = 'http' | 'inject';

function caller(env: RelayerEnv, transport: Transport) {
  return (method: string, body: unknown): Promise<Answer> =>
    transport === 'inject' ? env.call(method, body, { 'x-access-key': env.accessKey }) : callRelayer(env.relayerUrl, env.accessKey, method, body, 60_000);
}

interface Sample {
  startedAt: number;
  answeredAt: number;
  headAtStart: number;
  headAtAnswer: number;
  ms: number;
  answer?: Answer;
  error?: string;
}

/** Sends every item with `concurrency` requests in flight; one sample per item, in item order. */
async function drive<T>(items: T[], concurrency: number, heads: HeadWatch, send: (item: T) => Promise<Answer>) {
  const samples = new Array<Sample>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      const startedAt = Date.now();
      const headAtStart = heads.head;
      const t0 = performance.now();
      let answer: Answer | undefined;
      let error: string | undefined;
      try {
        answer = await send(items[i]);
      } catch (err) {
        error = (err as Error).message;
      }
      samples[i] = { startedAt, answeredAt: Date.now(), headAtStart, headAtAnswer: heads.head, ms: performance.now() - t0, answer, error };
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  const wallMs = performance.now() - t0;
  const ok = samples.filter((s) => s.answer?.status === 200);
  const failures = samples.filter((s) => s.answer?.status !== 200);
  return {
    samples,
    wallMs,
    summary: {
      requests: items.length,
      ok: ok.length,
      failed: failures.length,
      failures: failures.slice(0, 5).map((s) => s.error ?? `HTTP ${s.answer?.status} ${JSON.stringify(s.answer?.body).slice(0, 300)}`),
      concurrency: Math.min(concurrency, items.length),
      wallMs: Math.round(wallMs),
      // Requests answered 200 per second of wall time, first request out to last answer in.
      rps: round3((ok.length / wallMs) * 1000),
      latencyMs: dist(samples.map((s) => s.ms)),
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// Bundles

interface User {
  key: Hex;
  wallet: SequenceTestWallet;
}

interface Job {
  user: User;
  phase: 'A' | 'B';
  space: bigint;
  n: bigint;
  bundle: SignedBundle;
}

const transferData = encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [RECIPIENT, 1n] });

async function signJobs(env: RelayerEnv, users: User[]): Promise<{ a: Job[]; b: Job[] }> {
  const sign = async (user: User, phase: 'A' | 'B', space: bigint, n: bigint): Promise<Job> => ({
    user,
    phase,
    space,
    n,
    bundle: await signedBundle({
      signerKey: user.key,
      wallet: user.wallet,
      chainId: env.chainId,
      txs: [{ to: env.token, data: transferData }],
      nonce: { space, n },
      deployed: phase === 'B',
    }),
  });
  const a = await Promise.all(users.map((u) => sign(u, 'A', 0n, 0n)));
  // Phase B goes out round-robin over the wallets: every wallet's first extra bundle, then the second...
  const b: Job[] = [];
  for (let j = 1; j <= MORE_PER_WALLET; j++) {
    for (const u of users) b.push(await sign(u, 'B', LAYOUT === 'spaces' ? BigInt(j) : 0n, LAYOUT === 'spaces' ? 0n : BigInt(j)));
  }
  return { a, b };
}

const sendBody = (job: Job) => ({ call: { walletAddress: job.user.wallet.address, contract: job.bundle.entrypoint, input: job.bundle.input } });

interface MetaRow {
  id: string;
  status: string;
  block_number: number | null;
  attempts: number;
  revert_reason: string | null;
  queued_at: Date;
  sent_at: Date | null;
  mined_at: Date | null;
  sender: string | null;
  txn_hash: string | null;
}

async function metaRows(env: RelayerEnv, ids: string[]): Promise<Map<string, MetaRow>> {
  const r = await env.services.db.query<Record<string, unknown>>(
    `SELECT id, status, block_number, attempts, revert_reason, queued_at, sent_at, mined_at, sender, txn_hash FROM meta_txns WHERE chain_id = $1 AND id = ANY($2)`,
    [env.chainId, ids],
  );
  const out = new Map<string, MetaRow>();
  for (const x of r.rows) {
    out.set(String(x.id), {
      id: String(x.id),
      status: String(x.status),
      block_number: x.block_number == null ? null : Number(x.block_number),
      attempts: Number(x.attempts),
      revert_reason: (x.revert_reason as string | null) ?? null,
      queued_at: new Date(x.queued_at as string),
      sent_at: x.sent_at == null ? null : new Date(x.sent_at as string),
      mined_at: x.mined_at == null ? null : new Date(x.mined_at as string),
      sender: (x.sender as string | null) ?? null,
      txn_hash: (x.txn_hash as string | null) ?? null,
    });
  }
  return out;
}

/** Waits until every id has a final status, or the deadline; the rows as they are then. */
function settle(env: RelayerEnv, ids: string[], label: string) {
  return waitFinal(() => metaRows(env, ids), ids, label, SETTLE_MS);
}

interface Outcome {
  job: Job;
  sample: Sample;
  id?: string;
}

/** What happened to each accepted meta-transaction, from the request to its receipt. */
function outcomes(list: Outcome[], rows: Map<string, MetaRow>, heads: HeadWatch) {
  const statuses: Record<string, number> = {};
  const blocksFromSend: number[] = [];
  const blocksFromAccept: number[] = [];
  const blocksFromBroadcast: number[] = [];
  const blocksQueued: number[] = [];
  const msToSucceeded: number[] = [];
  const msQueued: number[] = [];
  const notSucceeded: unknown[] = [];
  const requeued: unknown[] = [];
  const bySender: Record<string, number> = {};
  for (const o of list) {
    const row = o.id ? rows.get(o.id) : undefined;
    const status = row?.status ?? (o.id ? 'MISSING' : 'REFUSED');
    statuses[status] = (statuses[status] ?? 0) + 1;
    if (row && row.attempts > 0) requeued.push({ id: row.id, attempts: row.attempts, status: row.status });
    if (row?.status !== 'SUCCEEDED' || row.block_number == null) {
      notSucceeded.push({
        phase: o.job.phase,
        wallet: o.job.user.wallet.address,
        space: o.job.space.toString(),
        nonce: o.job.n.toString(),
        id: o.id,
        status,
        reason: row?.revert_reason ?? (o.sample.error || (o.sample.answer?.status !== 200 ? JSON.stringify(o.sample.answer?.body).slice(0, 300) : undefined)),
        txnHash: row?.txn_hash,
        attempts: row?.attempts,
        sentAt: row?.sent_at,
      });
      continue;
    }
    if (row.sender) bySender[row.sender] = (bySender[row.sender] ?? 0) + 1;
    blocksFromSend.push(row.block_number - o.sample.headAtStart);
    blocksFromAccept.push(row.block_number - o.sample.headAtAnswer);
    if (row.sent_at) {
      const headAtBroadcast = heads.at(row.sent_at.getTime());
      blocksFromBroadcast.push(row.block_number - headAtBroadcast);
      blocksQueued.push(headAtBroadcast - o.sample.headAtAnswer);
      msQueued.push(row.sent_at.getTime() - row.queued_at.getTime());
    }
    if (row.mined_at) msToSucceeded.push(row.mined_at.getTime() - o.sample.startedAt);
  }
  // How fast the dispatcher signed and recorded them (sent_at is set just before the broadcast).
  const sentAt = list
    .flatMap((o) => {
      const t = o.id ? rows.get(o.id)?.sent_at?.getTime() : undefined;
      return t ? [t] : [];
    })
    .sort((x, y) => x - y);
  const spanMs = sentAt.length > 1 ? sentAt[sentAt.length - 1] - sentAt[0] : NaN;
  return {
    metaTxns: list.length,
    statuses,
    succeeded: statuses.SUCCEEDED ?? 0,
    // Receipt block − head when SendMetaTxn was issued (1 = the very next block).
    blocksToSucceeded: { ...dist(blocksFromSend), histogram: histogram(blocksFromSend) },
    // Receipt block − head when SendMetaTxn answered.
    blocksFromAcceptance: dist(blocksFromAccept),
    // Blocks the meta-transaction waited in the queue (head at broadcast − head at acceptance) and
    // blocks from broadcast to receipt.
    blocksQueued: dist(blocksQueued),
    blocksFromBroadcast: dist(blocksFromBroadcast),
    // Wall time from the request to the relayer recording the receipt (mined_at), and QUEUED → SENT.
    msToSucceeded: dist(msToSucceeded),
    msQueuedBeforeBroadcast: dist(msQueued),
    dispatch: {
      broadcasts: sentAt.length,
      firstToLastMs: spanMs,
      perSecond: sentAt.length > 1 ? round3(((sentAt.length - 1) / spanMs) * 1000) : null,
    },
    bySender,
    requeued: requeued.slice(0, 10),
    notSucceeded: notSucceeded.slice(0, 10),
  };
}

/** One round: phase A (deploying bundles), settle, phase B (the rest), settle. */
async function runRound(env: RelayerEnv, heads: HeadWatch, transport: Transport, users: User[]) {
  const label = `${transport}`;
  const send = caller(env, transport);
  const jobs = await signJobs(env, users);
  progress(`${label}: ${jobs.a.length + jobs.b.length} bundles signed (${users.length} wallets, layout ${LAYOUT})`);
  const recipientBalance = async () => (await env.public.readContract({ address: env.token, abi: erc20, functionName: 'balanceOf', args: [RECIPIENT] })) as bigint;
  const receivedBefore = await recipientBalance();
  const rpcBefore = await chainRpcCallsByMethod(env.services);
  const roundTripsBefore = await chainRoundTrips(env);
  const roundStart = Date.now();

  const phase = async (name: 'A' | 'B', list: Job[]) => {
    const profiled = PROFILE && name === 'B' && transport === TRANSPORTS[0];
    const c0 = process.cpuUsage();
    const m0 = cpuSnapshot();
    const g0 = env.services.metaTxns.groupCounts();
    const run = () => withLoopDelay(() => drive(list, CONCURRENCY, heads, (job) => send('SendMetaTxn', sendBody(job))));
    if (profiled) PROFILE.enabled = true;
    const { value: ran, eventLoopDelayMs } = profiled ? await cpuProfile(run).then((x) => ((profiledCpu = x.cpu), x.value)) : await run();
    if (profiled) PROFILE.enabled = false;
    const cpu = process.cpuUsage(c0);
    // CPU of this process per request (server, dispatcher and bench client together).
    const processCpuMsPerRequest = round3((cpu.user + cpu.system) / 1000 / list.length);
    // The whole machine's CPU per request, by process: what bounds intake on a shared 2-core machine.
    const cpuPerRequest = cpuPerUnit(m0, cpuSnapshot(), list.length);
    // Intakes that shared a transaction (store.ts, KeyGroups): groups of two or more, and those run again one by one.
    const g1 = env.services.metaTxns.groupCounts();
    const intakeGroups = { groups: g1.groups - g0.groups, grouped: g1.grouped - g0.grouped, fallbacks: g1.fallbacks - g0.fallbacks };
    const out: Outcome[] = list.map((job, i) => {
      const s = ran.samples[i];
      const id = s.answer?.status === 200 ? String(s.answer.body?.txnHash) : undefined;
      if (id && id !== job.bundle.id.slice(2).toLowerCase()) throw new Error(`${label} ${name}: SendMetaTxn answered id ${id} for bundle ${job.bundle.id}`);
      return { job, sample: s, id };
    });
    progress(`${label} phase ${name}: ${ran.summary.ok}/${list.length} accepted in ${ran.summary.wallMs} ms (${ran.summary.rps} req/s)`);
    const ids = out.flatMap((o) => (o.id ? [o.id] : []));
    const settled = await settle(env, ids, `${label} phase ${name}`);
    progress(`${label} phase ${name}: final after ${settled.settleMs} ms more`);
    return { intake: { ...ran.summary, eventLoopDelayMs, processCpuMsPerRequest, cpuPerRequest, intakeGroups }, out, settled };
  };

  const a = await phase('A', jobs.a);
  const b = await phase('B', jobs.b);
  const roundEnd = Date.now();
  await heads.refresh();
  const rpcAfter = await chainRpcCallsByMethod(env.services);
  const roundTripsAfter = await chainRoundTrips(env);
  const chainRpc: Record<string, number> = {};
  for (const [m, v] of Object.entries(rpcAfter)) if (v - (rpcBefore[m] ?? 0)) chainRpc[m] = v - (rpcBefore[m] ?? 0);

  const all = [...a.out, ...b.out];
  const rows = new Map([...a.settled.rows, ...b.settled.rows]);
  const accepted = a.intake.ok + b.intake.ok;
  const intakeMs = a.intake.wallMs + b.intake.wallMs;
  const ids = all.flatMap((o) => (o.id ? [o.id] : []));
  const relayTxs = await env.services.db.query<{ status: string; n: string }>('SELECT status, count(*)::text AS n FROM relay_txs WHERE chain_id = $1 AND meta_txn_id = ANY($2) GROUP BY status', [
    env.chainId,
    ids,
  ]);
  const failedBroadcasts = await env.services.db.query<{ meta_txn_id: string; nonce: string; error: string | null }>(
    `SELECT meta_txn_id, nonce::text AS nonce, error FROM relay_txs WHERE chain_id = $1 AND meta_txn_id = ANY($2) AND status <> 'MINED' ORDER BY id LIMIT 10`,
    [env.chainId, ids],
  );
  const received = (await recipientBalance()) - receivedBefore;

  return {
    transport,
    path:
      transport === 'http'
        ? `POST ${env.relayerUrl.replace(/:\d+/, ':<port>')}/rpc/Relayer/SendMetaTxn over a socket (fetch, keep-alive), ${CONCURRENCY} in flight`
        : `fastify inject of POST /relayer/anvil/rpc/Relayer/SendMetaTxn (no socket), ${CONCURRENCY} in flight`,
    intake: {
      phaseA: { what: `${jobs.a.length} deploying bundles (guest module: factory deploy + execute, space 0 nonce 0)`, ...a.intake },
      phaseB: {
        what:
          LAYOUT === 'spaces'
            ? `${jobs.b.length} bundles of the deployed wallets, spaces 1..${MORE_PER_WALLET} nonce 0`
            : `${jobs.b.length} bundles of the deployed wallets, space 0 nonces 1..${MORE_PER_WALLET}`,
        ...b.intake,
      },
      // Both phases' sending time added up (the waits for the blocks in between left out).
      all: { requests: jobs.a.length + jobs.b.length, accepted, wallMs: intakeMs, rps: round3((accepted / intakeMs) * 1000) },
    },
    toSucceeded: {
      all: outcomes(all, rows, heads),
      phaseA: outcomes(a.out, a.settled.rows, heads),
      phaseB: outcomes(b.out, b.settled.rows, heads),
      settleMsAfterLastAnswer: { phaseA: a.settled.settleMs, phaseB: b.settled.settleMs },
      timedOut: a.settled.timedOut || b.settled.timedOut,
    },
    relayTxs: Object.fromEntries(relayTxs.rows.map((r) => [r.status, Number(r.n)])),
    relayTxsNotMined: failedBroadcasts.rows,
    // Each bundle transfers 1 unit to the same recipient: what it actually received this round.
    recipientReceived: Number(received),
    chainRpcDuringRound: {
      note: 'metarelay metrics, intake and dispatcher together',
      calls: Object.values(chainRpc).reduce((x, y) => x + y, 0),
      httpRoundTrips: roundTripsAfter - roundTripsBefore,
      callsByMethod: chainRpc,
      // Per relayed (accepted) meta-transaction: the issue #19 figure (target: 3 or fewer, amortised).
      perMetaTxn: round3(Object.values(chainRpc).reduce((x, y) => x + y, 0) / Math.max(1, accepted)),
      perMetaTxnByMethod: Object.fromEntries(
        Object.entries(chainRpc)
          .sort((x, y) => y[1] - x[1])
          .map(([m, v]) => [m, round3(v / Math.max(1, accepted))]),
      ),
    },
    blockIntervalMs: heads.intervalMs(roundStart, roundEnd),
  };
}

/**
 * Rounds of `count` Ping requests over the same transport and concurrency: the cost of the HTTP/webrpc
 * path alone. One round of 1 000 lasts under a second at 64 in flight; measured right after 50 warm-up
 * requests it ran the path half compiled, at half the rate of the next rounds, and the ratio to Ping
 * moved with it. Now warmed, then the median round is the anchor, every round's rate reported beside it.
 */
async function pingBaseline(env: RelayerEnv, heads: HeadWatch, transport: Transport, count: number) {
  const send = caller(env, transport);
  // Warm, as the intake it is compared with is (phase A and the warm-up sends before it): in one run the
  // rounds after 50 warm-up requests went 1 071, 1 694, 2 333, 2 359, 2 321 req/s.
  await drive(Array.from({ length: 2 * count }), CONCURRENCY, heads, () => send('Ping', {}));
  const rounds = [];
  for (let i = 0; i < PING_ROUNDS; i++) {
    const c0 = process.cpuUsage();
    const ran = await drive(Array.from({ length: count }), CONCURRENCY, heads, () => send('Ping', {}));
    const c = process.cpuUsage(c0);
    // CPU of this process (server and bench client together) per Ping: blurs less under load than req/s.
    rounds.push({ ...ran.summary, processCpuMsPerRequest: round3((c.user + c.system) / 1000 / count) });
  }
  const median = medianBy(rounds, (r) => r.rps);
  const cpu = medianBy(rounds, (r) => r.processCpuMsPerRequest).processCpuMsPerRequest;
  progress(`ping ${transport}: ${rounds.map((r) => r.rps).join(', ')} req/s (median ${median.rps})`);
  return { ...median, processCpuMsPerRequest: cpu, rounds: rounds.map((r) => ({ rps: r.rps, processCpuMsPerRequest: r.processCpuMsPerRequest })) };
}

async function chainRoundTrips(env: RelayerEnv): Promise<number> {
  let n = 0;
  for (const v of (await env.services.metrics.chainRpcRequests.get()).values) n += v.value;
  return n;
}

function newUsers(n: number): User[] {
  return Array.from({ length: n }, () => {
    const s = newSigner();
    return { key: s.privateKey, wallet: walletFor(s.address) };
  });
}

runBench(async (cleanup) => {
  const loadavgAtStart = machineInfo().loadavg1m;
  await provideTestDbContext(cleanup);
  const chain = await startTokenChain();
  cleanup.add('anvil', () => chain.stop());
  // One client address sends every bundle: its share of the queue (200 by default) must not cap a round.
  const env = await startRelayerEnv({ chain, relayer: { maxQueuedPerAddress: 100_000 } });
  cleanup.add('relayer env', async () => {
    const closing = env.close();
    // Keep-alive sockets of fetch must not hold the server open.
    env.app.server.closeAllConnections();
    await closing;
  });
  progress(`relayer ${env.relayerUrl}, anvil ${env.rpcUrl}, database ${TEST_DB}`);
  if (PROFILE) {
    const relayer = env.services.relayers.get(env.chainId)!;
    PROFILE.wrapDb(env.services.db);
    // Intake's stages live on relayer.intake and relayer.pricing (intake/intake.ts, intake/pricing.ts).
    PROFILE.wrapMethods(relayer, ['send', 'recognise', 'probe'], 'send');
    PROFILE.wrapMethods(relayer.intake, ['precheck', 'check', 'simulateCall', 'enqueue', 'charge']);
    PROFILE.wrapMethods(relayer.pricing, ['fund', 'costOf', 'sponsorship', 'rulesOf']);
    // The stores intake was wired with (relayer/index.ts): the same objects as the services'.
    PROFILE.wrapMethods(env.services.metaTxns, ['find', 'insert']);
    PROFILE.wrapMethods(env.services.spendCaps, ['budgetStops', 'charge']);
    PROFILE.wrapMethods(env.services.balances.holds, ['hold']);
  }
  await sponsor(env, 'CONTRACT', env.token);
  if (TANK) {
    // A limited project balance (a gas tank) with plenty in it: every sponsored intake holds its cost.
    const r = await env.call('AdjustProjectBalance', { projectId: env.project.id, amount: 1000, identifier: 'bench-tank' }, { authorization: `Bearer ${env.adminToken}` });
    if (r.status !== 200) throw new Error(`AdjustProjectBalance failed: ${JSON.stringify(r.body)}`);
    progress('the project has a limited balance of 1000 ETH: every intake holds against it');
  }

  const warmUsers = newUsers(WARMUP_WALLETS);
  const rounds: Array<{ transport: Transport; users: User[] }> = TRANSPORTS.map((transport) => ({ transport, users: newUsers(WALLETS) }));
  const everyone = [...warmUsers, ...rounds.flatMap((r) => r.users)];
  // Minted while anvil still automines: setup, not measured.
  await env.chain.send(everyone.map((u) => ({ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [u.wallet.address, MINTED] })));
  progress(`${everyone.length} wallets hold ${MINTED} FUSD each`);

  await rpcCall(env.rpcUrl, 'evm_setAutomine', [false]);
  await rpcCall(env.rpcUrl, 'evm_setIntervalMining', [BLOCK_TIME_S]);
  const heads = new HeadWatch(env.rpcUrl);
  await heads.ready();
  cleanup.add('head watch', () => heads.stop());
  const automine = await rpcCall<boolean>(env.rpcUrl, 'anvil_getAutomine');
  if (automine) throw new Error('anvil still automines');
  const firstHead = heads.head;
  await new Promise((r) => setTimeout(r, 2_500));
  if (heads.head < firstHead + 2) throw new Error(`anvil is not mining every ${BLOCK_TIME_S} s (head ${firstHead} → ${heads.head} in 2.5 s)`);
  progress(`anvil mines every ${BLOCK_TIME_S} s (head ${heads.head})`);

  // Warm-up, not measured: a few deploying bundles through both paths (JIT, caches, first sender lease).
  {
    const jobs = await signJobs(env, warmUsers);
    const half = Math.ceil(jobs.a.length / 2);
    const sent = await Promise.all(jobs.a.map((job, i) => caller(env, i < half ? 'http' : 'inject')('SendMetaTxn', sendBody(job))));
    const bad = sent.filter((s) => s.status !== 200);
    if (bad.length) throw new Error(`warm-up: ${bad.length} refused, e.g. ${JSON.stringify(bad[0].body)}`);
    const settled = await settle(
      env,
      sent.map((s) => String(s.body.txnHash)),
      'warm-up',
    );
    if ([...settled.rows.values()].some((r) => r.status !== 'SUCCEEDED')) throw new Error(`warm-up: not all SUCCEEDED: ${JSON.stringify([...settled.rows.values()].map((r) => r.status))}`);
    progress('warm-up done');
  }

  const requests = WALLETS * (1 + MORE_PER_WALLET);
  const pingHttp = await pingBaseline(env, heads, 'http', requests);
  const pingInject = TRANSPORTS.includes('inject') ? await pingBaseline(env, heads, 'inject', requests) : pingHttp;

  const results: Record<string, Awaited<ReturnType<typeof runRound>>> = {};
  for (const r of rounds) results[r.transport] = await runRound(env, heads, r.transport, r.users);

  const headline = (t: Transport, ping: typeof pingHttp) => {
    const r = results[t];
    const s = r.toSucceeded.all;
    return {
      sendMetaTxnRps: r.intake.all.rps,
      sendMetaTxnRpsPhaseA: r.intake.phaseA.rps,
      sendMetaTxnRpsPhaseB: r.intake.phaseB.rps,
      pingRps: ping.rps,
      sendOverPing: round3(r.intake.all.rps / ping.rps),
      sendLatencyP50MsPhaseB: r.intake.phaseB.latencyMs.p50,
      // Process CPU per request (server + dispatcher + bench client in this process; PostgreSQL and anvil not included).
      sendCpuMsPerRequestPhaseB: r.intake.phaseB.processCpuMsPerRequest,
      machineCpuPerSendPhaseB: r.intake.phaseB.cpuPerRequest,
      pingCpuMsPerRequest: ping.processCpuMsPerRequest,
      succeeded: `${s.succeeded}/${s.metaTxns}`,
      tokensArrived: `${r.recipientReceived}/${s.metaTxns}`,
      blocksToSucceeded: { p50: s.blocksToSucceeded.p50, p95: s.blocksToSucceeded.p95, max: s.blocksToSucceeded.max },
      // Where those blocks go: waiting in the relayer's queue, then broadcast to receipt.
      blocksQueued: { p50: s.blocksQueued.p50, max: s.blocksQueued.max },
      blocksFromBroadcast: { p50: s.blocksFromBroadcast.p50, max: s.blocksFromBroadcast.max },
      dispatchPerSecondPhaseB: r.toSucceeded.phaseB.dispatch.perSecond,
      nodeCallsPerMetaTxn: r.chainRpcDuringRound.perMetaTxn,
      nodeCallsPerMetaTxnByMethod: r.chainRpcDuringRound.perMetaTxnByMethod,
    };
  };

  // PostgreSQL only: what planning costs each statement of the profiled window (bench/lib/plan-probe.ts).
  const plans = PROFILE && TEST_DB === 'postgres' ? await planProbe(env.testDb.location, [...PROFILE.everyStatement.values()], (n) => round3(n / Math.max(1, PROFILE.sends))) : undefined;

  return {
    bench: 'relayer-intake',
    issue: 8,
    db: TEST_DB,
    layout: LAYOUT,
    tank: TANK,
    wallets: WALLETS,
    bundlesPerWallet: 1 + MORE_PER_WALLET,
    bundles: requests,
    concurrency: CONCURRENCY,
    blockTimeS: BLOCK_TIME_S,
    senders: env.services.relayers.get(env.chainId)?.senders.length,
    // Other processes on the machine move these figures: compare runs at similar load.
    machine: { ...machineInfo(), loadavgAtStart },
    allSucceeded: rounds.every((r) => results[r.transport].toSucceeded.all.succeeded === requests && results[r.transport].recipientReceived === requests),
    summary: Object.fromEntries(TRANSPORTS.map((t) => [t, headline(t, t === 'http' ? pingHttp : pingInject)])),
    baseline: {
      pingHttp: { path: `POST .../rpc/Relayer/Ping over a socket, ${CONCURRENCY} in flight, with the access key`, ...pingHttp },
      pingInject: { path: `fastify inject of .../rpc/Relayer/Ping, ${CONCURRENCY} in flight, with the access key`, ...pingInject },
    },
    rounds: results,
    ...(PROFILE ? { profile: { what: `round ${TRANSPORTS[0]}, phase B, inside ChainRelayer.send`, ...PROFILE.report(profiledCpu) } } : {}),
    ...(plans ? { plans: { what: `every statement of round ${TRANSPORTS[0]}'s phase B (per send), planned for its values and generic (bench/lib/plan-probe.ts)`, statements: plans } } : {}),
  };
});
