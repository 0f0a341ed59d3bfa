// Refresh tasks: throughput of one task of N tokens (default 10 000) against a local origin, with
// 1 and 2 workers on PGlite and PostgreSQL; and the time from an ERC-4906 MetadataUpdate event to the
// new metadata being served, on anvil with 1-second blocks.
//
//   npx tsx bench/refresh-throughput.ts
//   BENCH_TOKENS=2000 BENCH_DBS=pglite BENCH_EVENT_SAMPLES=5 npx tsx bench/refresh-throughput.ts
//
// Knobs: BENCH_TOKENS (10000), BENCH_DBS (pglite,postgres), BENCH_ORIGIN_DELAY_MS (0: every document
// answered at once), BENCH_CLAIM_BATCH (the refresh.claimBatch default, 50), BENCH_EVENT_SAMPLES (10),
// BENCH_PG_URL (postgres://postgres@127.0.0.1:5432/postgres).
//
// Throughput: each configuration gets a fresh database. A first task resolves every token ("cold":
// nothing stored yet), then a second task of the same tokens refreshes them ("refresh": rows exist).
// The clock runs from the enqueue to the task's end; the workers are already polling. Two workers are
// two services on one PGlite (one process: PGlite cannot be shared between processes), and on
// PostgreSQL both two services in this process and this process plus a `metarelay worker` process.
// Every run checks that each document was fetched exactly once.
//
// Event latency: a watcher (confirmations 0, pollMs 100) and a worker run in the background; each
// sample changes the document at the origin, sends emitMetadataUpdate(1), and reads GetTokenMetadata
// every 25 ms until the new name is served. Latency in blocks is the head when it is served minus the
// event's block.
//
// Result JSON on stdout; progress on stderr.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { encodeDeployData, encodeFunctionData, getContractAddress, type Abi, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { parseConfig } from '../src/config/load.ts';
import type { AppConfigInput } from '../src/config/schema.ts';
import { ANVIL_DEPLOYER_KEY, REPO_ROOT, compileContracts, devPublicClient, devWalletClient, installMulticall3, rpcCall, startAnvil, type OriginServer } from '../src/devchain/index.ts';
import { buildApp } from '../src/cli/app.ts';
import { createServices, type Services } from '../src/services.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { Cleanup, envNumber, machineInfo, openBenchDb, progress, runBench, startChain, type BenchChain, type DbKind } from './lib/harness.ts';
import { summarize } from './support.ts';

const TOKENS = envNumber('BENCH_TOKENS', 10_000);
const ORIGIN_DELAY_MS = Number(process.env.BENCH_ORIGIN_DELAY_MS ?? 0);
const CLAIM_BATCH = envNumber('BENCH_CLAIM_BATCH', 50);
const EVENT_SAMPLES = envNumber('BENCH_EVENT_SAMPLES', 10);
const DBS = (process.env.BENCH_DBS ?? 'pglite,postgres')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean) as DbKind[];
for (const d of DBS) if (d !== 'pglite' && d !== 'postgres') throw new Error(`BENCH_DBS: unknown backend "${d}"`);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The refresh settings of every service in the throughput runs. */
const refreshConfig = { pollMs: 50, claimBatch: CLAIM_BATCH, coolOffSec: 0 };

function serviceConfig(location: string, rpcUrl: string, chainId: number, extra: Partial<AppConfigInput> = {}): AppConfigInput {
  return {
    database: location,
    chains: [{ chainId, name: 'anvil', rpcUrls: [rpcUrl], watch: false }],
    allowPrivateNetworks: true,
    logLevel: 'silent',
    refresh: refreshConfig,
    ...extra,
  };
}

/** Items this process's worker settled. */
async function settledBy(s: Services): Promise<number> {
  return (await s.metrics.refreshItems.get()).values.reduce((n, v) => n + v.value, 0);
}

/** `metarelay worker` in a child process on the same database; resolves once its worker runs. */
async function workerProcess(cfg: AppConfigInput, cleanup: Cleanup): Promise<ChildProcess> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'metarelay-bench-worker-'));
  const file = path.join(dir, 'metarelay.json');
  writeFileSync(file, JSON.stringify({ ...cfg, logLevel: 'info' }));
  const child = spawn(process.execPath, [path.join(REPO_ROOT, 'bin/metarelay.mjs'), 'worker', '--config', file], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  cleanup.add('stop worker process', async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker process did not start:\n${out}`)), 30_000);
    const onData = (d: Buffer) => {
      out += d.toString();
      if (/refresh worker started/.test(out)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`worker process exited (${code}):\n${out}`)));
  });
  return child;
}

interface Phase {
  seconds: number;
  tokensPerSec: number;
  /** Documents fetched more than once in this phase (0 means every token exactly once). */
  duplicateFetches: number;
  failed: number;
}

interface ThroughputRun {
  db: DbKind;
  workers: number;
  layout: string;
  cold: Phase;
  refresh: Phase;
  /** Items settled by each worker over both phases (the process worker's share is the rest). */
  itemsPerWorker: number[];
}

async function throughputRun(chain: BenchChain, contract: Address, ids: string[], db: DbKind, workers: 1 | 2, layout: 'in-process' | 'process'): Promise<ThroughputRun> {
  const cleanup = new Cleanup();
  try {
    const bdb = await openBenchDb(db, cleanup);
    const cfgInput = serviceConfig(bdb.location, chain.anvil.rpcUrl, chain.anvil.chainId);
    const main = await createServices(parseConfig(cfgInput), { db: bdb.db, log: createLogger('silent'), migrate: false });
    cleanup.add('close services', () => main.close());
    const others: Services[] = [];
    if (workers === 2 && layout === 'in-process') {
      const s = await createServices(parseConfig(cfgInput), { db: bdb.db, log: createLogger('silent'), migrate: false });
      cleanup.add('close second services', () => s.close());
      others.push(s);
    }
    if (workers === 2 && layout === 'process') await workerProcess(cfgInput, cleanup);
    const project = await main.projects.create('bench');
    const client = main.chains.get(chain.anvil.chainId)!;
    main.startBackground();
    for (const s of others) s.startBackground();

    const phase = async (label: string): Promise<Phase> => {
      const before = ids.map((id) => chain.origin.requestCount(`/r/${id}`));
      const t0 = performance.now();
      const { taskId } = await main.refresh.enqueueTokens(project.id, client, contract, ids);
      main.worker.nudge();
      for (const s of others) s.worker.nudge();
      let last = 0;
      for (;;) {
        const t = (await main.tasks.get(taskId))!;
        if (t.status !== 'QUEUED') {
          const seconds = (performance.now() - t0) / 1000;
          const duplicateFetches = ids.reduce((n, id, i) => n + Math.max(0, chain.origin.requestCount(`/r/${id}`) - before[i] - 1), 0);
          const missing = ids.filter((id, i) => chain.origin.requestCount(`/r/${id}`) === before[i]).length;
          if (missing) throw new Error(`${label}: ${missing} documents never fetched`);
          if (t.status !== 'DONE' || t.succeeded !== ids.length) throw new Error(`${label}: task ended ${t.status} with ${t.succeeded}/${ids.length} succeeded (${t.last_error ?? ''})`);
          progress(`  ${label}: ${ids.length} tokens in ${seconds.toFixed(2)} s = ${Math.round(ids.length / seconds)} tokens/s${duplicateFetches ? `, ${duplicateFetches} duplicate fetches` : ''}`);
          return { seconds: Math.round(seconds * 1000) / 1000, tokensPerSec: Math.round(ids.length / seconds), duplicateFetches, failed: t.failed };
        }
        const done = t.succeeded + t.failed;
        if (done - last >= ids.length / 4) {
          last = done;
          progress(`  ${label}: ${done}/${ids.length}`);
        }
        await sleep(25);
      }
    };

    progress(`${db}, ${workers} worker(s) (${layout})`);
    const cold = await phase('cold');
    const refresh = await phase('refresh');
    const mine = [await settledBy(main), ...(await Promise.all(others.map(settledBy)))];
    const itemsPerWorker = layout === 'process' && workers === 2 ? [...mine, 2 * ids.length - mine[0]] : mine;
    return { db, workers, layout: workers === 1 ? 'one service' : layout === 'process' ? 'this process + a `metarelay worker` process' : 'two services in one process', cold, refresh, itemsPerWorker };
  } finally {
    await cleanup.run();
  }
}

interface LatencyRun {
  db: DbKind;
  samples: number;
  blockTimeSec: number;
  /** Head when the new name was first served, minus the block that holds the event. */
  blocks: { values: number[]; p50: number; max: number };
  /** From the event's receipt (seen by polling every 20 ms) to the new name being served. */
  fromMined: ReturnType<typeof summarize>;
  /** From sending the transaction to the new name being served. */
  fromSend: ReturnType<typeof summarize>;
}

async function eventLatency(db: DbKind, origin: OriginServer): Promise<LatencyRun> {
  const runCleanup = new Cleanup();
  try {
    const anvil = await startAnvil({ blockTime: 1 });
    runCleanup.add('anvil (1 s blocks)', () => anvil.stop());
    const artifacts = await compileContracts({ cacheDir: path.join(REPO_ROOT, 'node_modules/.cache/metarelay/solc') });
    await installMulticall3(anvil.rpcUrl, artifacts.Multicall3!.deployedBytecode);
    const account = privateKeyToAccount(ANVIL_DEPLOYER_KEY);
    const pub = devPublicClient(anvil.rpcUrl, anvil.chainId);
    const wallet = devWalletClient(anvil.rpcUrl, anvil.chainId, account);
    const art = artifacts.DevERC721!;
    const abi = art.abi as Abi;
    const prefix = `/lat-${db}/`;
    origin.setDocument(`${prefix}1`, { name: 'v0' });

    const nonce = await pub.getTransactionCount({ address: account.address });
    const contract = getContractAddress({ from: account.address, nonce: BigInt(nonce) });
    const deployHash = await wallet.sendTransaction({ data: encodeDeployData({ abi, bytecode: art.bytecode, args: ['Latency', 'LAT', `${origin.url}${prefix}`, ''] }), nonce });
    const mintHash = await wallet.writeContract({ address: contract, abi, functionName: 'mint', args: [account.address, 1n], nonce: nonce + 1, gas: 200_000n });
    await pub.waitForTransactionReceipt({ hash: deployHash, pollingInterval: 20 });
    await pub.waitForTransactionReceipt({ hash: mintHash, pollingInterval: 20 });

    const bdb = await openBenchDb(db, runCleanup);
    const config = parseConfig({
      database: bdb.location,
      chains: [{ chainId: anvil.chainId, name: 'anvil', rpcUrls: [anvil.rpcUrl], watch: true }],
      allowPrivateNetworks: true,
      logLevel: 'silent',
      watcher: { confirmations: 0, pollMs: 100 },
      refresh: { pollMs: 50 },
    });
    const services = await createServices(config, { db: bdb.db, log: createLogger('silent'), migrate: false });
    runCleanup.add('close services', () => services.close());
    const app = await buildApp(services);
    runCleanup.add('close app', () => app.close());
    const project = await services.projects.create('bench');
    const { key } = await services.accessKeys.create(project.id, 'bench');
    const read = async () => {
      const res = await app.inject({
        method: 'POST',
        url: '/rpc/Metadata/GetTokenMetadata',
        headers: { 'content-type': 'application/json', 'x-access-key': key },
        payload: JSON.stringify({ chainID: 'anvil', contractAddress: contract, tokenIDs: ['1'] }),
      });
      return (JSON.parse(res.body) as { tokenMetadata: Array<{ name: string }> }).tokenMetadata[0].name;
    };
    if ((await read()) !== 'v0') throw new Error('the token did not resolve');
    services.startBackground();
    // The watcher's first poll puts its cursor at the head; events from then on are acted upon.
    for (let i = 0; ; i++) {
      const r = await bdb.db.query('SELECT 1 FROM chain_cursors WHERE chain_id = $1', [anvil.chainId]);
      if (r.rows.length) break;
      if (i > 200) throw new Error('the watcher never started');
      await sleep(50);
    }

    progress(`event latency on ${db}: ${EVENT_SAMPLES} samples, 1-second blocks`);
    const blocks: number[] = [];
    const fromMined: number[] = [];
    const fromSend: number[] = [];
    for (let i = 1; i <= EVENT_SAMPLES; i++) {
      const want = `v${i}`;
      origin.setDocument(`${prefix}1`, { name: want });
      const sent = performance.now();
      const hash = await wallet.writeContract({ address: contract, abi, functionName: 'emitMetadataUpdate', args: [1n], gas: 100_000n });
      const receipt = await pub.waitForTransactionReceipt({ hash, pollingInterval: 20 });
      const mined = performance.now();
      for (;;) {
        if ((await read()) === want) break;
        if (performance.now() - mined > 60_000) throw new Error(`sample ${i}: not served after 60 s`);
        await sleep(25);
      }
      const served = performance.now();
      const head = await pub.getBlockNumber();
      blocks.push(Number(head - receipt.blockNumber));
      fromMined.push(served - mined);
      fromSend.push(served - sent);
      progress(`  sample ${i}: ${blocks.at(-1)} block(s), ${Math.round(served - mined)} ms after the receipt`);
    }
    const sorted = [...blocks].sort((a, b) => a - b);
    return {
      db,
      samples: EVENT_SAMPLES,
      blockTimeSec: 1,
      blocks: { values: blocks, p50: sorted[Math.floor(sorted.length / 2)], max: sorted[sorted.length - 1] },
      fromMined: summarize(fromMined),
      fromSend: summarize(fromSend),
    };
  } finally {
    await runCleanup.run();
  }
}

/** Sends signed transactions in one JSON-RPC batch; throws on the first refusal. */
async function sendRawBatch(rpcUrl: string, raws: Hex[]): Promise<void> {
  const res = await fetch(rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(raws.map((raw, i) => ({ jsonrpc: '2.0', id: i, method: 'eth_sendRawTransaction', params: [raw] }))),
  });
  const out = (await res.json()) as Array<{ result?: Hex; error?: { message: string } }>;
  const bad = out.find((r) => !r.result);
  if (bad) throw new Error(`eth_sendRawTransaction refused: ${bad.error?.message ?? 'no answer'}`);
}

/**
 * A DevERC721 with `ids` minted. Automine would make a block per mint (10 000 blocks are slow to
 * make), so mining is switched off while the mints go into the pool, then blocks are mined until
 * every mint is in, and automine is switched back on.
 */
async function mintMany(chain: BenchChain, baseUri: string, ids: string[]): Promise<Address> {
  const { anvil } = chain;
  const art = chain.artifacts.DevERC721!;
  const abi = art.abi as Abi;
  const account = privateKeyToAccount(ANVIL_DEPLOYER_KEY);
  const pub = devPublicClient(anvil.rpcUrl, anvil.chainId);
  const deployer = devWalletClient(anvil.rpcUrl, anvil.chainId, account);
  const deployHash = await deployer.deployContract({ abi, bytecode: art.bytecode, args: ['Refresh Bench', 'RB', baseUri, ''] });
  const { contractAddress } = await pub.waitForTransactionReceipt({ hash: deployHash, pollingInterval: 20 });
  const contract = contractAddress!.toLowerCase() as Address;
  const fees = await pub.estimateFeesPerGas();
  let nonce = await pub.getTransactionCount({ address: account.address, blockTag: 'pending' });
  // A generous fee cap: each full block raises the base fee by 12.5%.
  const common = { chainId: anvil.chainId, type: 'eip1559' as const, maxFeePerGas: fees.maxFeePerGas * 1000n, maxPriorityFeePerGas: fees.maxPriorityFeePerGas, gas: 120_000n };
  await rpcCall(anvil.rpcUrl, 'evm_setAutomine', [false]);
  try {
    for (let i = 0; i < ids.length; i += 500) {
      const raws = await Promise.all(
        ids
          .slice(i, i + 500)
          .map((id) => account.signTransaction({ ...common, to: contract, nonce: nonce++, data: encodeFunctionData({ abi, functionName: 'mint', args: [account.address, BigInt(id)] }) })),
      );
      await sendRawBatch(anvil.rpcUrl, raws);
    }
    for (let i = 0; ; i++) {
      const pool = await rpcCall<{ pending: Hex; queued: Hex }>(anvil.rpcUrl, 'txpool_status');
      if (BigInt(pool.pending) + BigInt(pool.queued) === 0n) break;
      if (i > 10_000) throw new Error('mints never left the pool');
      await rpcCall(anvil.rpcUrl, 'evm_mine', []);
    }
  } finally {
    await rpcCall(anvil.rpcUrl, 'evm_setAutomine', [true]);
  }
  const balance = (await pub.readContract({ address: contract, abi, functionName: 'balanceOf', args: [account.address] })) as bigint;
  if (balance !== BigInt(ids.length)) throw new Error(`minted ${balance} of ${ids.length} tokens`);
  return contract;
}

runBench(async (cleanup) => {
  const chain = await startChain(cleanup);
  const ids = Array.from({ length: TOKENS }, (_, i) => String(i + 1));
  for (const id of ids)
    chain.origin.setDocument(`/r/${id}`, { name: `Refresh #${id}`, image: `${chain.origin.url}/img/${id}.png`, attributes: [{ trait_type: 'n', value: Number(id) }] }, { delayMs: ORIGIN_DELAY_MS });
  const mintStarted = performance.now();
  const contract = await mintMany(chain, `${chain.origin.url}/r/`, ids);
  progress(`minted ${TOKENS} tokens in ${((performance.now() - mintStarted) / 1000).toFixed(1)} s`);

  const throughput: ThroughputRun[] = [];
  for (const db of DBS) {
    throughput.push(await throughputRun(chain, contract, ids, db, 1, 'in-process'));
    throughput.push(await throughputRun(chain, contract, ids, db, 2, 'in-process'));
    if (db === 'postgres') throughput.push(await throughputRun(chain, contract, ids, db, 2, 'process'));
  }

  const latency: LatencyRun[] = [];
  for (const db of DBS) latency.push(await eventLatency(db, chain.origin));

  return {
    bench: 'refresh-throughput',
    machine: machineInfo(),
    settings: { tokens: TOKENS, originDelayMs: ORIGIN_DELAY_MS, claimBatch: CLAIM_BATCH, fetchConcurrency: parseConfig({}).metadata.fetchConcurrency, workerPollMs: refreshConfig.pollMs },
    throughput,
    eventLatency: latency,
  };
});
