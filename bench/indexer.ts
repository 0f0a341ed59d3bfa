// The indexer (#17): backfill rate in transfer logs/s (one worker, then two sharing the ranges),
// storage per million transfers, and GetTokenBalances with includeMetadata for an account holding
// 1 000 tokens (p50/p99 through the official client over HTTP).
//
//   npx tsx bench/indexer.ts                     # PGlite in a temp folder
//   BENCH_DB=postgres npx tsx bench/indexer.ts
//   BENCH_TRANSFERS=200000 BENCH_REQUESTS=300
//   BENCH_READS_ONLY=1                           # one backfill, storage, plans and read latency only
//
// Result JSON on stdout; progress on stderr.
import { SequenceIndexer } from '@0xsequence/indexer';
import { encodeDeployData, encodeFunctionData, getContractAddress, type Abi, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { ANVIL_DEPLOYER_KEY, devPublicClient, erc721Document, erc721Path, rpcCall } from '../src/devchain/index.ts';
import { backfillStore, backfillWorkerFor } from '../src/indexer/index.ts';
import type { Db } from '../src/store/db.ts';
import { dbKindFromEnv, deployErc721WithTokens, envNumber, machineInfo, openBenchDb, progress, runBench, startChain, startMetarelay, type BenchChain, type Cleanup } from './lib/harness.ts';
import { summarize } from './support.ts';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const PER_TX = 1000;

/** Signs and sends spray transactions with explicit nonces, without waiting for them. */
async function sprayer(chain: BenchChain) {
  const art = chain.artifacts.TestTransferSpray!;
  const account = privateKeyToAccount(ANVIL_DEPLOYER_KEY);
  const client = devPublicClient(chain.anvil.rpcUrl, chain.anvil.chainId);
  const fees = await client.estimateFeesPerGas();
  let nonce = await client.getTransactionCount({ address: account.address, blockTag: 'pending' });
  const common = { chainId: chain.anvil.chainId, type: 'eip1559' as const, maxFeePerGas: fees.maxFeePerGas * 4n, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };
  const contract = getContractAddress({ from: account.address, nonce: BigInt(nonce) });
  const deploy = await account.signTransaction({ ...common, data: encodeDeployData({ abi: art.abi as Abi, bytecode: art.bytecode }), gas: 1_000_000n, nonce: nonce++ });
  await rpcCall(chain.anvil.rpcUrl, 'eth_sendRawTransaction', [deploy]);
  let seed = 1_000_000_000;
  return async (n: number): Promise<Hex> => {
    const data = encodeFunctionData({ abi: art.abi as Abi, functionName: 'spray', args: [BigInt(n), 10_000n, BigInt(seed++)] });
    const raw = await account.signTransaction({ ...common, to: contract, data, gas: 8_000_000n, nonce: nonce++ });
    return rpcCall<Hex>(chain.anvil.rpcUrl, 'eth_sendRawTransaction', [raw]);
  };
}

/** Emits `n` ERC20 Transfer logs, PER_TX per transaction (automine: one block each). */
async function sprayTransfers(chain: BenchChain, n: number): Promise<void> {
  const spray = await sprayer(chain);
  let last: Hex | undefined;
  for (let i = 0; i < n; i += PER_TX) {
    last = await spray(Math.min(PER_TX, n - i));
    if ((i / PER_TX) % 50 === 0) progress(`sprayed ${i + PER_TX}/${n} transfers`);
  }
  const client = devPublicClient(chain.anvil.rpcUrl, chain.anvil.chainId);
  const r = await client.waitForTransactionReceipt({ hash: last!, pollingInterval: 20, timeout: 120_000 });
  if (r.status !== 'success') throw new Error('spray reverted');
}

/**
 * Head lag: blocks every second (interval mining) carrying `rate` transfers each, while the head
 * follower runs (confirmations 0, pollMs 200); the lag (head − cursor) is sampled every 100 ms.
 */
async function headLag(chain: BenchChain, cleanup: Cleanup, rate: number, seconds: number) {
  const bdb = await openBenchDb(dbKindFromEnv(), cleanup);
  const head = BigInt(await rpcCall<Hex>(chain.anvil.rpcUrl, 'eth_blockNumber'));
  const svc = await startMetarelay(chain, bdb, cleanup, {
    config: {
      chains: [{ chainId: chain.anvil.chainId, name: 'anvil', rpcUrls: [chain.anvil.rpcUrl], watch: false, indexer: { scope: 'all', confirmations: 0, pollMs: 200, fromBlock: Number(head) + 1 } }],
    },
  });
  const ix = svc.services.indexers.get(chain.anvil.chainId)!;
  const spray = await sprayer(chain);
  await rpcCall(chain.anvil.rpcUrl, 'evm_setAutomine', [false]);
  await rpcCall(chain.anvil.rpcUrl, 'evm_setIntervalMining', [1]);
  ix.follower.start();
  const lags: number[] = [];
  const started = Date.now();
  let sent = 0;
  while (Date.now() - started < seconds * 1000) {
    // Paced by the clock: what is due by now is sent, about every 100 ms, spread over the block interval.
    const due = Math.floor((rate * (Date.now() - started)) / 1000) - sent;
    if (due > 0) {
      await spray(due);
      sent += due;
    }
    const [h, cur] = await Promise.all([ix.chain.public.getBlockNumber(), ix.cursor()]);
    if (cur) lags.push(Number(h - cur.block));
    await new Promise((r) => setTimeout(r, 100));
  }
  await ix.follower.stop();
  await rpcCall(chain.anvil.rpcUrl, 'evm_setIntervalMining', [0]);
  await rpcCall(chain.anvil.rpcUrl, 'evm_setAutomine', [true]);
  const s = [...lags].sort((a, b) => a - b);
  const at = (p: number) => s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
  progress(`head lag under ${rate} transfers/s: p50 ${at(50)}, max ${s[s.length - 1]} blocks`);
  return { transfersPerSec: rate, seconds, transfersSent: sent, samples: s.length, lagBlocksP50: at(50), lagBlocksP99: at(99), lagBlocksMax: s[s.length - 1] };
}

/** PostgreSQL only: a backfill worked by `n` `metarelay indexer work` processes at once (process start included). */
async function backfillProcesses(chain: BenchChain, cleanup: Cleanup, n: number, head: bigint) {
  const bdb = await openBenchDb('postgres', cleanup);
  const dir = mkdtempSync(join(tmpdir(), 'metarelay-bench-ix-'));
  cleanup.add(`remove ${dir}`, () => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'metarelay.json');
  writeFileSync(
    file,
    JSON.stringify({
      database: bdb.location,
      logLevel: 'silent',
      chains: [{ chainId: chain.anvil.chainId, name: 'anvil', rpcUrls: [chain.anvil.rpcUrl], watch: false, indexer: { scope: 'all', confirmations: 0, chunkBlocks: 10 } }],
    }),
  );
  const id = await backfillStore(bdb.db).create(chain.anvil.chainId, 'all', 0n, head, { rangeBlocks: 20 });
  const t0 = performance.now();
  await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<void>((ok, fail) => {
          const child = spawn(process.execPath, [resolve('bin/metarelay.mjs'), 'indexer', 'work', '--backfill', String(id), '--config', file], { stdio: ['ignore', 'ignore', 'pipe'] });
          let err = '';
          child.stderr.on('data', (d) => (err += d));
          child.on('exit', (code) => (code === 0 ? ok() : fail(new Error(`indexer work exited ${code}: ${err.slice(-500)}`))));
        }),
    ),
  );
  const secs = (performance.now() - t0) / 1000;
  const p = (await backfillStore(bdb.db).progress(id))!;
  if (p.status !== 'DONE') throw new Error(`backfill ${id} is ${p.status}`);
  progress(`${n} worker process(es): ${p.logs} logs in ${secs.toFixed(1)} s`);
  return { processes: n, logs: p.logs, seconds: +secs.toFixed(2), logsPerSec: Math.round(p.logs / secs) };
}

async function sizes(db: Db) {
  const rows = await db.query<{ t: string; n: string; table_bytes: string; index_bytes: string; total_bytes: string }>(
    `SELECT t, (xpath('/row/c/text()', query_to_xml('SELECT count(*) AS c FROM ' || t, false, true, '')))[1]::text AS n,
            pg_table_size(t)::text AS table_bytes, pg_indexes_size(t)::text AS index_bytes, pg_total_relation_size(t)::text AS total_bytes
       FROM unnest(ARRAY['indexer_transfers', 'indexer_balances']) AS t`,
  );
  // Each index on its own: what a deployment pays for each read path.
  const idx = await db.query<{ t: string; i: string; bytes: string }>(
    `SELECT tablename AS t, indexname AS i, pg_relation_size(quote_ident(indexname))::text AS bytes
       FROM pg_indexes WHERE tablename IN ('indexer_transfers', 'indexer_balances') ORDER BY tablename, indexname`,
  );
  const mb = (b: string) => +(Number(b) / 1e6).toFixed(1);
  return Object.fromEntries(
    rows.rows.map((r) => [
      r.t,
      {
        rows: Number(r.n),
        tableMB: mb(r.table_bytes),
        indexMB: mb(r.index_bytes),
        totalMB: mb(r.total_bytes),
        indexesMB: Object.fromEntries(idx.rows.filter((x) => x.t === r.t).map((x) => [x.i, mb(x.bytes)])),
      },
    ]),
  );
}

/** The plan of GetTokenBalances' page query (the statement balance-reader.ts sends), with its timings and buffers. */
async function pagePlan(db: Db, chainId: number, account: string, limit: number): Promise<string[]> {
  const res = await db.query<Record<string, string>>(
    `EXPLAIN (ANALYZE, BUFFERS) SELECT contract, account, token_id::text AS token_id, contract_type, balance::text AS balance, block_number::text AS b, block_hash
       FROM indexer_balances t WHERE chain_id = $1 AND account = $2::text AND balance > 0
      ORDER BY t.account, t.contract, t.token_id LIMIT $3 OFFSET $4`,
    [chainId, account, limit, 0],
  );
  return res.rows.map((r) => Object.values(r)[0]!);
}

async function backfill(chain: BenchChain, cleanup: Cleanup, workers: number, head: bigint) {
  const bdb = await openBenchDb(dbKindFromEnv(), cleanup);
  const svc = await startMetarelay(chain, bdb, cleanup, {
    config: {
      chains: [{ chainId: chain.anvil.chainId, name: 'anvil', rpcUrls: [chain.anvil.rpcUrl], watch: false, indexer: { scope: 'all', confirmations: 0, chunkBlocks: 10 } }],
      indexer: { backfillRangeBlocks: 20 },
    },
  });
  const s = svc.services;
  const id = await backfillStore(s.db).create(chain.anvil.chainId, 'all', 0n, head, { rangeBlocks: s.config.indexer.backfillRangeBlocks });
  const t0 = performance.now();
  await Promise.all(Array.from({ length: workers }, () => backfillWorkerFor(s.db, s.indexers, 60).runUntilIdle(id)));
  const secs = (performance.now() - t0) / 1000;
  const p = (await backfillStore(s.db).progress(id))!;
  if (p.status !== 'DONE') throw new Error(`backfill ${id} is ${p.status}`);
  progress(`${workers} worker(s): ${p.logs} logs in ${secs.toFixed(1)} s`);
  return { svc, result: { workers, logs: p.logs, seconds: +secs.toFixed(2), logsPerSec: Math.round(p.logs / secs) } };
}

runBench(async (cleanup) => {
  const kind = dbKindFromEnv();
  const transfers = envNumber('BENCH_TRANSFERS', 200_000);
  const requests = envNumber('BENCH_REQUESTS', 300);
  const chain = await startChain(cleanup);
  // An account holding 1 000 ERC721 tokens whose documents the origin serves.
  const ids = Array.from({ length: 1000 }, (_, i) => BigInt(i + 1));
  for (const id of ids) chain.origin.setDocument(erc721Path(String(id)), erc721Document(chain.origin.url, String(id)));
  const nft = (await deployErc721WithTokens(chain, { baseUri: `${chain.origin.url}/erc721/`, contractUri: '', ids })).toLowerCase() as Address;
  await sprayTransfers(chain, transfers);
  const head = BigInt(await rpcCall<Hex>(chain.anvil.rpcUrl, 'eth_blockNumber'));
  progress(`chain ready: head ${head}`);

  const one = await backfill(chain, cleanup, 1, head);
  const storage = await sizes(one.svc.services.db);
  // BENCH_READS_ONLY=1: one backfill, storage and read latency (no scaling runs, no head lag).
  const readsOnly = process.env.BENCH_READS_ONLY === '1';
  const two = readsOnly ? null : await backfill(chain, cleanup, 2, head);
  const processes = kind === 'postgres' && !readsOnly ? [await backfillProcesses(chain, cleanup, 1, head), await backfillProcesses(chain, cleanup, 2, head)] : [];

  // GetTokenBalances with includeMetadata: metadata resolved once first (the steady state of a served collection).
  const s = one.svc.services;
  const ix = s.indexers.get(chain.anvil.chainId)!;
  for (let i = 0; i < ids.length; i += 100) {
    await s.tokens.getTokens(ix.chain, nft, ids.slice(i, i + 100).map(String), { waitMs: 60_000 });
  }
  await s.contracts.get(ix.chain, [nft], { waitMs: 60_000 });
  const holder = privateKeyToAccount(ANVIL_DEPLOYER_KEY).address.toLowerCase();
  const client = new SequenceIndexer(`${one.svc.baseUrl}/indexer/anvil`, one.svc.accessKey);
  const measure = async (pageSize: number) => {
    const first = await client.getTokenBalances({ accountAddress: holder, includeMetadata: true, page: { pageSize } });
    const available = first.balances.filter((b) => b.tokenMetadata?.status === 'AVAILABLE').length;
    const samples: number[] = [];
    for (let i = 0; i < requests; i++) {
      const t0 = performance.now();
      await client.getTokenBalances({ accountAddress: holder, includeMetadata: true, page: { pageSize } });
      samples.push(performance.now() - t0);
    }
    return { pageSize, rows: first.balances.length, metadataAvailable: available, ...summarize(samples) };
  };
  const fullPage = await measure(1000);
  const defaultPage = await measure(50);
  // The plan as the bench left the table (just written), then after VACUUM set its pages all-visible
  // (what autovacuum does in a served deployment): the covering index reads without the heap then.
  const plans = { afterBackfill: await pagePlan(s.db, chain.anvil.chainId, holder, 51) } as Record<string, string[]>;
  await s.db.query('VACUUM (ANALYZE) indexer_balances');
  plans.afterVacuum = await pagePlan(s.db, chain.anvil.chainId, holder, 51);
  const defaultPageVacuumed = await measure(50);
  const lag = readsOnly ? null : await headLag(chain, cleanup, envNumber('BENCH_LAG_RATE', 50), envNumber('BENCH_LAG_SECONDS', 20));
  const perMillion = (x: number) => +((x * 1e6) / Math.max(1, storage.indexer_transfers!.rows)).toFixed(0);
  return {
    bench: 'indexer',
    db: kind,
    machine: machineInfo(),
    transfers,
    blocks: Number(head),
    backfill: [one.result, ...(two ? [two.result] : [])],
    backfillProcesses: processes,
    headLag: lag,
    storage,
    storagePerMillionTransfersMB: {
      transfersTable: perMillion(storage.indexer_transfers!.tableMB),
      transfersIndexes: perMillion(storage.indexer_transfers!.indexMB),
    },
    getTokenBalancesIncludeMetadata: [fullPage, defaultPage, { ...defaultPageVacuumed, vacuumed: true }],
    pagePlans: plans,
    loadAverageAtEnd: (await import('node:os')).loadavg().map((x) => +x.toFixed(2)),
  };
});
