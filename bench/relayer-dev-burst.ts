// Issue #36: the relayer as users run it with `npm start` (= `metarelay dev`: embedded PGlite, its own
// anvil mining a block every second, the sample contracts, the dispatcher in the same process), measured
// from outside through its HTTP API only:
//
//   (a) SendMetaTxn accepted per second against Ping, side by side in one run, same client (fetch,
//       keep-alive) and concurrency;
//   (b) a burst of 200 SendMetaTxn: blocks from each request to its SUCCEEDED receipt (p50 ≤ 2 wanted).
//
//   npx tsx bench/relayer-dev-burst.ts
//   BENCH_CONCURRENCY=64 npx tsx bench/relayer-dev-burst.ts        # one burst only
//
// Options: BENCH_BURST (200 meta-transactions per burst), BENCH_CONCURRENCY (64,16: one burst per value,
// in this order, each right after its Ping baseline), BENCH_WALLETS (= BENCH_BURST: one bundle per
// wallet per burst), BENCH_SETTLE_S (180), BENCH_KEEP=1 (keep the temp data folder: dev.log, the PGlite
// database). Diagnostic, not what `npm start` runs: BENCH_DEV_PG=1 gives dev a new PostgreSQL database
// (DATABASE_URL, on BENCH_PG_URL's server, dropped after) instead of PGlite, so intake and the dispatcher
// have connections of their own.
//
// What a dev user gets out of the box, used as is (no product config changed): the dev project and its
// access key from the manifest, and the project's sponsorship of the sample contracts, so every bundle is
// one sponsored DUSD transfer (1 base unit to a fixed recipient) and needs no fee; FeeOptions is asked once
// to show it. Setup, not measured: `metarelay dev` on a fresh temp folder (bench/lib/processes.ts
// startDev); BENCH_WALLETS new Sequence v2 wallets (test/support/sequence-wallet.ts) minted 1 000 000
// DUSD each by anvil's account 4 (dev uses 0-3, 5-9: deployer, senders, signers, price admin, fee
// collector); phase A: one deploying bundle per wallet through the guest module (deploy + transfer),
// sent with 64 in flight and waited for until final, which also warms the process up. Then, per
// concurrency: a Ping baseline (1 000 warm-up, then BENCH_PING_ROUNDS rounds of at least 1 000, the median round), and a burst of BENCH_BURST bundles on
// the deployed wallets (nonce space k+1 for burst k, nonce 0: independent of each other), all signed
// before timing and sent at once through a closed loop with that many in flight.
//
// Blocks to SUCCEEDED = block of the meta-transaction's receipt (GetMetaTxnReceipt) − chain head when its
// SendMetaTxn was issued (1 = the very next block). The head is tracked by polling eth_blockNumber every
// 20 ms (bench/lib/relayer-bench.ts HeadWatch). Where the blocks go, from the project's log
// (GetMetaTransactions: queuedAt, sentAt, minedAt, txnHash) mapped onto the heads: blocks waiting in the
// queue (head at sentAt − head at the answer), broadcast → receipt, QUEUED → SENT in ms, how many
// dispatch passes and transactions carried the burst, and a per-block timeline (accepted, broadcast,
// included). Chain truth: every transaction's receipt is read from anvil, and the recipient must have
// received exactly BENCH_BURST units per burst.
//
// CPU per request: the dev process (server, PGlite, dispatcher, indexer, watcher all in it) plus its
// anvil child, from /proc (utime + stime), over the sending window; also over the whole burst to the last
// SUCCEEDED (per meta-transaction), and the whole machine's (bench/lib/processes.ts cpuSnapshot).
//
// Result JSON on stdout; progress on stderr.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { encodeFunctionData, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { rpcCall } from '../src/devchain/index.ts';
import { erc20 } from '../test/support/relayer-env.ts';
import { signedBundle } from '../test/support/sequence-wallet.ts';
import { envNumber, machineInfo, newPgDatabase, progress, runBench } from './lib/harness.ts';
import { childPids, cpuPerUnit, cpuSnapshot, processCpuUs, startDev } from './lib/processes.ts';
import { HeadWatch, dist, histogram, medianBy, round3, withLoopDelay } from './lib/relayer-bench.ts';
import {
  RECIPIENT,
  anvilKey,
  benchCommand,
  callRelayer,
  closedLoop,
  diffCounts,
  intakeSummary,
  newUsers,
  perItem,
  scrapeChainRpcCalls,
  sendBody,
  sendSetupCalls,
  signJobs,
  type Answer,
  type Job,
  type Sample,
  type User,
} from './lib/relayer-load.ts';

const BURST = envNumber('BENCH_BURST', 200);
// Rounds of the Ping baseline; the median round is the anchor (pingBaseline).
const PING_ROUNDS = Math.max(1, envNumber('BENCH_PING_ROUNDS', 5));
const WALLETS = envNumber('BENCH_WALLETS', BURST);
const CONCURRENCIES = (process.env.BENCH_CONCURRENCY ?? '64,16').split(',').map((c) => {
  const n = Number(c);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`BENCH_CONCURRENCY must be positive integers, comma-separated; got "${process.env.BENCH_CONCURRENCY}"`);
  return n;
});
const SETTLE_MS = envNumber('BENCH_SETTLE_S', 180) * 1000;
const KEEP = process.env.BENCH_KEEP === '1';
const DEV_PG = process.env.BENCH_DEV_PG === '1';
const MINTED = 1_000_000n;
const PHASE_A_CONCURRENCY = 64;
/** Bundles of one wallet in one burst (one per nonce space); spaces of burst k follow those of burst k-1. */
const PER_WALLET = Math.ceil(BURST / WALLETS);
const FINAL = new Set(['SUCCEEDED', 'PARTIALLY_FAILED', 'FAILED', 'DROPPED']);

interface Dev {
  relayerUrl: string;
  baseUrl: string;
  accessKey: string;
  /** /metrics answers an admin token only. */
  adminToken: string;
  rpcUrl: string;
  chainId: number;
  token: Address;
  devPid: number;
  anvilPid: number;
}

const call = (dev: Dev, method: string, body: unknown, timeoutMs = 60_000) => callRelayer(dev.relayerUrl, dev.accessKey, method, body, timeoutMs);

/** CPU (µs) of the dev process and of its anvil. */
function devCpu(dev: Dev) {
  return { node: processCpuUs(dev.devPid), anvil: processCpuUs(dev.anvilPid) };
}

function cpuMsPer(a: ReturnType<typeof devCpu>, b: ReturnType<typeof devCpu>, n: number) {
  const node = (b.node - a.node) / 1000 / n;
  const anvil = (b.anvil - a.anvil) / 1000 / n;
  return { devProcessMs: round3(node), anvilMs: round3(anvil), devAndAnvilMs: round3(node + anvil) };
}

// ---------------------------------------------------------------------------------------------------
// Receipts and the project's log

interface Receipt {
  status: string;
  blockNumber: number;
  txnHash: string;
  /** When GetMetaTxnReceipt first answered a final status (ms since epoch). */
  seenAt: number;
}

/**
 * Every id's receipt once final, through GetMetaTxnReceipt (held until final or receiptWaitMs), 16 held
 * at once (the service holds at most 32 per client address; past that it answers at once).
 */
async function receipts(dev: Dev, ids: string[], label: string): Promise<{ byId: Map<string, Receipt>; timedOut: boolean; settleMs: number }> {
  const byId = new Map<string, Receipt>();
  const t0 = Date.now();
  let next = 0;
  let lastLog = Date.now();
  const worker = async () => {
    while (next < ids.length) {
      const id = ids[next++];
      for (;;) {
        if (Date.now() - t0 > SETTLE_MS) return;
        const r = await call(dev, 'GetMetaTxnReceipt', { metaTxID: id }, 30_000).catch((err: Error) => ({ status: 0, body: { error: err.message } }) as Answer);
        const rec = r.body?.receipt;
        if (r.status === 200 && rec && FINAL.has(rec.status)) {
          byId.set(id, { status: rec.status, blockNumber: Number(rec.blockNumber), txnHash: rec.txnHash, seenAt: Date.now() });
          break;
        }
        if (Date.now() - lastLog > 5_000) {
          lastLog = Date.now();
          progress(`${label}: ${byId.size}/${ids.length} final`);
        }
        await new Promise((res) => setTimeout(res, 200));
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(16, ids.length) }, worker));
  const timedOut = byId.size < ids.length;
  if (timedOut) progress(`${label}: ${ids.length - byId.size} of ${ids.length} not final after ${SETTLE_MS / 1000} s`);
  return { byId, timedOut, settleMs: Date.now() - t0 };
}

interface LogRow {
  id: string;
  status: string;
  queuedAt: number;
  sentAt: number | null;
  minedAt: number | null;
  txnHash: string;
  txnNonce: number;
  requeues: number;
}

/** The dev project's id: the one its key belongs to (GetMetaTransactions of another project names it). */
async function projectId(dev: Dev): Promise<number> {
  const r = await call(dev, 'GetMetaTransactions', { projectId: 1, page: { pageSize: 1 } });
  if (r.status === 200) return 1;
  const m = /belongs to project (\d+)/.exec(String(r.body?.msg ?? r.body?.error ?? ''));
  if (!m) throw new Error(`cannot tell the dev project's id: ${JSON.stringify(r.body).slice(0, 300)}`);
  return Number(m[1]);
}

/** Every meta-transaction of the project (its log, newest first), by id. */
async function projectLog(dev: Dev, project: number, want: Set<string>): Promise<Map<string, LogRow>> {
  const out = new Map<string, LogRow>();
  for (let page = 0; out.size < want.size; page++) {
    const r = await call(dev, 'GetMetaTransactions', { projectId: project, page: { page, pageSize: 100 } });
    if (r.status !== 200) throw new Error(`GetMetaTransactions: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
    const t = (v: string | null) => (v ? Date.parse(v) : null);
    for (const x of r.body.transactions as Array<Record<string, any>>) {
      if (!want.has(x.metaTxnID)) continue;
      out.set(x.metaTxnID, {
        id: x.metaTxnID,
        status: x.txnStatus,
        queuedAt: t(x.queuedAt)!,
        sentAt: t(x.sentAt),
        minedAt: t(x.minedAt),
        txnHash: x.txnHash,
        txnNonce: Number(x.txnNonce),
        requeues: Number(x.requeues),
      });
    }
    if (!r.body.page?.more) break;
  }
  return out;
}

/**
 * The dev process's event-loop delay since the last scrape (prom-client's default metrics: its histogram
 * is reset at every scrape), in ms.
 */
async function eventLoopLag(dev: Dev): Promise<{ p50: number; p99: number; max: number } | null> {
  try {
    const text = await (await fetch(`${dev.baseUrl}/metrics`, { headers: { authorization: `Bearer ${dev.adminToken}` } })).text();
    const get = (name: string) => Number(new RegExp(`^${name}\\s+(\\S+)`, 'm').exec(text)?.[1] ?? NaN);
    const ms = (name: string) => round3(get(name) * 1000);
    return { p50: ms('nodejs_eventloop_lag_p50_seconds'), p99: ms('nodejs_eventloop_lag_p99_seconds'), max: ms('nodejs_eventloop_lag_max_seconds') };
  } catch {
    return null;
  }
}

/** The chain's receipts of `hashes` (one JSON-RPC batch per 100): block, sender, status. */
async function chainReceipts(rpcUrl: string, hashes: string[]) {
  const out = new Map<string, { block: number; from: string; ok: boolean; gasUsed: number }>();
  for (let i = 0; i < hashes.length; i += 100) {
    const slice = hashes.slice(i, i + 100);
    const res = await fetch(rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(slice.map((h, id) => ({ jsonrpc: '2.0', id, method: 'eth_getTransactionReceipt', params: [h] }))),
    });
    for (const r of (await res.json()) as Array<{ id: number; result: any }>) {
      if (!r.result) continue;
      out.set(slice[r.id], { block: Number(BigInt(r.result.blockNumber)), from: String(r.result.from).toLowerCase(), ok: r.result.status === '0x1', gasUsed: Number(BigInt(r.result.gasUsed)) });
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Sending

const transferData = encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [RECIPIENT, 1n] });

async function recipientBalance(dev: Dev): Promise<bigint> {
  const data = encodeFunctionData({ abi: erc20, functionName: 'balanceOf', args: [RECIPIENT] });
  return BigInt(await rpcCall<Hex>(dev.rpcUrl, 'eth_call', [{ to: dev.token, data }, 'latest']));
}

/** Pings with `concurrency` in flight over the same client as SendMetaTxn, warmed, in rounds (`count` or 1 000 each); the median round, with CPU of dev + anvil per Ping. */
async function pingBaseline(dev: Dev, concurrency: number, count: number) {
  const run = async (n: number) => {
    const ms: number[] = [];
    let ok = 0;
    let left = n;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: Math.min(concurrency, n) }, async () => {
        while (left > 0) {
          left--;
          const s = performance.now();
          const r = await call(dev, 'Ping', {});
          ms.push(performance.now() - s);
          if (r.status === 200 && r.body?.status === true) ok++;
        }
      }),
    );
    return { ok, wallMs: performance.now() - t0, ms };
  };
  // Warm, as the service is when its burst comes (phase A before it): measured after 50 warm-up requests,
  // Ping ran the path half compiled (bench/relayer-intake.ts measured the same: 1 071 then ~2 300 req/s).
  // Then PING_ROUNDS rounds of at least 1 000 (a round of 200 lasted a tenth of a second at 64 in flight,
  // and rounds moved by 1.8×). The median round (by rate) is the anchor, with its own CPU; every round's
  // rate is reported beside it.
  await run(Math.max(1000, 2 * count));
  const perRound = Math.max(1000, count);
  const rounds = [];
  for (let i = 0; i < PING_ROUNDS; i++) {
    const c0 = devCpu(dev);
    const m0 = cpuSnapshot();
    const r = await run(perRound);
    const cpu = cpuMsPer(c0, devCpu(dev), perRound);
    if (r.ok !== perRound) throw new Error(`Ping: ${perRound - r.ok} of ${perRound} failed`);
    rounds.push({
      requests: perRound,
      concurrency,
      wallMs: Math.round(r.wallMs),
      rps: round3((r.ok / r.wallMs) * 1000),
      latencyMs: dist(r.ms),
      cpuPerRequest: cpu,
      machineCpuPerRequest: cpuPerUnit(m0, cpuSnapshot(), perRound),
    });
  }
  return { ...medianBy(rounds, (r) => r.rps), roundsRps: rounds.map((r) => r.rps) };
}

/** Phase A: one deploying bundle per wallet (guest module: factory deploy + transfer), space 0 nonce 0; waited for until final. */
async function deployWallets(dev: Dev, heads: HeadWatch, users: User[]) {
  const jobs: Job[] = await Promise.all(
    users.map(async (user, i) => ({
      i,
      user,
      space: 0n,
      n: 0n,
      bundle: await signedBundle({ signerKey: user.key, wallet: user.wallet, chainId: dev.chainId, txs: [{ to: dev.token, data: transferData }], nonce: { space: 0n, n: 0n }, deployed: false }),
    })),
  );
  const ran = await closedLoop(jobs, PHASE_A_CONCURRENCY, 1, heads, (job) => call(dev, 'SendMetaTxn', sendBody(job)));
  const intake = intakeSummary(ran.samples);
  if (intake.accepted !== jobs.length) throw new Error(`phase A: ${jobs.length - intake.accepted} of ${jobs.length} refused: ${JSON.stringify(intake.refused)}`);
  const got = await receipts(
    dev,
    ran.samples.map((s) => s.id!),
    'phase A',
  );
  const bad = [...got.byId.values()].filter((r) => r.status !== 'SUCCEEDED');
  if (got.timedOut || bad.length) throw new Error(`phase A: ${bad.length} not SUCCEEDED, ${jobs.length - got.byId.size} not final`);
  const blocks = ran.samples.map((s) => got.byId.get(s.id!)!.blockNumber - s.headAtStart);
  progress(`phase A: ${users.length} wallets deployed through the guest module (${intake.acceptedPerSec}/s accepted, blocks to SUCCEEDED p50 ${dist(blocks).p50})`);
  return { what: `${jobs.length} deploying bundles (guest module), ${PHASE_A_CONCURRENCY} in flight`, intake, blocksToSucceeded: dist(blocks), ids: ran.samples.map((s) => s.id!) };
}

/** Clusters of sentAt times (a dispatch pass signs and records its transactions within a few ms). */
function passes(sentAts: number[], gapMs = 150) {
  const s = [...sentAts].sort((a, b) => a - b);
  const out: Array<{ at: number; end: number; metaTxns: number }> = [];
  for (const t of s) {
    const last = out[out.length - 1];
    if (last && t - last.end <= gapMs) {
      last.metaTxns++;
      last.end = t;
    } else out.push({ at: t, end: t, metaTxns: 1 });
  }
  return out;
}

/** One burst: BENCH_BURST signed bundles sent at once with `concurrency` in flight, then followed to their receipts. */
async function burst(dev: Dev, heads: HeadWatch, project: number, jobs: Job[], concurrency: number) {
  const label = `burst ×${jobs.length} @${concurrency}`;
  const receivedBefore = await recipientBalance(dev);
  const rpcBefore = await scrapeChainRpcCalls(dev.baseUrl, dev.adminToken).catch(() => ({}));
  // Start right after a new block, so every run meets the same phase of the block clock.
  const h0 = heads.head;
  await heads.waitFor(h0 + 1);
  await eventLoopLag(dev); // resets the dev process's histogram
  const c0 = devCpu(dev);
  const m0 = cpuSnapshot();
  const burstStart = Date.now();
  const { value: ran, eventLoopDelayMs } = await withLoopDelay(() => closedLoop(jobs, concurrency, 1, heads, (job) => call(dev, 'SendMetaTxn', sendBody(job))));
  const c1 = devCpu(dev);
  const m1 = cpuSnapshot();
  const lagWhileSending = await eventLoopLag(dev);
  const intake = intakeSummary(ran.samples);
  progress(`${label}: ${intake.accepted}/${jobs.length} accepted in ${intake.wallMs} ms (${intake.acceptedPerSec}/s)`);
  const ids = ran.samples.flatMap((s) => (s.id ? [s.id] : []));
  const got = await receipts(dev, ids, label);
  const c2 = devCpu(dev);
  const m2 = cpuSnapshot();
  const lagAfterSending = await eventLoopLag(dev);
  const lastFinal = Math.max(...[...got.byId.values()].map((r) => r.seenAt));
  progress(`${label}: final after ${got.settleMs} ms more`);
  await heads.refresh();
  const rpcAfter = await scrapeChainRpcCalls(dev.baseUrl, dev.adminToken).catch(() => ({}));
  const received = (await recipientBalance(dev)) - receivedBefore;
  const log = await projectLog(dev, project, new Set(ids));
  const txs = [...new Set([...got.byId.values()].map((r) => r.txnHash).filter(Boolean))];
  const onChain = await chainReceipts(dev.rpcUrl, txs);

  // Per meta-transaction: blocks and where they went.
  const statuses: Record<string, number> = {};
  const blocksToSucceeded: number[] = [];
  const blocksToReported: number[] = [];
  const blocksFromAnswer: number[] = [];
  const blocksQueued: number[] = [];
  const blocksFromBroadcast: number[] = [];
  const msQueuedToSent: number[] = [];
  const msSentToMined: number[] = [];
  const msToSucceeded: number[] = [];
  const chainMismatch: string[] = [];
  const notSucceeded: unknown[] = [];
  let requeued = 0;
  const bySample = new Map<string, Sample>(ran.samples.flatMap((s) => (s.id ? [[s.id, s] as const] : [])));
  for (const [id, s] of bySample) {
    const r = got.byId.get(id);
    const st = r?.status ?? 'NOT_FINAL';
    statuses[st] = (statuses[st] ?? 0) + 1;
    if (!r || st !== 'SUCCEEDED') {
      notSucceeded.push({ id, status: st, wallet: s.job.user.wallet.address });
      continue;
    }
    const tx = onChain.get(r.txnHash);
    if (!tx?.ok || tx.block !== r.blockNumber) chainMismatch.push(id);
    blocksToSucceeded.push(r.blockNumber - s.headAtStart);
    blocksFromAnswer.push(r.blockNumber - s.headAtAnswer);
    const row = log.get(id);
    if (row) {
      requeued += row.requeues > 0 ? 1 : 0;
      if (row.minedAt) {
        blocksToReported.push(heads.at(row.minedAt) - s.headAtStart);
        msToSucceeded.push(row.minedAt - s.startedAt);
      }
      if (row.sentAt) {
        const h = heads.at(row.sentAt);
        blocksQueued.push(h - s.headAtAnswer);
        blocksFromBroadcast.push(r.blockNumber - h);
        msQueuedToSent.push(row.sentAt - row.queuedAt);
        if (row.minedAt) msSentToMined.push(row.minedAt - row.sentAt);
      }
    }
  }

  // How the burst was carried: dispatch passes, transactions, senders, blocks.
  const sentAts = [...log.values()].flatMap((r) => (r.sentAt ? [r.sentAt] : []));
  const dispatchPasses = passes(sentAts);
  const perTx = new Map<string, number>();
  for (const r of got.byId.values()) perTx.set(r.txnHash, (perTx.get(r.txnHash) ?? 0) + 1);
  const bySender: Record<string, number> = {};
  const byBlock: Record<string, number> = {};
  for (const tx of onChain.values()) {
    bySender[tx.from] = (bySender[tx.from] ?? 0) + 1;
    byBlock[String(tx.block)] = (byBlock[String(tx.block)] ?? 0) + 1;
  }

  // Timeline by block interval: the head when each event happened (requests out, answers in,
  // broadcasts recorded, inclusions), counted per head, from the head before the burst on.
  const timeline: Record<string, { issued: number; accepted: number; broadcast: number; included: number; reportedMined: number }> = {};
  const bump = (head: number, k: keyof (typeof timeline)[string]) => {
    const key = String(head - h0);
    timeline[key] ??= { issued: 0, accepted: 0, broadcast: 0, included: 0, reportedMined: 0 };
    timeline[key][k]++;
  };
  for (const s of ran.samples) {
    bump(s.headAtStart, 'issued');
    if (s.id) bump(s.headAtAnswer, 'accepted');
  }
  for (const r of log.values()) {
    if (r.sentAt) bump(heads.at(r.sentAt), 'broadcast');
    if (r.minedAt) bump(heads.at(r.minedAt), 'reportedMined');
  }
  // A block included at height b was mined while the head was b − 1: counted at the head it made (b).
  for (const r of got.byId.values()) bump(r.blockNumber, 'included');

  const rpc = perItem(diffCounts(rpcAfter, rpcBefore), ids.length);
  const succeeded = statuses.SUCCEEDED ?? 0;
  return {
    what: `${jobs.length} sponsored DUSD transfers of deployed wallets, ${concurrency} in flight`,
    headBeforeBurst: h0,
    startedAt: new Date(burstStart).toISOString(),
    intake: { ...intake, eventLoopDelayMsOfBenchClient: eventLoopDelayMs },
    // The dev process's event-loop delay (ms): intake, dispatcher, PGlite and the indexer share its one thread.
    devEventLoopLagMs: { whileSending: lagWhileSending, fromLastAnswerToLastReceipt: lagAfterSending },
    cpu: {
      // Over the sending window: first request out to last answer in.
      perRequestWhileSending: cpuMsPer(c0, c1, jobs.length),
      machinePerRequestWhileSending: cpuPerUnit(m0, m1, jobs.length),
      // From the first request to the last receipt: intake, dispatch, receipts, indexing of the blocks.
      perMetaTxnToLastReceipt: cpuMsPer(c0, c2, jobs.length),
      machinePerMetaTxnToLastReceipt: cpuPerUnit(m0, m2, jobs.length),
    },
    statuses,
    allSucceeded: succeeded === jobs.length && received === BigInt(jobs.length) && chainMismatch.length === 0,
    recipientReceived: Number(received),
    chainMismatch: chainMismatch.slice(0, 5),
    notSucceeded: notSucceeded.slice(0, 5),
    requeued,
    // Receipt block − head when SendMetaTxn went out (1 = the next block).
    blocksToSucceeded: { ...dist(blocksToSucceeded), histogram: histogram(blocksToSucceeded) },
    // Head when the relayer recorded the receipt (minedAt) − head when SendMetaTxn went out: when a client could see SUCCEEDED.
    blocksToReportedSucceeded: { ...dist(blocksToReported), histogram: histogram(blocksToReported) },
    blocksFromAnswer: dist(blocksFromAnswer),
    // Head at broadcast (sentAt) − head at the answer; receipt block − head at broadcast.
    blocksQueued: { ...dist(blocksQueued), histogram: histogram(blocksQueued) },
    blocksFromBroadcast: { ...dist(blocksFromBroadcast), histogram: histogram(blocksFromBroadcast) },
    msQueuedToSent: dist(msQueuedToSent),
    msSentToReportedMined: dist(msSentToMined),
    msToReportedSucceeded: dist(msToSucceeded),
    dispatch: {
      passes: dispatchPasses.length,
      metaTxnsPerPass: dispatchPasses.map((p) => p.metaTxns),
      // ms after the first request of the burst: first and last sentAt of each pass.
      passAtMs: dispatchPasses.map((p) => [p.at - burstStart, p.end - burstStart]),
      transactions: txs.length,
      metaTxnsPerTransaction: dist([...perTx.values()]),
      bySender,
      transactionsByBlock: byBlock,
    },
    timelineByHead: timeline,
    // When each head was first seen, ms after the burst's first request (negative: before it).
    headSeenMs: Object.fromEntries(
      Object.keys(timeline).map((k) => {
        const at = heads.seenAt(h0 + Number(k));
        return [k, at === undefined ? null : at - burstStart];
      }),
    ),
    lastReceiptSeenMs: lastFinal - burstStart,
    blockIntervalMs: heads.intervalMs(burstStart, lastFinal),
    nodeCalls: rpc,
  };
}

runBench(async (cleanup) => {
  const loadavgAtStart = machineInfo().loadavg1m;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'metarelay-devburst-'));
  if (KEEP) progress(`data folder ${dir} (kept)`);
  else cleanup.add(`remove ${dir}`, () => rmSync(dir, { recursive: true, force: true }));
  const databaseUrl = DEV_PG ? await newPgDatabase(cleanup, 'metarelay_devburst') : undefined;
  const server = await startDev(path.join(dir, 'dev'), { databaseUrl });
  cleanup.add('stop metarelay dev', () => server.stop());
  const m = server.manifest as typeof server.manifest & { relayerUrl: string; adminToken: string; feeToken: { address: Address; symbol: string } };
  const anvils = childPids(server.pid, 'anvil');
  if (anvils.length !== 1) throw new Error(`expected one anvil child of metarelay dev (pid ${server.pid}), found ${anvils.length}`);
  const dev: Dev = {
    relayerUrl: m.relayerUrl,
    baseUrl: m.baseUrl,
    accessKey: m.accessKey,
    adminToken: m.adminToken,
    rpcUrl: m.chain.rpcUrl,
    chainId: m.chain.chainId,
    token: m.feeToken.address,
    devPid: server.pid,
    anvilPid: anvils[0],
  };
  progress(`relayer ${dev.relayerUrl}, anvil ${dev.rpcUrl} (pid ${dev.anvilPid}), fee token ${m.feeToken.symbol} ${dev.token}`);

  const heads = new HeadWatch(dev.rpcUrl);
  await heads.ready();
  cleanup.add('head watch', () => heads.stop());
  const firstHead = heads.head;
  await new Promise((r) => setTimeout(r, 2_500));
  if (heads.head < firstHead + 2) throw new Error(`dev's anvil is not mining every second (head ${firstHead} → ${heads.head} in 2.5 s)`);

  const users = newUsers(WALLETS);
  await sendSetupCalls(
    dev.rpcUrl,
    dev.chainId,
    4,
    users.map((u) => ({ to: dev.token, data: encodeFunctionData({ abi: erc20, functionName: 'mint', args: [u.wallet.address, MINTED] }), gas: 100_000n })),
  );
  progress(`${users.length} wallets hold ${MINTED} ${m.feeToken.symbol} each (minted by anvil account 4, ${privateKeyToAccount(anvilKey(4)).address})`);

  // What a dev user is told to pay: nothing, the dev project sponsors the sample contracts.
  const probe = await signedBundle({ signerKey: users[0].key, wallet: users[0].wallet, chainId: dev.chainId, txs: [{ to: dev.token, data: transferData }], deployed: false });
  const fee = await call(dev, 'FeeOptions', { wallet: users[0].wallet.address, to: probe.entrypoint, data: probe.input });
  if (fee.status !== 200) throw new Error(`FeeOptions: HTTP ${fee.status} ${JSON.stringify(fee.body).slice(0, 300)}`);
  const feeOptions = { sponsored: fee.body.sponsored, options: (fee.body.options ?? []).map((o: any) => `${o.value} ${o.token?.symbol}`) };
  progress(`FeeOptions for a DUSD transfer: sponsored ${feeOptions.sponsored}, options ${feeOptions.options.join(', ') || 'none'}`);
  if (feeOptions.sponsored !== true) throw new Error('dev does not sponsor a DUSD transfer of a new wallet out of the box: the bench would need fees (not built)');

  const project = await projectId(dev);
  const phaseA = await deployWallets(dev, heads, users);

  const bursts: Record<string, unknown> = {};
  const headline: Record<string, unknown> = {};
  for (const [k, concurrency] of CONCURRENCIES.entries()) {
    const first = BigInt(1 + k * PER_WALLET);
    const slots = Array.from({ length: BURST }, (_, j) => ({ user: users[j % WALLETS], space: first + BigInt(Math.floor(j / WALLETS)), n: 0n }));
    const jobs = await signJobs(dev.chainId, dev.token, slots);
    progress(`burst ${k + 1}: ${jobs.length} bundles signed (spaces ${first}..${first + BigInt(PER_WALLET - 1)})`);
    const ping = await pingBaseline(dev, concurrency, BURST);
    progress(`ping @${concurrency}: ${ping.rps} req/s, ${ping.cpuPerRequest.devAndAnvilMs} ms CPU (dev + anvil) per Ping`);
    const b = await burst(dev, heads, project, jobs, concurrency);
    const key = `concurrency${concurrency}`;
    bursts[key] = { ping, ...b };
    headline[key] = {
      sendMetaTxnAcceptedPerSec: b.intake.acceptedPerSec,
      pingPerSec: ping.rps,
      sendOverPing: round3(b.intake.acceptedPerSec / ping.rps),
      sendLatencyMs: { p50: b.intake.latencyMs.p50, p95: b.intake.latencyMs.p95 },
      pingLatencyMs: { p50: ping.latencyMs.p50, p95: ping.latencyMs.p95 },
      blocksToSucceeded: { p50: b.blocksToSucceeded.p50, p95: b.blocksToSucceeded.p95, max: b.blocksToSucceeded.max },
      blocksToReportedSucceeded: { p50: b.blocksToReportedSucceeded.p50, p95: b.blocksToReportedSucceeded.p95, max: b.blocksToReportedSucceeded.max },
      blocksQueued: { p50: b.blocksQueued.p50, max: b.blocksQueued.max },
      blocksFromBroadcast: { p50: b.blocksFromBroadcast.p50, max: b.blocksFromBroadcast.max },
      msQueuedToSent: { p50: b.msQueuedToSent.p50, max: b.msQueuedToSent.max },
      dispatchPasses: b.dispatch.passes,
      transactions: b.dispatch.transactions,
      succeeded: `${b.statuses.SUCCEEDED ?? 0}/${jobs.length}`,
      tokensArrived: `${b.recipientReceived}/${jobs.length}`,
      allSucceeded: b.allSucceeded,
      cpuMsPerSendWhileSending: b.cpu.perRequestWhileSending,
      cpuMsPerPing: ping.cpuPerRequest,
      cpuMsPerMetaTxnToLastReceipt: b.cpu.perMetaTxnToLastReceipt,
      machineBusyShareWhileSending: b.cpu.machinePerRequestWhileSending.machineBusyShare,
      devEventLoopLagMsWhileSending: b.devEventLoopLagMs.whileSending,
      blockIntervalMs: b.blockIntervalMs,
    };
  }

  return {
    bench: 'relayer-dev-burst',
    issue: 36,
    command: benchCommand(),
    what: `metarelay dev (npm start) through its binary: ${DEV_PG ? 'PostgreSQL (BENCH_DEV_PG=1, a diagnostic: npm start runs PGlite)' : 'embedded PGlite'}, its own anvil (1 s blocks), dispatcher in process; sponsored by the dev project`,
    database: DEV_PG ? 'postgres' : 'pglite',
    burst: BURST,
    wallets: WALLETS,
    concurrencies: CONCURRENCIES,
    feeOptions,
    machine: { ...machineInfo(), loadavgAtStart },
    allSucceeded: Object.values(headline).every((h) => (h as { allSucceeded: boolean }).allSucceeded),
    summary: headline,
    phaseA: { ...phaseA, ids: undefined },
    bursts,
  };
});
