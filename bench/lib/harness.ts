import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { encodeDeployData, encodeFunctionData, getContractAddress, parseAbi, type Abi, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { parseConfig } from '../../src/config/load.ts';
import type { AppConfigInput } from '../../src/config/schema.ts';
import {
  ANVIL_DEPLOYER_KEY,
  REPO_ROOT,
  compileContracts,
  devPublicClient,
  installMulticall3,
  rpcCall,
  startAnvil,
  startOriginServer,
  type AnvilHandle,
  type Artifacts,
  type OriginServer,
} from '../../src/devchain/index.ts';
import { buildApp } from '../../src/cli/app.ts';
import { createServices, type Services } from '../../src/services.ts';
import { openDb, type Db } from '../../src/store/db.ts';
import { migrate } from '../../src/store/migrate.ts';
import { createLogger } from '../../src/telemetry/logger.ts';

const t0 = performance.now();

/** Progress for humans, on stderr: stdout is reserved for the result JSON. */
export function progress(msg: string): void {
  process.stderr.write(`[${((performance.now() - t0) / 1000).toFixed(1).padStart(5)} s] ${msg}\n`);
}

export function envNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got "${raw}"`);
  return n;
}

export type DbKind = 'pglite' | 'postgres';

export function dbKindFromEnv(): DbKind {
  const v = process.env.BENCH_DB ?? 'pglite';
  if (v !== 'pglite' && v !== 'postgres') throw new Error(`BENCH_DB must be pglite or postgres, got "${v}"`);
  return v;
}

/**
 * Teardown steps run last-in first-out, each even if an earlier one failed, so an error halfway
 * through setup still stops anvil, the servers and the database it had started.
 */
export class Cleanup {
  private readonly steps: Array<{ name: string; fn: () => Promise<void> | void }> = [];
  private running: Promise<void> | undefined;

  add(name: string, fn: () => Promise<void> | void): void {
    this.steps.push({ name, fn });
  }

  run(): Promise<void> {
    this.running ??= (async () => {
      while (this.steps.length) {
        const { name, fn } = this.steps.pop()!;
        const started = performance.now();
        try {
          await fn();
          const ms = performance.now() - started;
          if (ms > 1_000) progress(`cleanup: ${name} took ${(ms / 1000).toFixed(1)} s`);
        } catch (err) {
          progress(`cleanup: ${name} failed: ${(err as Error).message}`);
        }
      }
    })();
    return this.running;
  }
}

/** Runs a benchmark's main with teardown on success, failure and Ctrl-C; prints the result JSON. */
export function runBench(main: (cleanup: Cleanup) => Promise<unknown>): void {
  const cleanup = new Cleanup();
  const onSignal = (sig: NodeJS.Signals) => {
    progress(`${sig}: stopping`);
    void cleanup.run().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  main(cleanup).then(
    async (result) => {
      await cleanup.run();
      process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
      // Stray keep-alive sockets or pool timers must not keep a finished benchmark alive.
      process.exit(0);
    },
    async (err: unknown) => {
      progress(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      await cleanup.run();
      process.exit(1);
    },
  );
}

export interface BenchChain {
  anvil: AnvilHandle;
  origin: OriginServer;
  artifacts: Artifacts;
}

/** Anvil in automine mode with Multicall3, the metadata origin, and the compiled contracts. */
export async function startChain(cleanup: Cleanup): Promise<BenchChain> {
  const [anvil, origin, artifacts] = await Promise.all([
    startAnvil({ blockTime: null }).then((a) => {
      cleanup.add('anvil', () => a.stop());
      return a;
    }),
    startOriginServer().then((o) => {
      cleanup.add('origin', () => o.stop());
      return o;
    }),
    compileContracts({ cacheDir: path.join(REPO_ROOT, 'node_modules/.cache/metarelay/solc') }),
  ]);
  const multicall = artifacts.Multicall3;
  if (!multicall) throw new Error('Multicall3 artifact missing');
  await installMulticall3(anvil.rpcUrl, multicall.deployedBytecode);
  progress(`anvil ${anvil.rpcUrl} (automine), origin ${origin.url}`);
  return { anvil, origin, artifacts };
}

const erc721Abi = parseAbi(['function mint(address to, uint256 id)', 'function balanceOf(address owner) view returns (uint256)']);

// OpenZeppelin's _mint to a holder that already has tokens costs ~50k; the first one ~70k.
const MINT_GAS = 150_000n;

/** Sends raw transactions in one JSON-RPC batch request; throws on the first refusal. */
async function sendRawBatch(rpcUrl: string, raws: Hex[]): Promise<Hex[]> {
  const res = await fetch(rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(raws.map((raw, i) => ({ jsonrpc: '2.0', id: i, method: 'eth_sendRawTransaction', params: [raw] }))),
    signal: AbortSignal.timeout(60_000),
  });
  if (!res.ok) throw new Error(`eth_sendRawTransaction batch: HTTP ${res.status}`);
  const out = (await res.json()) as Array<{ id: number; result?: Hex; error?: { message: string } }>;
  const byId = new Map(out.map((r) => [r.id, r]));
  return raws.map((_, i) => {
    const r = byId.get(i);
    if (!r?.result) throw new Error(`transaction ${i} of batch refused: ${r?.error?.message ?? 'no answer'}`);
    return r.result;
  });
}

/**
 * Deploys a DevERC721 and mints `ids` to the deployer. Transactions are signed locally with
 * sequential nonces and sent `batchSize` at a time in one JSON-RPC batch each, so minting 500
 * tokens costs a handful of round trips instead of 1000 (send + receipt per token).
 */
export async function deployErc721WithTokens(chain: BenchChain, opts: { baseUri: string; contractUri: string; ids: bigint[]; batchSize?: number }): Promise<Address> {
  const { anvil, artifacts } = chain;
  const art = artifacts.DevERC721;
  if (!art) throw new Error('DevERC721 artifact missing');
  const account = privateKeyToAccount(ANVIL_DEPLOYER_KEY);
  const client = devPublicClient(anvil.rpcUrl, anvil.chainId);
  const [startNonce, fees] = await Promise.all([client.getTransactionCount({ address: account.address, blockTag: 'pending' }), client.estimateFeesPerGas()]);
  let nonce = startNonce;
  // Automine blocks are nearly empty, so the base fee only falls: today's estimate covers every tx.
  const common = { chainId: anvil.chainId, type: 'eip1559' as const, maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };

  const deployData = encodeDeployData({
    abi: art.abi as Abi,
    bytecode: art.bytecode,
    args: ['Bench ERC721', 'B721', opts.baseUri, opts.contractUri],
  });
  const deployGas = await client.estimateGas({ account, data: deployData });
  const contract = getContractAddress({ from: account.address, nonce: BigInt(nonce) });
  const deployRaw = await account.signTransaction({ ...common, data: deployData, gas: deployGas, nonce: nonce++ });
  const [deployHash] = await sendRawBatch(anvil.rpcUrl, [deployRaw]);
  // Generous: a loaded machine (other work beside the bench) can take minutes to mine a thousand mints.
  const deployed = await client.waitForTransactionReceipt({ hash: deployHash, pollingInterval: 20, timeout: 300_000 });
  if (deployed.status !== 'success') throw new Error(`DevERC721 deployment reverted (${deployHash})`);

  const batchSize = opts.batchSize ?? 100;
  let last: Hex | undefined;
  for (let i = 0; i < opts.ids.length; i += batchSize) {
    const raws = await Promise.all(
      opts.ids.slice(i, i + batchSize).map((id) =>
        account.signTransaction({
          ...common,
          to: contract,
          data: encodeFunctionData({ abi: erc721Abi, functionName: 'mint', args: [account.address, id] }),
          gas: MINT_GAS,
          nonce: nonce++,
        }),
      ),
    );
    const hashes = await sendRawBatch(anvil.rpcUrl, raws);
    last = hashes[hashes.length - 1];
  }
  if (last) await client.waitForTransactionReceipt({ hash: last, pollingInterval: 20, timeout: 300_000 });
  // One check for all mints: a reverted one would leave the balance short.
  const balance = await client.readContract({ address: contract, abi: erc721Abi, functionName: 'balanceOf', args: [account.address] });
  if (balance !== BigInt(opts.ids.length)) throw new Error(`minted ${balance} of ${opts.ids.length} tokens`);
  const block = await rpcCall<Hex>(anvil.rpcUrl, 'eth_blockNumber');
  progress(`DevERC721 ${contract} with ${opts.ids.length} tokens (block ${BigInt(block)})`);
  return contract;
}

export interface BenchDb {
  kind: DbKind;
  db: Db;
  location: string;
}

/** A fresh, migrated database: PGlite in a temp folder, or a new PostgreSQL database; dropped at cleanup. */
/** A new PostgreSQL database (BENCH_PG_URL's server), dropped at cleanup; its URL. */
export async function newPgDatabase(cleanup: Cleanup, prefix: string): Promise<string> {
  const adminUrl = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = `${prefix}_${process.pid}_${Date.now().toString(36)}`;
  const admin = await openDb(adminUrl);
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.close();
  }
  cleanup.add(`drop database ${name}`, async () => {
    const a = await openDb(adminUrl);
    try {
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    } finally {
      await a.close();
    }
  });
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return u.toString();
}

export async function openBenchDb(kind: DbKind, cleanup: Cleanup): Promise<BenchDb> {
  if (kind === 'pglite') {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'metarelay-bench-'));
    cleanup.add(`remove ${dir}`, () => rmSync(dir, { recursive: true, force: true }));
    const db = await openDb(dir);
    cleanup.add('close pglite', () => db.close());
    await migrate(db);
    return { kind, db, location: dir };
  }
  const location = await newPgDatabase(cleanup, 'metarelay_bench');
  const db = await openDb(location);
  cleanup.add('close postgres pool', () => db.close());
  await migrate(db);
  return { kind, db, location };
}

export interface BenchService {
  services: Services;
  app: FastifyInstance;
  baseUrl: string;
  accessKey: string;
}

/**
 * Closes a fastify server without waiting out keep-alive timeouts (72 s by default) of sockets a
 * client left open.
 */
export async function closeNow(app: FastifyInstance): Promise<void> {
  const closing = app.close();
  app.server.closeAllConnections();
  await closing;
}

/**
 * A metarelay service on `db` with the anvil chain configured, listening on 127.0.0.1:<free port>.
 * The refresh worker and chain watchers stay off: their polling would mix into what is measured.
 */
export async function startMetarelay(
  chain: BenchChain,
  bdb: BenchDb,
  cleanup: Cleanup,
  opts: { config?: Partial<AppConfigInput> /** Instead of anvil's own URL, e.g. a recording proxy. */; rpcUrl?: string } = {},
): Promise<BenchService> {
  const config = parseConfig({
    database: bdb.location,
    chains: [{ chainId: chain.anvil.chainId, name: 'anvil', rpcUrls: [opts.rpcUrl ?? chain.anvil.rpcUrl] }],
    allowPrivateNetworks: true,
    logLevel: 'silent',
    auth: { rest: 'optional' },
    ...opts.config,
  });
  const services = await createServices(config, { db: bdb.db, log: createLogger('silent'), migrate: false });
  cleanup.add('close services', () => services.close());
  const app = await buildApp(services);
  cleanup.add('close metarelay http', () => closeNow(app));
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('metarelay did not bind a TCP port');
  const project = await services.projects.create('bench');
  const { key } = await services.accessKeys.create(project.id, 'bench');
  return { services, app, baseUrl: `http://127.0.0.1:${addr.port}`, accessKey: key };
}

/** Chain RPC calls counted by metarelay's own metric, by JSON-RPC method. */
export async function chainRpcCallsByMethod(services: Services): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const v of (await services.metrics.chainRpcCalls.get()).values) {
    const m = String(v.labels.method);
    out[m] = (out[m] ?? 0) + v.value;
  }
  return out;
}

export function machineInfo() {
  return { node: process.version, cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model ?? 'unknown', loadavg1m: os.loadavg()[0] };
}
