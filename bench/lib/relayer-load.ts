// Shared by the relayer's sustained, scale-out and soak benches (issue #19): wallets made ready on the
// chain before timing, bundles signed before timing, open- and closed-loop senders over HTTP, the
// stored rows, and samplers of the queue and of processes (CPU, RSS) over time.
import { readFileSync } from 'node:fs';
import { encodeFunctionData, toHex, type Address, type Hex } from 'viem';
import { mnemonicToAccount, privateKeyToAccount } from 'viem/accounts';
import { rpcCall } from '../../src/devchain/index.ts';
import { SEQUENCE_V2_CONTEXT } from '../../src/devchain/sequence.ts';
import type { Queryable } from '../../src/store/db.ts';
import { erc20 } from '../../test/support/relayer-env.ts';
import { newSigner, sequenceFactoryAbi, signedBundle, walletFor, type SequenceTestWallet, type SignedBundle } from '../../test/support/sequence-wallet.ts';
import { progress } from './harness.ts';
import { processCpuUs } from './processes.ts';
import { round3, type HeadWatch } from './relayer-bench.ts';

export const RECIPIENT: Address = '0x00000000000000000000000000000000000b0b00';
const ANVIL_MNEMONIC = 'test test test test test test test test test test test junk';

/** The private key of anvil's well-known account `i` (all hold 10 000 ETH). */
export function anvilKey(i: number): Hex {
  return toHex(mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: i }).getHdKey().privateKey!);
}

export interface User {
  key: Hex;
  wallet: SequenceTestWallet;
}

export function newUsers(n: number): User[] {
  return Array.from({ length: n }, () => {
    const s = newSigner();
    return { key: s.privateKey, wallet: walletFor(s.address) };
  });
}

/** Sends `calls` from anvil account `fromIndex` with explicit nonces, 200 per JSON-RPC batch; checks every receipt. */
export async function sendSetupCalls(rpcUrl: string, chainId: number, fromIndex: number, calls: Array<{ to: Address; data: Hex; gas: bigint }>) {
  const account = privateKeyToAccount(anvilKey(fromIndex));
  let nonce = Number(BigInt(await rpcCall<Hex>(rpcUrl, 'eth_getTransactionCount', [account.address, 'pending'])));
  const gasPrice = BigInt(await rpcCall<Hex>(rpcUrl, 'eth_gasPrice')) * 3n;
  const batch = async (method: string, params: unknown[][]) => {
    const res = await fetch(rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(params.map((p, id) => ({ jsonrpc: '2.0', id, method, params: p }))),
    });
    const out = (await res.json()) as Array<{ id: number; result?: any; error?: { message: string } }>;
    return out.sort((a, b) => a.id - b.id);
  };
  const hashes: Hex[] = [];
  for (let i = 0; i < calls.length; i += 200) {
    const raws = await Promise.all(calls.slice(i, i + 200).map((c) => account.signTransaction({ chainId, type: 'legacy', gasPrice, to: c.to, data: c.data, gas: c.gas, nonce: nonce++ })));
    for (const r of await batch(
      'eth_sendRawTransaction',
      raws.map((raw) => [raw]),
    )) {
      if (!r.result) throw new Error(`setup transaction refused: ${r.error?.message}`);
      hashes.push(r.result);
    }
  }
  // Automine can leave a transaction in the pool under load (see test/support/token-chain.ts): nudge.
  for (let i = 0; i < hashes.length; i += 200) {
    const slice = hashes.slice(i, i + 200);
    for (let tries = 0; ; tries++) {
      const receipts = await batch(
        'eth_getTransactionReceipt',
        slice.map((h) => [h]),
      );
      if (receipts.every((r) => r.result)) {
        const failed = receipts.filter((r) => r.result.status !== '0x1');
        if (failed.length) throw new Error(`${failed.length} setup transactions reverted`);
        break;
      }
      if (tries > 600) throw new Error('setup transactions not mined within 60 s');
      if (tries % 20 === 19) await rpcCall(rpcUrl, 'evm_mine').catch(() => undefined);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** Mints `amount` of the token to every wallet and deploys every wallet through the factory (setup, while anvil automines). */
export async function readyWallets(rpcUrl: string, chainId: number, token: Address, users: User[], amount = 1_000_000n) {
  const calls = users.flatMap((u) => [
    { to: token, data: encodeFunctionData({ abi: erc20, functionName: 'mint', args: [u.wallet.address, amount] }), gas: 100_000n },
    {
      to: SEQUENCE_V2_CONTEXT.factory,
      data: encodeFunctionData({ abi: sequenceFactoryAbi, functionName: 'deploy', args: [SEQUENCE_V2_CONTEXT.mainModule, u.wallet.imageHash] }),
      gas: 300_000n,
    },
  ]);
  await sendSetupCalls(rpcUrl, chainId, 9, calls);
  progress(`${users.length} wallets deployed, each holding ${amount} FUSD`);
}

export interface Job {
  i: number;
  user: User;
  space: bigint;
  n: bigint;
  bundle: SignedBundle;
}

const transferData = encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [RECIPIENT, 1n] });

/** Signs one sponsored ERC20 transfer (1 unit to RECIPIENT) per slot, for deployed wallets; logs progress. */
export async function signJobs(chainId: number, token: Address, slots: Array<{ user: User; space: bigint; n: bigint }>): Promise<Job[]> {
  const out: Job[] = [];
  let last = Date.now();
  for (const [i, s] of slots.entries()) {
    const bundle = await signedBundle({ signerKey: s.user.key, wallet: s.user.wallet, chainId, txs: [{ to: token, data: transferData }], nonce: { space: s.space, n: s.n }, deployed: true });
    out.push({ i, ...s, bundle });
    if (Date.now() - last > 5_000) {
      last = Date.now();
      progress(`signed ${out.length}/${slots.length}`);
    }
  }
  return out;
}

export const sendBody = (job: Job) => ({ call: { walletAddress: job.user.wallet.address, contract: job.bundle.entrypoint, input: job.bundle.input } });

export interface Answer {
  status: number;
  body: any;
}

/** POSTs a relayer webrpc method at `relayerUrl` (…/relayer/<chain>) over HTTP (fetch, keep-alive). */
export async function callRelayer(relayerUrl: string, accessKey: string, method: string, body: unknown, timeoutMs = 290_000): Promise<Answer> {
  const res = await fetch(`${relayerUrl}/rpc/Relayer/${method}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-access-key': accessKey },
    body: JSON.stringify(body),
    // Long by default: an open loop past the service's capacity queues requests; undici's own 300 s header limit applies too.
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = text;
  }
  return { status: res.status, body: parsed };
}

export interface Sample {
  job: Job;
  target: number;
  /** When it was due (open loop) and when it went out, ms since epoch. */
  dueAt: number;
  startedAt: number;
  answeredAt: number;
  headAtStart: number;
  headAtAnswer: number;
  ms: number;
  answer?: Answer;
  error?: string;
  /** The meta-transaction id SendMetaTxn answered (64 hex, no 0x), when accepted. */
  id?: string;
}

async function sendOne(job: Job, target: number, dueAt: number, heads: HeadWatch, send: (job: Job, target: number) => Promise<Answer>): Promise<Sample> {
  const startedAt = Date.now();
  const headAtStart = heads.head;
  const t0 = performance.now();
  let answer: Answer | undefined;
  let error: string | undefined;
  try {
    answer = await send(job, target);
  } catch (err) {
    error = (err as Error).message;
  }
  const id = answer?.status === 200 && answer.body?.txnHash ? String(answer.body.txnHash) : undefined;
  if (id && id !== job.bundle.id.slice(2).toLowerCase()) throw new Error(`SendMetaTxn answered id ${id} for bundle ${job.bundle.id}`);
  return { job, target, dueAt, startedAt, answeredAt: Date.now(), headAtStart, headAtAnswer: heads.head, ms: performance.now() - t0, answer, error, id };
}

/**
 * Open loop: job i is due at start + i / rate, whatever the answers so far (arrivals do not wait for the
 * service, as real clients do not). Targets are taken round-robin. `maxInFlight` only guards against
 * an unbounded pile of sockets; when it binds, requests go out late and `lateMs` says by how much.
 */
export async function openLoop(jobs: Job[], ratePerSec: number, targets: number, maxInFlight: number, heads: HeadWatch, send: (job: Job, target: number) => Promise<Answer>) {
  const samples: Sample[] = new Array(jobs.length);
  const start = Date.now() + 50;
  let inFlight = 0;
  let maxSeen = 0;
  const running: Promise<void>[] = [];
  for (let i = 0; i < jobs.length; i++) {
    const due = start + (i * 1000) / ratePerSec;
    for (;;) {
      const wait = due - Date.now();
      if (wait <= 0 && inFlight < maxInFlight) break;
      await new Promise((r) => setTimeout(r, Math.max(1, Math.min(wait, 5))));
    }
    inFlight++;
    maxSeen = Math.max(maxSeen, inFlight);
    running.push(
      sendOne(jobs[i], i % targets, due, heads, send).then((s) => {
        samples[i] = s;
        inFlight--;
      }),
    );
  }
  const lastIssuedAt = Date.now();
  await Promise.all(running);
  return { samples, start, lastIssuedAt, maxInFlightSeen: maxSeen };
}

/** Closed loop: `concurrency` requests in flight, targets round-robin by job index. */
export async function closedLoop(jobs: Job[], concurrency: number, targets: number, heads: HeadWatch, send: (job: Job, target: number) => Promise<Answer>) {
  const samples: Sample[] = new Array(jobs.length);
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const i = next++;
      samples[i] = await sendOne(jobs[i], i % targets, Date.now(), heads, send);
    }
  };
  const start = Date.now();
  await Promise.all(Array.from({ length: Math.min(concurrency, jobs.length) }, worker));
  return { samples, start, end: Date.now() };
}

/** Accepted/refused counts, the achieved rate (accepted per second, first out to last answer) and latency. */
export function intakeSummary(samples: Sample[]) {
  const ok = samples.filter((s) => s.id);
  const first = Math.min(...samples.map((s) => s.startedAt));
  const last = Math.max(...samples.map((s) => s.answeredAt));
  const refused: Record<string, number> = {};
  for (const s of samples) {
    if (s.id) continue;
    const key = s.error ? `error: ${s.error.slice(0, 120)}` : `HTTP ${s.answer?.status} ${String(s.answer?.body?.error ?? s.answer?.body?.msg ?? '').slice(0, 120)}`;
    refused[key] = (refused[key] ?? 0) + 1;
  }
  return {
    requests: samples.length,
    accepted: ok.length,
    refused,
    wallMs: last - first,
    acceptedPerSec: round3((ok.length / (last - first)) * 1000),
    latencyMs: distOf(samples.map((s) => s.ms)),
  };
}

// ---------------------------------------------------------------------------------------------------
// Stored rows (ground truth of what the relayer recorded; the chain is checked separately)

export interface MetaRow {
  id: string;
  status: string;
  wallet: string;
  block_number: number | null;
  sender: string | null;
  txn_hash: string | null;
  txn_nonce: number | null;
  gas_used: bigint | null;
  gas_price: bigint | null;
  queued_at: number;
  sent_at: number | null;
  mined_at: number | null;
  attempts: number;
  revert_reason: string | null;
}

export async function metaRows(db: Queryable, chainId: number, ids: string[]): Promise<Map<string, MetaRow>> {
  const out = new Map<string, MetaRow>();
  for (let i = 0; i < ids.length; i += 2_000) {
    const r = await db.query<Record<string, any>>(
      `SELECT id, status, wallet, block_number, sender, txn_hash, txn_nonce, gas_used::text AS gas_used, gas_price::text AS gas_price,
              queued_at, sent_at, mined_at, attempts, revert_reason
         FROM meta_txns WHERE chain_id = $1 AND id = ANY($2)`,
      [chainId, ids.slice(i, i + 2_000)],
    );
    for (const x of r.rows) {
      const t = (v: unknown) => (v == null ? null : new Date(v as string).getTime());
      out.set(String(x.id), {
        id: String(x.id),
        status: String(x.status),
        wallet: String(x.wallet),
        block_number: x.block_number == null ? null : Number(x.block_number),
        sender: x.sender ?? null,
        txn_hash: x.txn_hash ?? null,
        txn_nonce: x.txn_nonce == null ? null : Number(x.txn_nonce),
        gas_used: x.gas_used == null ? null : BigInt(x.gas_used),
        gas_price: x.gas_price == null ? null : BigInt(x.gas_price),
        queued_at: t(x.queued_at)!,
        sent_at: t(x.sent_at),
        mined_at: t(x.mined_at),
        attempts: Number(x.attempts),
        revert_reason: x.revert_reason ?? null,
      });
    }
  }
  return out;
}

/** Blocks from SendMetaTxn to inclusion (receipt block − head when the request went out), and where they went. */
export function inclusion(samples: Sample[], rows: Map<string, MetaRow>, heads: HeadWatch) {
  const fromSend: number[] = [];
  const queued: number[] = [];
  const fromBroadcast: number[] = [];
  const statuses: Record<string, number> = {};
  for (const s of samples) {
    if (!s.id) continue;
    const row = rows.get(s.id);
    const st = row?.status ?? 'MISSING';
    statuses[st] = (statuses[st] ?? 0) + 1;
    if (!row || row.block_number == null) continue;
    fromSend.push(row.block_number - s.headAtStart);
    if (row.sent_at) {
      const h = heads.at(row.sent_at);
      queued.push(h - s.headAtAnswer);
      fromBroadcast.push(row.block_number - h);
    }
  }
  const hist: Record<string, number> = {};
  for (const v of fromSend) hist[String(v)] = (hist[String(v)] ?? 0) + 1;
  return { statuses, blocksToInclusion: { ...distOf(fromSend), histogram: hist }, blocksQueued: distOf(queued), blocksFromBroadcast: distOf(fromBroadcast) };
}

/** Broadcasts and inclusions per second over the span they happened in. */
export function dispatchRate(rowsIn: Iterable<MetaRow>) {
  // Once: a Map's values() iterator would be empty the second time round.
  const rows = [...rowsIn];
  const sent = [...rows].flatMap((r) => (r.sent_at ? [r.sent_at] : [])).sort((a, b) => a - b);
  const mined = [...rows].flatMap((r) => (r.mined_at ? [r.mined_at] : [])).sort((a, b) => a - b);
  const rate = (xs: number[]) => (xs.length > 1 ? round3(((xs.length - 1) / (xs[xs.length - 1] - xs[0])) * 1000) : null);
  return { broadcasts: sent.length, broadcastsPerSec: rate(sent), broadcastSpanMs: sent.length ? sent[sent.length - 1] - sent[0] : 0, recordedMined: mined.length, minedPerSec: rate(mined) };
}

export function distOf(values: number[]) {
  const s = [...values].sort((a, b) => a - b);
  if (!s.length) return { n: 0 };
  const p = (q: number) => s[Math.min(s.length - 1, Math.floor((q / 100) * s.length))];
  return { n: s.length, p50: round3(p(50)), p95: round3(p(95)), p99: round3(p(99)), max: round3(s[s.length - 1]), mean: round3(s.reduce((a, b) => a + b, 0) / s.length) };
}

/** Waits until none of `ids` is QUEUED/SENT/PENDING_PRECONDITION (or `limitMs`); logs every 5 s. */
export async function waitAllFinal(db: Queryable, chainId: number, ids: string[], label: string, limitMs: number) {
  const t0 = Date.now();
  let lastLog = 0;
  for (;;) {
    const r = await db.query<{ status: string; n: string }>('SELECT status, count(*)::text AS n FROM meta_txns WHERE chain_id = $1 AND id = ANY($2) GROUP BY status', [chainId, ids]);
    const by = Object.fromEntries(r.rows.map((x) => [x.status, Number(x.n)]));
    const open = (by.QUEUED ?? 0) + (by.SENT ?? 0) + (by.PENDING_PRECONDITION ?? 0) + (ids.length - Object.values(by).reduce((a, b) => a + b, 0));
    if (open === 0) return { settleMs: Date.now() - t0, timedOut: false, statuses: by };
    if (Date.now() - t0 > limitMs) {
      progress(`${label}: ${open} of ${ids.length} not final after ${limitMs / 1000} s`);
      return { settleMs: Date.now() - t0, timedOut: true, statuses: by };
    }
    if (Date.now() - lastLog > 5_000) {
      lastLog = Date.now();
      progress(`${label}: ${JSON.stringify(by)}`);
    }
    await new Promise((res) => setTimeout(res, 500));
  }
}

// ---------------------------------------------------------------------------------------------------
// Samplers

/** Every `everyMs`: how many meta-transactions of the chain are QUEUED and SENT (the relayer's backlog). */
export function sampleQueue(db: Queryable, chainId: number, everyMs = 1_000) {
  const samples: Array<{ t: number; queued: number; sent: number }> = [];
  let stopped = false;
  const t0 = Date.now();
  const loop = (async () => {
    while (!stopped) {
      const at = Date.now();
      try {
        const r = await db.query<{ status: string; n: string }>(`SELECT status, count(*)::text AS n FROM meta_txns WHERE chain_id = $1 AND status IN ('QUEUED', 'SENT') GROUP BY status`, [chainId]);
        const by = Object.fromEntries(r.rows.map((x) => [x.status, Number(x.n)]));
        samples.push({ t: Math.round((at - t0) / 100) / 10, queued: by.QUEUED ?? 0, sent: by.SENT ?? 0 });
      } catch {
        /* a database busy at shutdown: the next sample tells */
      }
      await new Promise((r) => setTimeout(r, Math.max(0, everyMs - (Date.now() - at))));
    }
  })();
  return {
    samples,
    async stop() {
      stopped = true;
      await loop;
      const q = samples.map((s) => s.queued);
      const sent = samples.map((s) => s.sent);
      return { everyMs, maxQueued: Math.max(0, ...q), maxSent: Math.max(0, ...sent), series: samples };
    },
  };
}

/** RSS of a process (kB → MB) from /proc/<pid>/status. */
export function processRssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Math.round(Number(m[1]) / 102.4) / 10 : NaN;
}

/** Every `everyMs`: CPU seconds used and RSS of each process (by name), from /proc. */
export function sampleProcesses(procs: Record<string, number>, everyMs = 1_000) {
  const series: Array<{ t: number; cpuS: Record<string, number>; rssMb: Record<string, number> }> = [];
  const t0 = Date.now();
  const take = () => {
    const cpuS: Record<string, number> = {};
    const rssMb: Record<string, number> = {};
    for (const [name, pid] of Object.entries(procs)) {
      try {
        cpuS[name] = round3(processCpuUs(pid) / 1e6);
        rssMb[name] = processRssMb(pid);
      } catch {
        /* exited */
      }
    }
    series.push({ t: Math.round((Date.now() - t0) / 100) / 10, cpuS, rssMb });
  };
  take();
  const timer = setInterval(take, everyMs);
  return {
    series,
    stop() {
      clearInterval(timer);
      take();
      const first = series[0];
      const last = series[series.length - 1];
      const wallS = last.t - first.t || 1;
      const perProcess: Record<string, unknown> = {};
      const late = series.filter((s) => s.t >= (first.t + last.t) / 2);
      for (const name of Object.keys(procs)) {
        const rss = series.map((s) => s.rssMb[name]).filter((x) => Number.isFinite(x));
        const cpu = (last.cpuS[name] ?? 0) - (first.cpuS[name] ?? 0);
        perProcess[name] = {
          pid: procs[name],
          cpuS: round3(cpu),
          // Share of one core over the window.
          cpuCores: round3(cpu / wallS),
          rssMb: {
            first: rss[0],
            last: rss[rss.length - 1],
            max: Math.max(...rss),
            slopeMbPerMin: round3(
              slope(
                series.map((s) => s.t),
                series.map((s) => s.rssMb[name]),
              ) * 60,
            ),
            // V8 grows its heap to the working set in the first minutes of a load; a leak keeps growing
            // after that, so the second half's slope is the one that says "flat" or not.
            slopeSecondHalfMbPerMin: round3(
              slope(
                late.map((s) => s.t),
                late.map((s) => s.rssMb[name]),
              ) * 60,
            ),
          },
        };
      }
      return { wallS: round3(wallS), perProcess };
    },
  };
}

/** Least-squares slope of y over x (pairs with a non-finite y are skipped). */
export function slope(xs: number[], ys: number[]): number {
  const pts = xs.map((x, i) => [x, ys[i]] as const).filter(([, y]) => Number.isFinite(y));
  if (pts.length < 2) return NaN;
  const mx = pts.reduce((a, [x]) => a + x, 0) / pts.length;
  const my = pts.reduce((a, [, y]) => a + y, 0) / pts.length;
  let num = 0;
  let den = 0;
  for (const [x, y] of pts) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den ? num / den : NaN;
}

/** `metarelay_chain_rpc_calls_total` by method, scraped from a process's /metrics (the serve processes). */
export async function scrapeChainRpcCalls(baseUrl: string, adminToken: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${baseUrl}/metrics`, { headers: { authorization: `Bearer ${adminToken}` } })).text();
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^metarelay_chain_rpc_calls_total\{([^}]*)\}\s+(\S+)/.exec(line);
    if (!m) continue;
    const method = /method="([^"]*)"/.exec(m[1])?.[1] ?? '?';
    out[method] = (out[method] ?? 0) + Number(m[2]);
  }
  return out;
}

export function diffCounts(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) if (v - (before[k] ?? 0)) out[k] = v - (before[k] ?? 0);
  return out;
}

export function perItem(counts: Record<string, number>, n: number) {
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  return {
    calls: total,
    perMetaTxn: round3(total / Math.max(1, n)),
    perMetaTxnByMethod: Object.fromEntries(
      Object.entries(counts)
        .sort((a, b) => b[1] - a[1])
        .map(([m, v]) => [m, round3(v / Math.max(1, n))]),
    ),
  };
}

/** The command line that reproduces this run: the BENCH_* and METARELAY_TEST_* settings, then the script. */
export function benchCommand(): string {
  const vars = Object.entries(process.env)
    .filter(([k]) => k.startsWith('BENCH_') || k.startsWith('METARELAY_TEST_'))
    .map(([k, v]) => `${k}=${v}`)
    .sort();
  const script = process.argv[1]?.replace(/^.*\/bench\//, 'bench/') ?? '';
  return [...vars, 'npx tsx', script].join(' ');
}
