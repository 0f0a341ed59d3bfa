// Issue #6: the relayer's dispatch engine (src/relayer/engine/dispatcher.ts + sweep.ts) on an anvil that mines
// a block every second.
//
//   METARELAY_TEST_DB=pglite   npx tsx bench/relayer-dispatch.ts
//   METARELAY_TEST_DB=postgres npx tsx bench/relayer-dispatch.ts     # 127.0.0.1:5432 (METARELAY_TEST_PG_URL)
//
// 1. Throughput (meta-transactions per second) with BENCH_SENDERS senders (1,4,16), each with relay
//    batching off and on (BENCH_BATCH: batchSize 1 and 8), BENCH_METATXNS (300) meta-transactions per
//    round, from BENCH_WALLETS (100) wallets deployed beforehand through the factory (outside timing),
//    every meta-transaction in its own nonce space (nonce 0), so no two depend on each other. Two rounds
//    per configuration (BENCH_MODES):
//      stream   SendMetaTxn over HTTP with BENCH_CONCURRENCY (16) requests in flight while the dispatcher
//               runs (as `metarelay serve` runs it): intake and dispatch together.
//      backlog  the dispatcher is stopped, every meta-transaction is accepted (QUEUED), then the
//               dispatcher is started: what the dispatch engine alone drains.
//    Figures: per second from the first SendMetaTxn to the block of the last inclusion (first seen by a
//    20 ms head poller), and dispatch-only from the first broadcast (relay_txs.broadcast_at) to the same;
//    gas used per meta-transaction from the receipts (a batch's gas shared by its members).
// 2. Blocks from SendMetaTxn to inclusion: receipt block − head when the request was issued (1 = the
//    next block), p50/p95/max, per round.
// 3. Base-fee ramp (BENCH_RAMP=0 skips it): a relayer with BENCH_RAMP_SENDERS (4) senders and batchSize
//    BENCH_RAMP_BATCH (1); a steady stream of BENCH_RAMP_RATE (5) SendMetaTxn per second while the base
//    fee is held at BENCH_RAMP_BASE_GWEI (1 gwei) for BENCH_RAMP_LEAD_BLOCKS (5) blocks, raised by
//    P % per block for B blocks (BENCH_RAMPS, a list of PxB: 25x10,100x6, each with its own relayer),
//    then held for BENCH_RAMP_HOLD_BLOCKS (15) blocks (anvil_setNextBlockBaseFeePerGas after every block, from a worker
//    thread). Figures: the share included within 3 blocks of the slot's first broadcast (receipt block −
//    head when first signed ≤ 3), replacements (slots with more than one attempt, and the relayer's
//    broadcasts_total{kind="replacement"}), blocks from SendMetaTxn p50/p95.
//
// Senders: anvil's test mnemonic "test … junk", accounts 1..N as explicit senderKeys (account 0 is the
// token chain's deployer, whose nonce test/support/token-chain.ts counts locally: the relayer must not use
// it), each given 10 000 ETH with anvil_setBalance (anvil funds only accounts 0..9). Each configuration
// gets its own relayer (test/support/relayer-env.ts: fresh database, a new fee token and sponsorship
// rule, pollMs BENCH_POLL_MS (50)) on the same anvil; wallets are deployed with automine, everything
// after that (each relayer's setup included) with a block every second.
// Every meta-transaction is one sponsored ERC20 transfer of 1 unit; all are signed before timing.
//
// Result JSON on stdout; progress on stderr. BENCH_THROUGHPUT=0 runs only the ramps. Other options: BENCH_SETTLE_S (120, how long to wait for
// final statuses), BENCH_WARMUP (8 meta-transactions per relayer, not measured).
import { encodeFunctionData, parseEther, type Address, type Hex } from 'viem';
import { mnemonicToAccount, privateKeyToAccount, generatePrivateKey } from 'viem/accounts';
import { deploySequenceV2Context, rpcCall, SEQUENCE_V2_CONTEXT } from '../src/devchain/index.ts';
import { FINAL_STATUSES } from '../src/relayer/store.ts';
import type { Services } from '../src/services.ts';
import { TEST_DB } from '../test/support/env.ts';
import { erc20, sponsor, startRelayerEnv, type RelayerEnv } from '../test/support/relayer-env.ts';
import { newSigner, sequenceFactoryAbi, signedBundle, walletFor, type SequenceTestWallet, type SignedBundle } from '../test/support/sequence-wallet.ts';
import { startTokenChain, type TokenChain } from '../test/support/token-chain.ts';
import { envNumber, machineInfo, progress, runBench } from './lib/harness.ts';
import { dist, histogram, HeadWatch, provideTestDbContext, round3, waitFinal, withLoopDelay } from './lib/relayer-bench.ts';

const list = (name: string, fallback: string) =>
  (process.env[name] ?? fallback)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
const numList = (name: string, fallback: string) =>
  list(name, fallback).map((s) => {
    const n = Number(s);
    if (!Number.isInteger(n) || n < 1) throw new Error(`${name}: "${s}" is not a positive integer`);
    return n;
  });

const METATXNS = envNumber('BENCH_METATXNS', 300);
const WALLETS = envNumber('BENCH_WALLETS', 100);
const SENDER_COUNTS = numList('BENCH_SENDERS', '1,4,16');
const BATCH_SIZES = numList('BENCH_BATCH', '1,8');
const MODES = list('BENCH_MODES', 'stream,backlog') as Array<'stream' | 'backlog'>;
for (const m of MODES) if (m !== 'stream' && m !== 'backlog') throw new Error(`BENCH_MODES: unknown mode "${m}"`);
const CONCURRENCY = envNumber('BENCH_CONCURRENCY', 16);
const SETTLE_MS = envNumber('BENCH_SETTLE_S', 120) * 1000;
const WARMUP = envNumber('BENCH_WARMUP', 8);
const POLL_MS = envNumber('BENCH_POLL_MS', 50);
const RAMP = process.env.BENCH_RAMP !== '0';
const THROUGHPUT = process.env.BENCH_THROUGHPUT !== '0';
const RAMP_SENDERS = envNumber('BENCH_RAMP_SENDERS', 4);
const RAMP_BATCH = envNumber('BENCH_RAMP_BATCH', 1);
const RAMP_RATE = envNumber('BENCH_RAMP_RATE', 5);
const RAMP_BASE_GWEI = envNumber('BENCH_RAMP_BASE_GWEI', 1);
/** percent-per-block x blocks, one ramp (own relayer) each. */
const RAMPS = list('BENCH_RAMPS', '25x10,100x6').map((r) => {
  const m = /^(\d+)x(\d+)$/.exec(r);
  if (!m) throw new Error(`BENCH_RAMPS: "${r}" is not <percent>x<blocks>`);
  return { percent: Number(m[1]), blocks: Number(m[2]) };
});
const RAMP_LEAD = envNumber('BENCH_RAMP_LEAD_BLOCKS', 5);
const RAMP_HOLD = envNumber('BENCH_RAMP_HOLD_BLOCKS', 15);
const RAMP_PRE = 3;
const BLOCK_TIME_S = 1;
const MNEMONIC = 'test test test test test test test test test test test junk';
const SENDER_BALANCE = parseEther('10000');
const MINTED = 1_000_000n;
const RECIPIENT: Address = '0x00000000000000000000000000000000000b0b00';
const INCLUDED_WITHIN = 3;

const hex = (n: bigint | number) => `0x${BigInt(n).toString(16)}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------------
// Senders and wallets

/** anvil mnemonic accounts 1..n (0 is the deployer the token chain helper uses). */
function senderKeys(n: number): Hex[] {
  return Array.from({ length: n }, (_, i) => {
    const pk = mnemonicToAccount(MNEMONIC, { addressIndex: i + 1 }).getHdKey().privateKey;
    if (!pk) throw new Error('no private key from the mnemonic');
    return `0x${Buffer.from(pk).toString('hex')}` as Hex;
  });
}

async function rpcBatch(url: string, calls: Array<{ method: string; params: unknown[] }>): Promise<unknown[]> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(calls.map((c, i) => ({ jsonrpc: '2.0', id: i, ...c }))),
    signal: AbortSignal.timeout(120_000),
  });
  const out = (await res.json()) as Array<{ id: number; result?: unknown; error?: { message: string } }>;
  const byId = new Map(out.map((r) => [r.id, r]));
  return calls.map((c, i) => {
    const r = byId.get(i);
    if (!r || r.error) throw new Error(`${c.method}: ${r?.error?.message ?? 'no answer'}`);
    return r.result;
  });
}

interface User {
  key: Hex;
  wallet: SequenceTestWallet;
}

/** Deploys every wallet through the factory (one transaction each, from a throwaway funded key). */
async function deployWallets(chain: TokenChain, users: User[]) {
  const url = chain.anvil.rpcUrl;
  const key = generatePrivateKey();
  const account = privateKeyToAccount(key);
  await rpcCall(url, 'anvil_setBalance', [account.address, hex(parseEther('1000'))]);
  const [gasPrice] = (await rpcBatch(url, [{ method: 'eth_gasPrice', params: [] }])) as Hex[];
  const raws: Hex[] = [];
  for (const [i, u] of users.entries()) {
    raws.push(
      await account.signTransaction({
        chainId: chain.anvil.chainId,
        type: 'eip1559',
        maxFeePerGas: BigInt(gasPrice) * 4n + 1_000_000_000n,
        maxPriorityFeePerGas: 1_000_000n,
        nonce: i,
        to: SEQUENCE_V2_CONTEXT.factory,
        data: encodeFunctionData({ abi: sequenceFactoryAbi, functionName: 'deploy', args: [SEQUENCE_V2_CONTEXT.mainModule, u.wallet.imageHash] }),
        gas: 200_000n,
      }),
    );
  }
  for (let i = 0; i < raws.length; i += 50)
    await rpcBatch(
      url,
      raws.slice(i, i + 50).map((r) => ({ method: 'eth_sendRawTransaction', params: [r] })),
    );
  for (let t = 0; ; t++) {
    const n = Number(BigInt((await rpcCall<Hex>(url, 'eth_getTransactionCount', [account.address, 'latest'])) ?? '0x0'));
    if (n >= raws.length) break;
    if (t > 600) throw new Error(`wallet deployments: ${n} of ${raws.length} mined`);
    await sleep(50);
  }
  const codes = (await rpcBatch(
    url,
    users.map((u) => ({ method: 'eth_getCode', params: [u.wallet.address, 'latest'] })),
  )) as Hex[];
  const missing = codes.filter((c) => !c || c === '0x').length;
  if (missing) throw new Error(`${missing} of ${users.length} wallets have no code after deployment`);
}

// ---------------------------------------------------------------------------------------------------
// Jobs: one signed bundle each, in its own nonce space

interface Job {
  user: User;
  space: bigint;
  bundle: SignedBundle;
}

let nextSpace = 1n;
const transferData = encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [RECIPIENT, 1n] });

/** `n` bundles round-robin over the wallets (consecutive ones are different wallets), fresh spaces. */
async function signJobs(env: RelayerEnv, users: User[], n: number): Promise<Job[]> {
  const base = nextSpace;
  nextSpace += BigInt(Math.ceil(n / users.length));
  const jobs: Job[] = [];
  for (let j = 0; j < n; j++) {
    const user = users[j % users.length];
    const space = base + BigInt(Math.floor(j / users.length));
    jobs.push({
      user,
      space,
      bundle: await signedBundle({ signerKey: user.key, wallet: user.wallet, chainId: env.chainId, txs: [{ to: env.token, data: transferData }], nonce: { space, n: 0n }, deployed: true }),
    });
  }
  return jobs;
}

interface Sample {
  job: Job;
  startedAt: number;
  headAtStart: number;
  answeredAt?: number;
  status?: number;
  id?: string;
  error?: string;
}

async function sendOne(env: RelayerEnv, heads: HeadWatch, job: Job): Promise<Sample> {
  const s: Sample = { job, startedAt: Date.now(), headAtStart: heads.head };
  try {
    const res = await fetch(`${env.relayerUrl}/rpc/Relayer/SendMetaTxn`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-access-key': env.accessKey },
      body: JSON.stringify({ call: { walletAddress: job.user.wallet.address, contract: job.bundle.entrypoint, input: job.bundle.input } }),
      signal: AbortSignal.timeout(60_000),
    });
    const text = await res.text();
    s.status = res.status;
    if (res.status === 200) s.id = String(JSON.parse(text).txnHash);
    else s.error = `HTTP ${res.status} ${text.slice(0, 300)}`;
  } catch (err) {
    s.error = (err as Error).message;
  }
  s.answeredAt = Date.now();
  return s;
}

/** Every job with `concurrency` requests in flight. */
async function drive(env: RelayerEnv, heads: HeadWatch, jobs: Job[], concurrency: number): Promise<{ samples: Sample[]; wallMs: number }> {
  const samples = new Array<Sample>(jobs.length);
  let next = 0;
  const t0 = Date.now();
  await Promise.all(
    Array.from({ length: Math.min(concurrency, jobs.length) }, async () => {
      while (next < jobs.length) {
        const i = next++;
        samples[i] = await sendOne(env, heads, jobs[i]);
      }
    }),
  );
  return { samples, wallMs: Date.now() - t0 };
}

/** One job every 1/rate s, whatever the answers take. */
async function paced(env: RelayerEnv, heads: HeadWatch, jobs: Job[], rate: number): Promise<{ samples: Sample[]; wallMs: number }> {
  const t0 = Date.now();
  const pending: Promise<Sample>[] = [];
  for (const [i, job] of jobs.entries()) {
    const due = t0 + (i * 1000) / rate;
    if (due > Date.now()) await sleep(due - Date.now());
    pending.push(sendOne(env, heads, job));
  }
  const samples = await Promise.all(pending);
  return { samples, wallMs: Date.now() - t0 };
}

// ---------------------------------------------------------------------------------------------------
// Reading back what happened

interface MetaRow {
  id: string;
  status: string;
  block_number: number | null;
  sender: string | null;
  txn_nonce: number | null;
  txn_hash: string | null;
  gas_used: number | null;
  batch_index: number | null;
  attempts: number;
  revert_reason: string | null;
  queued_at: number;
  sent_at: number | null;
}

async function metaRows(env: RelayerEnv, ids: string[]): Promise<Map<string, MetaRow>> {
  const r = await env.services.db.query<Record<string, unknown>>(
    `SELECT id, status, block_number, sender, txn_nonce, txn_hash, gas_used, batch_index, attempts, revert_reason, queued_at, sent_at
       FROM meta_txns WHERE chain_id = $1 AND id = ANY($2)`,
    [env.chainId, ids],
  );
  const num = (x: unknown) => (x == null ? null : Number(x));
  return new Map(
    r.rows.map((x) => [
      String(x.id),
      {
        id: String(x.id),
        status: String(x.status),
        block_number: num(x.block_number),
        sender: (x.sender as string | null) ?? null,
        txn_nonce: num(x.txn_nonce),
        txn_hash: (x.txn_hash as string | null) ?? null,
        gas_used: num(x.gas_used),
        batch_index: num(x.batch_index),
        attempts: Number(x.attempts),
        revert_reason: (x.revert_reason as string | null) ?? null,
        queued_at: new Date(x.queued_at as string).getTime(),
        sent_at: x.sent_at == null ? null : new Date(x.sent_at as string).getTime(),
      },
    ]),
  );
}

interface RelayTx {
  sender: string;
  nonce: number;
  hash: string;
  kind: string;
  status: string;
  broadcast_block: number | null;
  broadcast_at: number | null;
  created_at: number;
  mined_block: number | null;
  max_fee: string | null;
  error: string | null;
}

async function relayTxs(env: RelayerEnv): Promise<RelayTx[]> {
  const r = await env.services.db.query<Record<string, unknown>>(
    `SELECT sender, nonce, hash, kind, status, broadcast_block, broadcast_at, created_at, mined_block, max_fee::text AS max_fee, error
       FROM relay_txs WHERE chain_id = $1 ORDER BY id`,
    [env.chainId],
  );
  return r.rows.map((x) => ({
    sender: String(x.sender),
    nonce: Number(x.nonce),
    hash: String(x.hash),
    kind: String(x.kind),
    status: String(x.status),
    broadcast_block: x.broadcast_block == null ? null : Number(x.broadcast_block),
    broadcast_at: x.broadcast_at == null ? null : new Date(x.broadcast_at as string).getTime(),
    created_at: new Date(x.created_at as string).getTime(),
    mined_block: x.mined_block == null ? null : Number(x.mined_block),
    max_fee: (x.max_fee as string | null) ?? null,
    error: (x.error as string | null) ?? null,
  }));
}

/** Waits until every id has a final status, or the deadline. */
function settle(env: RelayerEnv, ids: string[], label: string) {
  return waitFinal(() => metaRows(env, ids), ids, label, SETTLE_MS);
}

async function broadcastsByKind(services: Services): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const v of (await services.metrics.relayBroadcasts.get()).values) out[String(v.labels.kind)] = (out[String(v.labels.kind)] ?? 0) + v.value;
  return out;
}

async function refusedByReason(services: Services): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const v of (await services.metrics.relayRefused.get()).values) out[String(v.labels.reason)] = (out[String(v.labels.reason)] ?? 0) + v.value;
  return out;
}

const diff = (a: Record<string, number>, b: Record<string, number>) => {
  const out: Record<string, number> = {};
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) if ((a[k] ?? 0) !== (b[k] ?? 0)) out[k] = (a[k] ?? 0) - (b[k] ?? 0);
  return out;
};

/**
 * Per sender: are the nonces this relayer mined contiguous, and does the chain's count end right after
 * the last one? (Anything else is a gap or a slot used outside the relayer.)
 */
async function nonceCheck(env: RelayerEnv, txs: RelayTx[]) {
  const bySender = new Map<string, number[]>();
  for (const t of txs) if (t.status === 'MINED' || t.status === 'CONFIRMED') bySender.set(t.sender, [...(bySender.get(t.sender) ?? []), t.nonce]);
  const problems: unknown[] = [];
  for (const [sender, ns] of bySender) {
    const s = [...new Set(ns)].sort((a, b) => a - b);
    const dupes = ns.length - s.length;
    const holes = s.length ? s[s.length - 1] - s[0] + 1 - s.length : 0;
    const chainCount = Number(BigInt(await rpcCall<Hex>(env.rpcUrl, 'eth_getTransactionCount', [sender, 'latest'])));
    if (dupes || holes || chainCount !== s[s.length - 1] + 1) problems.push({ sender, minedNonces: `${s[0]}..${s[s.length - 1]} (${s.length})`, twiceMined: dupes, holes, chainCount });
  }
  return { senders: bySender.size, ok: problems.length === 0, problems };
}

function countBy(xs: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of xs) out[x] = (out[x] ?? 0) + 1;
  return out;
}

/** Everything measured of one round's meta-transactions. */
async function analyse(_env: RelayerEnv, heads: HeadWatch, samples: Sample[], rows: Map<string, MetaRow>, txs: RelayTx[], opts: { dispatchStartedAt?: number; headAtDispatchStart?: number }) {
  await heads.refresh();
  const slots = new Map<string, RelayTx[]>();
  for (const t of txs) slots.set(`${t.sender}:${t.nonce}`, [...(slots.get(`${t.sender}:${t.nonce}`) ?? []), t]);
  const statuses: Record<string, number> = {};
  const fromSend: number[] = [];
  const fromBroadcast: number[] = [];
  const fromBroadcastSeen: number[] = [];
  const signedHeadLag: number[] = [];
  const queuedBlocks: number[] = [];
  const fromDispatchStart: number[] = [];
  const perBlock: Record<string, number> = {};
  const winners = new Map<string, { gas: number; members: number; batch: boolean }>();
  const mySlots = new Set<string>();
  const bad: unknown[] = [];
  let firstBroadcast = Infinity;
  let firstSigned = Infinity;
  let lastBlock = -1;
  for (const s of samples) {
    const row = s.id ? rows.get(s.id) : undefined;
    const status = row?.status ?? (s.id ? 'MISSING' : 'REFUSED');
    statuses[status] = (statuses[status] ?? 0) + 1;
    if (row?.status !== 'SUCCEEDED' || row.block_number == null) {
      bad.push({
        wallet: s.job.user.wallet.address,
        space: s.job.space.toString(),
        id: s.id,
        status,
        reason: row?.revert_reason ?? s.error,
        sender: row?.sender,
        txnNonce: row?.txn_nonce,
        txnHash: row?.txn_hash,
        attempts: row?.attempts,
      });
      continue;
    }
    const slotKey = `${row.sender}:${row.txn_nonce}`;
    mySlots.add(slotKey);
    const attempts = slots.get(slotKey) ?? [];
    const b = row.block_number;
    lastBlock = Math.max(lastBlock, b);
    perBlock[b] = (perBlock[b] ?? 0) + 1;
    fromSend.push(b - s.headAtStart);
    const firstBlock = Math.min(...attempts.map((a) => a.broadcast_block ?? Infinity));
    if (Number.isFinite(firstBlock)) {
      fromBroadcast.push(b - firstBlock);
      queuedBlocks.push(firstBlock - s.headAtStart);
    }
    const firstAt = Math.min(...attempts.map((a) => a.broadcast_at ?? Infinity));
    if (Number.isFinite(firstAt)) fromBroadcastSeen.push(b - heads.at(firstAt));
    for (const a of attempts) if (a.broadcast_block != null) signedHeadLag.push(heads.at(a.created_at) - a.broadcast_block);
    if (opts.headAtDispatchStart != null) fromDispatchStart.push(b - opts.headAtDispatchStart);
    for (const a of attempts) {
      if (a.broadcast_at != null) firstBroadcast = Math.min(firstBroadcast, a.broadcast_at);
      firstSigned = Math.min(firstSigned, a.created_at);
    }
    const w = winners.get(row.txn_hash!) ?? { gas: row.gas_used ?? 0, members: 0, batch: row.batch_index != null };
    w.members++;
    winners.set(row.txn_hash!, w);
  }
  const succeeded = statuses.SUCCEEDED ?? 0;
  const firstSend = Math.min(...samples.map((s) => s.startedAt));
  const lastSeen = lastBlock >= 0 ? heads.seenAt(lastBlock) : undefined;
  const perSec = (from: number) => (lastSeen && Number.isFinite(from) && lastSeen > from ? round3((succeeded / (lastSeen - from)) * 1000) : null);
  const totalGas = [...winners.values()].reduce((a, w) => a + w.gas, 0);
  const batches = [...winners.values()].filter((w) => w.batch);
  const singles = [...winners.values()].filter((w) => !w.batch);
  const attemptsPerSlot = [...mySlots].map((k) => (slots.get(k) ?? []).length);
  const blocksWithInclusions = Object.keys(perBlock).map(Number);
  return {
    metaTxns: samples.length,
    statuses,
    succeeded,
    throughput: {
      // Succeeded meta-transactions per second, first SendMetaTxn out → the last inclusion's block first seen.
      endToEndPerSec: perSec(firstSend),
      endToEndMs: lastSeen ? lastSeen - firstSend : null,
      // From the first broadcast of any of them (relay_txs.broadcast_at) → the same last block.
      dispatchOnlyPerSec: perSec(firstBroadcast),
      dispatchOnlyMs: lastSeen && Number.isFinite(firstBroadcast) ? lastSeen - firstBroadcast : null,
      // From when the dispatcher was started (backlog mode) → the same last block.
      ...(opts.dispatchStartedAt ? { fromDispatcherStartPerSec: perSec(opts.dispatchStartedAt), firstSignedAfterStartMs: firstSigned - opts.dispatchStartedAt } : {}),
      blocksWithInclusions: blocksWithInclusions.length,
      inclusionBlockSpan: blocksWithInclusions.length ? Math.max(...blocksWithInclusions) - Math.min(...blocksWithInclusions) + 1 : 0,
      mostInOneBlock: Math.max(0, ...Object.values(perBlock)),
      // Block → meta-transactions of this round included in it, over the span (0 = none of ours).
      inclusionsPerBlock: blocksWithInclusions.length
        ? Array.from({ length: Math.max(...blocksWithInclusions) - Math.min(...blocksWithInclusions) + 1 }, (_, i) => perBlock[Math.min(...blocksWithInclusions) + i] ?? 0).join(' ')
        : '',
    },
    // Receipt block − head when SendMetaTxn was issued (1 = the very next block).
    blocksFromSendMetaTxn: dist(fromSend),
    blocksFromSendHistogram: histogram(fromSend),
    // Head when first signed (relay_txs.broadcast_block, the dispatcher's last swept head) − head at
    // SendMetaTxn, and receipt block − that head.
    blocksQueued: dist(queuedBlocks),
    blocksFromFirstBroadcast: dist(fromBroadcast),
    // Receipt block − the head the poller had seen when the first broadcast was recorded (broadcast_at).
    blocksFromFirstBroadcastByClock: dist(fromBroadcastSeen),
    // Per attempt: the head the poller had seen when the row was written (created_at) − the head the
    // dispatcher recorded as broadcast_block. > 0: the dispatcher signed with a stale head.
    signedHeadLag: { ...dist(signedHeadLag), histogram: histogram(signedHeadLag) },
    ...(opts.headAtDispatchStart != null ? { blocksFromDispatcherStart: dist(fromDispatchStart) } : {}),
    gas: {
      relayTxs: winners.size,
      batchTxs: batches.length,
      singleTxs: singles.length,
      meanBatchMembers: batches.length ? round3(batches.reduce((a, w) => a + w.members, 0) / batches.length) : null,
      batchMembersHistogram: histogram(batches.map((w) => w.members)),
      // Sum of the mined relay transactions' gasUsed / meta-transactions they carried.
      perMetaTxn: succeeded ? Math.round(totalGas / succeeded) : null,
      perSingleTx: singles.length ? Math.round(singles.reduce((a, w) => a + w.gas, 0) / singles.length) : null,
      perBatchedMetaTxn: batches.length ? Math.round(batches.reduce((a, w) => a + w.gas, 0) / batches.reduce((a, w) => a + w.members, 0)) : null,
    },
    slots: {
      slots: mySlots.size,
      withReplacement: attemptsPerSlot.filter((n) => n > 1).length,
      attemptsHistogram: histogram(attemptsPerSlot),
      // Every relay_txs row of these slots by status: REPLACED = superseded by a later attempt that
      // was mined; FAILED = refused by the node (e.g. a replacement of an already mined nonce).
      attemptsByStatus: countBy([...mySlots].flatMap((k) => (slots.get(k) ?? []).map((a) => a.status))),
      failedAttemptErrors: countBy([...mySlots].flatMap((k) => (slots.get(k) ?? []).filter((a) => a.status === 'FAILED').map((a) => (a.error ?? '').split('\n')[0].slice(0, 80)))),
    },
    notSucceeded: bad.slice(0, 10),
    ...(process.env.BENCH_DUMP === '1'
      ? {
          // Every attempt of these slots: sender, nonce, kind, status, broadcast_block (engine), head by the
          // poller at created_at and at broadcast_at, mined block.
          attemptsDump: [...mySlots].flatMap((k) =>
            (slots.get(k) ?? []).map((a) =>
              [a.sender.slice(0, 8), a.nonce, a.kind, a.status, a.broadcast_block, heads.at(a.created_at), a.broadcast_at == null ? null : heads.at(a.broadcast_at), a.mined_block].join(' '),
            ),
          ),
        }
      : {}),
  };
}

// ---------------------------------------------------------------------------------------------------
// How long the dispatcher's two steps take: the once-per-head sweep, and the signing pass that runs
// every tick (wrapped from outside, on this instance only; nothing in src/ changes).

type Dispatcher = Services['dispatchers'][number];
const timings = new WeakMap<Dispatcher, { sweep: number[]; send: number[] }>();

function instrument(d: Dispatcher) {
  const t = { sweep: [] as number[], send: [] as number[] };
  timings.set(d, t);
  const sweeper = d.sweeper as unknown as { sweep(head: number): Promise<void> };
  const sweep = sweeper.sweep.bind(sweeper);
  sweeper.sweep = async (head: number) => {
    const t0 = performance.now();
    try {
      return await sweep(head);
    } finally {
      t.sweep.push(performance.now() - t0);
    }
  };
  const dd = d as unknown as { sendReady(): Promise<void> };
  const sendReady = dd.sendReady.bind(dd);
  dd.sendReady = async () => {
    const t0 = performance.now();
    try {
      return await sendReady();
    } finally {
      t.send.push(performance.now() - t0);
    }
  };
}

function takeTimings(d: Dispatcher) {
  const t = timings.get(d);
  if (!t) return undefined;
  const busy = t.send.filter((x) => x >= 5);
  const out = {
    sweeps: t.sweep.length,
    sweepMs: dist(t.sweep),
    // Signing passes that did something (>= 5 ms); the idle ones are a queue read.
    sendPasses: busy.length,
    sendPassMs: dist(busy),
  };
  t.sweep.length = 0;
  t.send.length = 0;
  return out;
}

// ---------------------------------------------------------------------------------------------------
// A relayer per configuration

async function withRelayer<T>(chain: TokenChain, heads: HeadWatch, users: User[], relayer: Record<string, unknown>, fn: (env: RelayerEnv) => Promise<T>): Promise<T> {
  const env = await startRelayerEnv({ chain, relayer: { senderKeys: [], pollMs: POLL_MS, ...relayer } as never });
  for (const d of env.services.dispatchers) instrument(d);
  try {
    await sponsor(env, 'CONTRACT', env.token);
    await env.chain.send(users.map((u) => ({ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [u.wallet.address, MINTED] })));
    const h0 = heads.head;
    await heads.waitFor(h0 + 2, 10_000);
    // Warm-up, not measured: JIT, caches, the first leases and sweeps.
    const warm = await signJobs(env, users, WARMUP);
    const sent = await drive(env, heads, warm, CONCURRENCY);
    const badWarm = sent.samples.filter((s) => !s.id);
    if (badWarm.length) throw new Error(`warm-up: ${badWarm.length} refused, e.g. ${badWarm[0].error}`);
    const w = await settle(
      env,
      sent.samples.map((s) => s.id!),
      'warm-up',
    );
    const notOk = [...w.rows.values()].filter((r) => r.status !== 'SUCCEEDED');
    if (notOk.length || w.rows.size !== warm.length) throw new Error(`warm-up: not all SUCCEEDED: ${JSON.stringify(notOk.map((r) => [r.status, r.revert_reason]))}`);
    return await fn(env);
  } finally {
    const closing = env.close();
    env.app.server.closeAllConnections();
    await closing;
  }
}

async function throughputRound(env: RelayerEnv, heads: HeadWatch, users: User[], mode: 'stream' | 'backlog', label: string) {
  const jobs = await signJobs(env, users, METATXNS);
  const dispatcher = env.services.dispatchers[0];
  const b0 = await broadcastsByKind(env.services);
  const r0 = await refusedByReason(env.services);
  takeTimings(dispatcher);
  let dispatchStartedAt: number | undefined;
  let headAtDispatchStart: number | undefined;
  let intake: { samples: Sample[]; wallMs: number };
  let loop: { p50: number; p99: number; max: number };
  if (mode === 'stream') {
    const { value, eventLoopDelayMs } = await withLoopDelay(() => drive(env, heads, jobs, CONCURRENCY));
    intake = value;
    loop = eventLoopDelayMs;
  } else {
    await dispatcher.stop();
    intake = await drive(env, heads, jobs, CONCURRENCY);
    // Start right after a new block, so the figure does not depend on where in the second it starts.
    await heads.waitFor(heads.head + 1);
    dispatchStartedAt = Date.now();
    headAtDispatchStart = heads.head;
    const { eventLoopDelayMs } = await withLoopDelay(async () => {
      dispatcher.start();
      await settleQuiet(env, intake.samples);
    });
    loop = eventLoopDelayMs;
  }
  const ok = intake.samples.filter((s) => s.id);
  progress(`${label}: ${ok.length}/${jobs.length} accepted in ${intake.wallMs} ms`);
  const ids = ok.map((s) => s.id!);
  const settled = await settle(env, ids, label);
  const txs = await relayTxs(env);
  const a = await analyse(env, heads, intake.samples, settled.rows, txs, { dispatchStartedAt, headAtDispatchStart });
  progress(
    `${label}: ${a.succeeded}/${jobs.length} SUCCEEDED, e2e ${a.throughput.endToEndPerSec}/s, dispatch-only ${a.throughput.dispatchOnlyPerSec}/s, blocks p50 ${a.blocksFromSendMetaTxn.p50} p95 ${a.blocksFromSendMetaTxn.p95} max ${a.blocksFromSendMetaTxn.max}, gas/meta ${a.gas.perMetaTxn}`,
  );
  return {
    mode,
    intake: {
      accepted: ok.length,
      refused: jobs.length - ok.length,
      refusals: intake.samples
        .filter((s) => !s.id)
        .slice(0, 5)
        .map((s) => s.error),
      wallMs: intake.wallMs,
      perSec: round3((ok.length / intake.wallMs) * 1000),
      latencyMs: dist(intake.samples.map((s) => (s.answeredAt ?? s.startedAt) - s.startedAt)),
    },
    ...a,
    broadcasts: diff(await broadcastsByKind(env.services), b0),
    refused: diff(await refusedByReason(env.services), r0),
    settleMsAfterIntake: settled.settleMs,
    timedOut: settled.timedOut,
    eventLoopDelayMs: loop,
    dispatcherSteps: takeTimings(dispatcher),
  };
}

/** Waits (without logging) until the accepted ones are all final or the deadline passes. */
async function settleQuiet(env: RelayerEnv, samples: Sample[]) {
  const ids = samples.flatMap((s) => (s.id ? [s.id] : []));
  const t0 = Date.now();
  while (Date.now() - t0 < SETTLE_MS) {
    const rows = await metaRows(env, ids);
    if (ids.every((id) => FINAL_STATUSES.has(rows.get(id)?.status ?? ''))) return;
    await sleep(200);
  }
}

async function rampRound(env: RelayerEnv, heads: HeadWatch, users: User[], RAMP_PERCENT: number, RAMP_BLOCKS: number) {
  const gwei = BigInt(Math.round(RAMP_BASE_GWEI * 1e9));
  const schedule: bigint[] = [];
  // PRE blocks at the starting base fee before the stream starts, so the fee history the relayer
  // prices from already shows it (the base fee of an idle anvil has decayed to a few wei).
  for (let i = 0; i < RAMP_PRE + RAMP_LEAD; i++) schedule.push(gwei);
  let fee = gwei;
  for (let i = 0; i < RAMP_BLOCKS; i++) {
    fee = (fee * BigInt(100 + RAMP_PERCENT)) / 100n;
    schedule.push(fee);
  }
  // The last value is held by the worker for as long as the schedule is set.
  const blocks = RAMP_LEAD + RAMP_BLOCKS + RAMP_HOLD;
  const n = Math.round(blocks * BLOCK_TIME_S * RAMP_RATE);
  const jobs = await signJobs(env, users, n);
  const b0 = await broadcastsByKind(env.services);
  const r0 = await refusedByReason(env.services);
  takeTimings(env.services.dispatchers[0]);
  const baseFeeBefore = BigInt(((await rpcCall<{ baseFeePerGas: Hex }>(env.rpcUrl, 'eth_getBlockByNumber', ['latest', false])) as { baseFeePerGas: Hex }).baseFeePerGas);
  await heads.setBaseFees(schedule.map(String));
  const startHead = heads.head;
  // The first set base fee applies to block startHead + 2 (set after startHead + 1 is seen).
  await heads.waitFor(startHead + 1);
  const firstSetBlock = heads.head + 1 + RAMP_PRE;
  await heads.waitFor(firstSetBlock - 1);
  progress(
    `ramp: base fee ${RAMP_BASE_GWEI} gwei from block ${firstSetBlock}, +${RAMP_PERCENT}%/block from block ${firstSetBlock + RAMP_LEAD} for ${RAMP_BLOCKS} blocks, then held; ${n} meta-transactions at ${RAMP_RATE}/s`,
  );
  const { value: intake, eventLoopDelayMs } = await withLoopDelay(() => paced(env, heads, jobs, RAMP_RATE));
  const ok = intake.samples.filter((s) => s.id);
  progress(`ramp: ${ok.length}/${jobs.length} accepted in ${intake.wallMs} ms`);
  const settled = await settle(
    env,
    ok.map((s) => s.id!),
    'ramp',
  ).finally(async () => {
    // Back to the base fee from before the ramp, so setup transactions priced at today's fees (the token
    // chain helper's are fixed at its start) are accepted again.
    await heads.setBaseFees(null);
    await rpcCall(env.rpcUrl, 'anvil_setNextBlockBaseFeePerGas', [hex(baseFeeBefore)]);
    await heads.waitFor(heads.head + 2);
  });
  const txs = await relayTxs(env);
  const a = await analyse(env, heads, intake.samples, settled.rows, txs, {});
  // Per meta-transaction: included within INCLUDED_WITHIN blocks of its slot's first broadcast?
  const slots = new Map<string, RelayTx[]>();
  for (const t of txs) slots.set(`${t.sender}:${t.nonce}`, [...(slots.get(`${t.sender}:${t.nonce}`) ?? []), t]);
  let within = 0;
  let counted = 0;
  const byPhase: Record<string, { n: number; within: number; fromBroadcast: number[]; replaced: number }> = {};
  const lastBlock = Math.max(...[...settled.rows.values()].map((r) => r.block_number ?? 0));
  for (const s of ok) {
    const row = settled.rows.get(s.id!);
    const phase = s.headAtStart + 1 < firstSetBlock + RAMP_LEAD ? 'lead' : s.headAtStart + 1 < firstSetBlock + RAMP_LEAD + RAMP_BLOCKS ? 'ramp' : 'hold';
    const p = (byPhase[phase] ??= { n: 0, within: 0, fromBroadcast: [], replaced: 0 });
    p.n++;
    counted++;
    if (!row || row.block_number == null || row.status !== 'SUCCEEDED') continue;
    const attempts = slots.get(`${row.sender}:${row.txn_nonce}`) ?? [];
    const first = Math.min(...attempts.map((t) => t.broadcast_block ?? Infinity));
    const d = row.block_number - first;
    p.fromBroadcast.push(d);
    if (attempts.length > 1) p.replaced++;
    if (d <= INCLUDED_WITHIN) {
      within++;
      p.within++;
    }
  }
  // The chain as it was: base fee and how many of our transactions each block carried.
  const span = Array.from({ length: Math.max(0, lastBlock - startHead + 1) }, (_, i) => startHead + i);
  const gweiOf = (wei: string | null) => (wei == null ? null : round3(Number(BigInt(wei)) / 1e9));
  const minFee = (xs: RelayTx[]) =>
    xs.length
      ? gweiOf(
          xs
            .map((t) => BigInt(t.max_fee ?? '0'))
            .reduce((x, y) => (y < x ? y : x))
            .toString(),
        )
      : null;
  const blockInfo = (await rpcBatch(
    env.rpcUrl,
    span.map((b) => ({ method: 'eth_getBlockByNumber', params: [hex(b), false] })),
  )) as Array<{ baseFeePerGas: Hex; transactions: Hex[]; gasUsed: Hex }>;
  const perSlot = new Map<string, number>();
  for (const t of txs.filter((x) => x.kind !== 'filler')) perSlot.set(`${t.sender}:${t.nonce}`, (perSlot.get(`${t.sender}:${t.nonce}`) ?? 0) + 1);
  const result = {
    settings: {
      senders: RAMP_SENDERS,
      batchSize: RAMP_BATCH,
      ratePerSec: RAMP_RATE,
      baseFeeGwei: RAMP_BASE_GWEI,
      leadBlocks: RAMP_LEAD,
      rampPercentPerBlock: RAMP_PERCENT,
      rampBlocks: RAMP_BLOCKS,
      holdBlocks: RAMP_HOLD,
      heldBaseFeeGwei: Number(fee) / 1e9,
      leadFirstBlock: firstSetBlock,
      includedWithinBlocks: INCLUDED_WITHIN,
    },
    includedWithin3BlocksOfFirstBroadcast: { share: counted ? round3(within / counted) : null, within, of: counted },
    // Slots (sender, nonce) of these meta-transactions with more than one signed attempt (relay_txs rows).
    slotsWithReplacement: a.slots.withReplacement,
    // The same over every slot of this relayer (warm-up and fillers' neighbours included).
    allSlotsWithReplacement: [...perSlot.values()].filter((x) => x > 1).length,
    replacementAttempts: [...perSlot.values()].reduce((x, y) => x + Math.max(0, y - 1), 0),
    broadcasts: diff(await broadcastsByKind(env.services), b0),
    refused: diff(await refusedByReason(env.services), r0),
    byPhaseOfSend: Object.fromEntries(
      Object.entries(byPhase).map(([k, v]) => [k, { n: v.n, includedWithin3: v.within, share: round3(v.within / v.n), slotsReplaced: v.replaced, blocksFromFirstBroadcast: dist(v.fromBroadcast) }]),
    ),
    intake: {
      accepted: ok.length,
      refused: jobs.length - ok.length,
      refusals: intake.samples
        .filter((s) => !s.id)
        .slice(0, 5)
        .map((s) => s.error),
      wallMs: intake.wallMs,
    },
    ...a,
    stalled: txs.filter((t) => t.status === 'PENDING').length,
    failedAttempts: txs
      .filter((t) => t.status === 'FAILED')
      .slice(0, 10)
      .map((t) => ({ sender: t.sender, nonce: t.nonce, kind: t.kind, error: t.error })),
    chain: span.map((b, i) => ({
      block: b,
      baseFeeGwei: round3(Number(BigInt(blockInfo[i].baseFeePerGas)) / 1e9),
      txs: blockInfo[i].transactions.length,
      gasUsed: Number(BigInt(blockInfo[i].gasUsed)),
      // The lowest max fee per gas among our transactions mined in it, and among those signed at this head.
      minedMinMaxFeeGwei: minFee(txs.filter((t) => t.mined_block === b && (t.status === 'MINED' || t.status === 'CONFIRMED'))),
      signedHere: txs.filter((t) => t.broadcast_block === b).length,
      signedMinMaxFeeGwei: minFee(txs.filter((t) => t.broadcast_block === b)),
    })),
    timedOut: settled.timedOut,
    eventLoopDelayMs,
    dispatcherSteps: takeTimings(env.services.dispatchers[0]),
  };
  progress(`ramp: within ${INCLUDED_WITHIN} blocks ${within}/${counted}, replaced slots ${result.slotsWithReplacement}, broadcasts ${JSON.stringify(result.broadcasts)}`);
  return result;
}

// ---------------------------------------------------------------------------------------------------

runBench(async (cleanup) => {
  const loadavgAtStart = machineInfo().loadavg1m;
  const startedAt = new Date().toISOString();
  await provideTestDbContext(cleanup);
  const chain = await startTokenChain();
  cleanup.add('anvil', () => chain.stop());
  const maxSenders = Math.max(...SENDER_COUNTS, RAMP ? RAMP_SENDERS : 1);
  const keys = senderKeys(maxSenders);
  const senderAddresses = keys.map((k) => privateKeyToAccount(k).address);
  await rpcBatch(
    chain.anvil.rpcUrl,
    senderAddresses.map((a) => ({ method: 'anvil_setBalance', params: [a, hex(SENDER_BALANCE)] })),
  );
  const users: User[] = Array.from({ length: WALLETS }, () => {
    const s = newSigner();
    return { key: s.privateKey, wallet: walletFor(s.address) };
  });
  // The Sequence contracts first (startRelayerEnv would deploy them too; it skips what exists).
  await deploySequenceV2Context(chain.anvil.rpcUrl);
  await deployWallets(chain, users);
  progress(`anvil ${chain.anvil.rpcUrl}; ${WALLETS} wallets deployed; ${maxSenders} senders funded; database ${TEST_DB}`);
  // From here on anvil mines a block every second, also while each relayer is set up: the token chain
  // helper waits for receipts with viem's waitForTransactionReceipt, which on an automining anvil can
  // miss a receipt when no later block comes (seen once: a 60 s timeout on a mint mined at once).
  await rpcCall(chain.anvil.rpcUrl, 'evm_setAutomine', [false]);
  await rpcCall(chain.anvil.rpcUrl, 'evm_setIntervalMining', [BLOCK_TIME_S]);
  const heads = new HeadWatch(chain.anvil.rpcUrl);
  cleanup.add('head watch', () => heads.stop());
  await heads.ready();

  const configs: Array<Record<string, unknown>> = [];
  for (const senders of THROUGHPUT ? SENDER_COUNTS : []) {
    for (const batchSize of BATCH_SIZES) {
      const label = `senders=${senders} batch=${batchSize}`;
      progress(`${label}: starting relayer`);
      try {
        const rounds = await withRelayer(chain, heads, users, { senderKeys: keys.slice(0, senders), batchSize }, async (env) => {
          const out: Record<string, unknown> = {};
          for (const mode of MODES) out[mode] = await throughputRound(env, heads, users, mode, `${label} ${mode}`);
          out.nonces = await nonceCheck(env, await relayTxs(env));
          return out;
        });
        configs.push({ senders, batchSize, ...rounds });
      } catch (err) {
        progress(`${label}: failed: ${(err as Error).stack ?? err}`);
        configs.push({ senders, batchSize, error: String((err as Error).message ?? err).slice(0, 2000), nonces: { ok: null } });
      }
    }
  }

  const ramps: Array<Record<string, any>> = [];
  for (const { percent, blocks } of RAMP ? RAMPS : []) {
    progress(`ramp ${percent}%x${blocks}: starting relayer (senders=${RAMP_SENDERS} batch=${RAMP_BATCH})`);
    try {
      ramps.push(
        await withRelayer(chain, heads, users, { senderKeys: keys.slice(0, RAMP_SENDERS), batchSize: RAMP_BATCH }, async (env) => {
          const r = await rampRound(env, heads, users, percent, blocks);
          return { ...r, nonces: await nonceCheck(env, await relayTxs(env)) };
        }),
      );
    } catch (err) {
      progress(`ramp ${percent}%x${blocks}: failed: ${(err as Error).stack ?? err}`);
      ramps.push({ percent, blocks, error: String((err as Error).message ?? err).slice(0, 2000) });
    }
  }

  const pick = (c: Record<string, any>, mode: string) =>
    c[mode]?.throughput && {
      succeeded: `${c[mode].succeeded}/${c[mode].metaTxns}`,
      endToEndPerSec: c[mode].throughput.endToEndPerSec,
      dispatchOnlyPerSec: c[mode].throughput.dispatchOnlyPerSec,
      ...(mode === 'backlog' ? { fromDispatcherStartPerSec: c[mode].throughput.fromDispatcherStartPerSec, blocksToDrain: c[mode].blocksFromDispatcherStart?.max } : {}),
      inclusionBlocks: c[mode].throughput.blocksWithInclusions,
      mostInOneBlock: c[mode].throughput.mostInOneBlock,
      sweepMsP50Max: [c[mode].dispatcherSteps?.sweepMs.p50, c[mode].dispatcherSteps?.sweepMs.max],
      intakePerSec: c[mode].intake.perSec,
      blocksFromSendMetaTxn: { p50: c[mode].blocksFromSendMetaTxn.p50, p95: c[mode].blocksFromSendMetaTxn.p95, max: c[mode].blocksFromSendMetaTxn.max },
      gasPerMetaTxn: c[mode].gas.perMetaTxn,
      relayTxs: c[mode].gas.relayTxs,
      meanBatchMembers: c[mode].gas.meanBatchMembers,
      replacedSlots: c[mode].slots.withReplacement,
      attemptsByStatus: c[mode].slots.attemptsByStatus,
      broadcasts: c[mode].broadcasts,
      refused: c[mode].refused,
    };
  return {
    bench: 'relayer-dispatch',
    issue: 6,
    startedAt,
    db: TEST_DB,
    // Other processes on the (shared) machine move these figures: compare runs at similar load.
    machine: { ...machineInfo(), loadavgAtStart, loadavgAtEnd: machineInfo().loadavg1m },
    wallS: Math.round((Date.now() - Date.parse(startedAt)) / 1000),
    settings: {
      metaTxnsPerRound: METATXNS,
      wallets: WALLETS,
      layout: 'one nonce space per meta-transaction (nonce 0), round-robin over the wallets; wallets deployed via the factory beforehand',
      metaTxn: 'one sponsored ERC20 transfer (1 unit) per bundle, execute() on the deployed wallet',
      senderCounts: THROUGHPUT ? SENDER_COUNTS : [],
      batchSizes: BATCH_SIZES,
      modes: MODES,
      concurrency: CONCURRENCY,
      blockTimeS: BLOCK_TIME_S,
      senders: `anvil mnemonic accounts 1..N as senderKeys (${senderAddresses.length} funded with 10000 ETH)`,
      relayer: {
        pollMs: POLL_MS,
        receiptWaitMs: 3000,
        resubmitAfterBlocks: 3,
        replacementBumpPercent: 10,
        feeCapGwei: 500,
        confirmations: 3,
        maxInFlightPerSender: 64,
        minPriorityFeeGwei: 0.001,
        note: 'schema defaults except pollMs/receiptWaitMs (test env) and senderKeys/batchSize',
      },
      warmupPerRelayer: WARMUP,
      settleS: SETTLE_MS / 1000,
    },
    definitions: {
      endToEndPerSec:
        'succeeded meta-transactions / (block of the last inclusion, first seen by the 20 ms head poller − first SendMetaTxn issued); in backlog mode this includes the intake while the dispatcher was stopped',
      dispatchOnlyPerSec: 'succeeded / (same last block − first relay_txs.broadcast_at of the round); a round drained within one block gives a large, block-quantised figure',
      fromDispatcherStartPerSec: 'backlog mode: succeeded / (same last block − dispatcher start, which is right after a block)',
      blocksToDrain: 'backlog mode: last inclusion block − head when the dispatcher was started',
      blocksFromSendMetaTxn: 'receipt block − head when SendMetaTxn was issued (1 = the next block)',
      blocksFromFirstBroadcast: "receipt block − relay_txs.broadcast_block of the slot's first attempt (what the engine records as the head at signing)",
      blocksFromFirstBroadcastByClock: "receipt block − head the poller had seen at the first attempt's broadcast_at",
      signedHeadLag: 'per attempt: head seen by the poller at relay_txs.created_at − relay_txs.broadcast_block',
      gasPerMetaTxn: 'sum of gasUsed of the mined relay transactions / meta-transactions they carried',
      replacedSlots: '(sender, nonce) slots of the round with more than one relay_txs row',
      dispatcherSteps: 'wall time of Sweeper.sweep (once per head) and of Dispatcher.sendReady passes that took >= 5 ms, wrapped from the bench',
    },
    summary: {
      throughput: configs.map((c: Record<string, any>) => ({
        senders: c.senders,
        batchSize: c.batchSize,
        stream: pick(c, 'stream'),
        backlog: pick(c, 'backlog'),
        noncesOk: c.nonces?.ok,
        ...(c.error ? { error: c.error } : {}),
      })),
      baseFeeRamps: ramps.map((r) =>
        r.error
          ? r
          : {
              ramp: `+${r.settings.rampPercentPerBlock}%/block x ${r.settings.rampBlocks} blocks from ${r.settings.baseFeeGwei} gwei, held at ${r.settings.heldBaseFeeGwei} gwei for ${r.settings.holdBlocks}`,
              includedWithin3BlocksOfFirstBroadcast: r.includedWithin3BlocksOfFirstBroadcast,
              slotsWithReplacement: r.slotsWithReplacement,
              replacementBroadcasts: r.broadcasts.replacement ?? 0,
              blocksFromSendMetaTxn: { p50: r.blocksFromSendMetaTxn.p50, p95: r.blocksFromSendMetaTxn.p95, max: r.blocksFromSendMetaTxn.max },
              blocksFromFirstBroadcast: { p50: r.blocksFromFirstBroadcast.p50, p95: r.blocksFromFirstBroadcast.p95, max: r.blocksFromFirstBroadcast.max },
              succeeded: `${r.succeeded}/${r.metaTxns}`,
              noncesOk: r.nonces.ok,
            },
      ),
    },
    configs,
    ramps,
  };
});
