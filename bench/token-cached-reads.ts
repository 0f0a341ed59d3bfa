// Cached token metadata reads as users run them, against a physical anchor.
//
// metarelay runs in its own process through its binary: `dev` (what `npm start` runs: PGlite, its own
// anvil, refresh worker, watcher, indexer and dispatcher all on) and `serve` on PostgreSQL with the
// in-process worker and dispatcher on. The anchor is a bare fastify server in another process of its
// own, otherwise idle, answering the very same bytes. The load generator (autocannon) is a third
// process. Each metarelay run is measured right after its bare twin, so both see the same machine
// noise; the ratio metarelay/bare is what metarelay's own work per request costs.
//
//   npx tsx bench/token-cached-reads.ts                      # dev and serve
//   BENCH_MODES=dev|serve   BENCH_SECONDS=10 BENCH_WARMUP_SECONDS=2 BENCH_CONNECTIONS=50
//   BENCH_ONLY=health,restAnon,restKey,rpcKey                 # a subset of the runs
//   BENCH_IDLE_SECONDS=5                                      # the idle CPU (background loops) measured before the runs
//   BENCH_ROUNDS=3                                            # rounds per run (alternating order); the median ratio is reported
//   BENCH_PIN=1                                               # servers on CPU 0, the load generator on CPU 1 (taskset)
//   BENCH_SERVER_NODE_OPTIONS=--cpu-prof --cpu-prof-dir=/tmp/prof   # profile the metarelay process
//
// Result JSON on stdout; progress on stderr.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { privateKeyToAccount } from 'viem/accounts';
import { REPO_ROOT, compileContracts, erc721Document, erc721Path, startOriginServer } from '../src/devchain/index.ts';
import { openDb } from '../src/store/db.ts';
import { migrate } from '../src/store/migrate.ts';
import { projectRepo } from '../src/store/projects.ts';
import { accessKeyRepo } from '../src/store/access-keys.ts';
import { deployErc721WithTokens, envNumber, machineInfo, progress, runBench, startChain, type BenchChain, type Cleanup } from './lib/harness.ts';
import { startLoadGenerator, type LoadGenerator, type LoadSummary, type LoadTarget } from './lib/load.ts';
import { startBare, startDev, startServe, type ServerProcess } from './lib/processes.ts';

const TOKENS = 50;
const TARGET_RATIO = 0.8;
const RUNS = ['health', 'restAnon', 'restKey', 'rpcKey'] as const;
type RunName = (typeof RUNS)[number];

// anvil's well-known account 1 signs the serve relayer's transactions (the dispatcher polls; nothing is relayed).
const SENDER_KEY = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d';

interface Measured extends LoadSummary {
  serverCpuPct: number;
  cpuUsPerRequest: number;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

async function fetchText(url: string, init: RequestInit = {}): Promise<{ status: number; body: string }> {
  const res = await fetch(url, init);
  return { status: res.status, body: await res.text() };
}

/** One run: warm-up, then the measured seconds, with the server's CPU read from /proc. */
async function measure(load: LoadGenerator, server: ServerProcess, target: LoadTarget, o: { connections: number; seconds: number; warmup: number }): Promise<Measured> {
  await load.run(target, { connections: o.connections, seconds: o.warmup });
  const before = server.cpuUs();
  const s = await load.run(target, { connections: o.connections, seconds: o.seconds });
  const cpuUs = server.cpuUs() - before;
  if (s.non2xx || s.errors) throw new Error(`${target.method} ${target.url}: ${s.non2xx} non-2xx answers and ${s.errors} errors`);
  return { ...s, serverCpuPct: Math.round((100 * cpuUs) / (s.durationS * 1e6)), cpuUsPerRequest: Math.round(cpuUs / s.requests) };
}

interface Service {
  server: ServerProcess;
  accessKey: string;
  chainName: string;
  contract: string;
}

/** Resolves the bench's 50 tokens once (chain read, origin fetch, store); every later read is cached. */
async function warm(svc: Service, ids: string[]) {
  const r = await fetchText(`${svc.server.baseUrl}/rpc/Metadata/GetTokenMetadata`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-access-key': svc.accessKey },
    body: JSON.stringify({ chainID: svc.chainName, contractAddress: svc.contract, tokenIDs: ids }),
  });
  if (r.status !== 200) throw new Error(`warm-up GetTokenMetadata: HTTP ${r.status} ${r.body.slice(0, 300)}`);
  const tokens = (JSON.parse(r.body) as { tokenMetadata: Array<{ status: string }> }).tokenMetadata;
  const notReady = tokens.filter((t) => t.status !== 'AVAILABLE').length;
  if (tokens.length !== ids.length || notReady) throw new Error(`warm-up: ${notReady} of ${tokens.length} tokens not AVAILABLE`);
}

/** `metarelay dev` on a fresh folder, with a 50-token collection deployed on its anvil (documents from a local origin). */
async function devService(cleanup: Cleanup, dir: string, ids: string[]): Promise<Service> {
  const origin = await startOriginServer();
  cleanup.add('origin (dev)', () => origin.stop());
  for (const id of ids) origin.setDocument(erc721Path(id), erc721Document(origin.url, id));
  const server = await startDev(path.join(dir, 'dev'));
  cleanup.add('stop metarelay dev', () => server.stop());
  const artifacts = await compileContracts({ cacheDir: path.join(REPO_ROOT, 'node_modules/.cache/metarelay/solc') });
  const chain = { anvil: { rpcUrl: server.manifest.chain.rpcUrl, chainId: server.manifest.chain.chainId }, origin, artifacts } as unknown as BenchChain;
  const contract = await deployErc721WithTokens(chain, { baseUri: `${origin.url}/erc721/`, contractUri: `${origin.url}/contract/erc721.json`, ids: ids.map(BigInt) });
  return { server, accessKey: server.manifest.accessKey, chainName: server.manifest.chain.name, contract: contract.toLowerCase() };
}

/** `metarelay serve` on a new PostgreSQL database, its chain a bench anvil with the relayer configured. */
async function serveService(cleanup: Cleanup, dir: string, ids: string[]): Promise<Service> {
  const chain = await startChain(cleanup);
  for (const id of ids) chain.origin.setDocument(erc721Path(id), erc721Document(chain.origin.url, id));
  const contract = await deployErc721WithTokens(chain, { baseUri: `${chain.origin.url}/erc721/`, contractUri: `${chain.origin.url}/contract/erc721.json`, ids: ids.map(BigInt) });
  const adminUrl = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = `metarelay_bench_${process.pid}_${Date.now().toString(36)}`;
  const admin = await openDb(adminUrl);
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.close();
  cleanup.add(`drop database ${name}`, async () => {
    const a = await openDb(adminUrl);
    await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).finally(() => a.close());
  });
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  const db = await openDb(u.toString());
  await migrate(db);
  const project = await projectRepo(db).create('bench');
  const { key } = await accessKeyRepo(db).create(project.id, 'bench');
  await db.close();
  const config = {
    port: 0,
    host: '127.0.0.1',
    database: u.toString(),
    chains: [
      {
        chainId: chain.anvil.chainId,
        name: 'anvil',
        rpcUrls: [chain.anvil.rpcUrl],
        relayer: { senderKeys: [SENDER_KEY], paymentAddress: privateKeyToAccount(SENDER_KEY).address, feeTokens: [{ address: null, name: 'Ether', symbol: 'ETH', decimals: 18, nativePrice: '1' }] },
      },
    ],
    allowPrivateNetworks: true,
    auth: { rpc: 'required', rest: 'optional' },
    relayer: { quoteSecret: 'b'.repeat(64) },
    logLevel: 'info',
  };
  const file = path.join(dir, 'serve.json');
  writeFileSync(file, JSON.stringify(config, null, 2));
  const server = await startServe(file, await freePort(), path.join(dir, 'serve.log'));
  cleanup.add('stop metarelay serve', () => server.stop());
  return { server, accessKey: key, chainName: 'anvil', contract: contract.toLowerCase() };
}

runBench(async (cleanup: Cleanup) => {
  const rounds = envNumber('BENCH_ROUNDS', 1);
  const o = { seconds: envNumber('BENCH_SECONDS', 10), warmup: envNumber('BENCH_WARMUP_SECONDS', 2), connections: envNumber('BENCH_CONNECTIONS', 50) };
  const modes = (process.env.BENCH_MODES ?? 'dev,serve').split(',').map((m) => m.trim()) as Array<'dev' | 'serve'>;
  const only = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',').map((x) => x.trim())) : undefined;
  for (const n of only ?? []) if (!(RUNS as readonly string[]).includes(n)) throw new Error(`BENCH_ONLY: unknown run "${n}"`);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'metarelay-bench-reads-'));
  cleanup.add(`remove ${dir}`, () => rmSync(dir, { recursive: true, force: true }));
  const ids = Array.from({ length: TOKENS }, (_, i) => String(i + 1));
  const load = startLoadGenerator();
  cleanup.add('stop load generator', () => load.stop());
  const load0 = os.loadavg()[0];

  const out: Record<string, unknown> = {};
  for (const mode of modes) {
    if (mode !== 'dev' && mode !== 'serve') throw new Error(`BENCH_MODES: unknown mode "${mode}"`);
    const svc = mode === 'dev' ? await devService(cleanup, dir, ids) : await serveService(cleanup, dir, ids);
    await warm(svc, ids);
    const restPath = `/tokens/${svc.chainName}/${svc.contract}/1`;
    const rpcPath = '/rpc/Metadata/GetTokenMetadata';
    const rpcHeaders = { 'content-type': 'application/json', 'x-access-key': svc.accessKey };
    const rpcBody = JSON.stringify({ chainID: svc.chainName, contractAddress: svc.contract, tokenIDs: ids });
    const targets: Record<RunName, Omit<LoadTarget, 'url'> & { path: string }> = {
      health: { path: '/health', method: 'GET' },
      restAnon: { path: restPath, method: 'GET' },
      restKey: { path: `${restPath}?accessKey=${svc.accessKey}`, method: 'GET' },
      rpcKey: { path: rpcPath, method: 'POST', headers: rpcHeaders, body: rpcBody },
    };
    // The anchor answers exactly what metarelay answers now, byte for byte.
    const now: Partial<Record<RunName, string>> = {};
    for (const n of RUNS) {
      const t = targets[n];
      const r = await fetchText(`${svc.server.baseUrl}${t.path}`, { method: t.method, headers: t.headers, body: t.body });
      if (r.status !== 200) throw new Error(`${mode} ${n}: HTTP ${r.status} ${r.body.slice(0, 200)}`);
      now[n] = r.body;
    }
    const bare = await startBare({ get: { '/health': now.health!, [restPath]: now.restAnon! }, post: { [rpcPath]: now.rpcKey! } }, dir);
    cleanup.add(`stop bare (${mode})`, () => bare.stop());

    // What the process spends with no request at all (in-process loops, timers): per request, this
    // is the background share of the CPU figures below, at the run's req/s.
    const idleFrom = svc.server.cpuUs();
    const idleMs = envNumber('BENCH_IDLE_SECONDS', 5) * 1000;
    await new Promise((r) => setTimeout(r, idleMs));
    const idleCpuUsPerSec = Math.round(((svc.server.cpuUs() - idleFrom) * 1000) / idleMs);
    progress(`${mode}: idle ${idleCpuUsPerSec} µs CPU per second (${(idleCpuUsPerSec / 1e4).toFixed(1)} % of a core)`);

    const results: Record<string, unknown> = { idleCpuUsPerSec };
    for (const n of RUNS.filter((r) => !only || only.has(r))) {
      const t = targets[n];
      const target = (base: string): LoadTarget => ({ url: `${base}${t.path}`, method: t.method, headers: t.headers, body: t.body });
      progress(`${mode} ${n}: ${rounds} round(s) of bare and metarelay (alternating which goes first), ${o.warmup} s warm-up + ${o.seconds} s each at ${o.connections} connections`);
      // Each round measures both back to back; the round with the median ratio is reported, with every ratio.
      const pairs: Array<{ b: Measured; m: Measured; ratio: number }> = [];
      for (let i = 0; i < rounds; i++) {
        let b: Measured, m: Measured;
        if (i % 2 === 0) {
          b = await measure(load, bare, target(bare.baseUrl), o);
          m = await measure(load, svc.server, target(svc.server.baseUrl), o);
        } else {
          m = await measure(load, svc.server, target(svc.server.baseUrl), o);
          b = await measure(load, bare, target(bare.baseUrl), o);
        }
        const ratio = Number((m.rps / b.rps).toFixed(3));
        progress(`${mode} ${n}: metarelay ${m.rps.toFixed(0)} req/s (${m.cpuUsPerRequest} µs CPU/req) vs bare ${b.rps.toFixed(0)} (${b.cpuUsPerRequest} µs) = ${ratio}`);
        pairs.push({ b, m, ratio });
      }
      const { b, m, ratio } = [...pairs].sort((x, y) => x.ratio - y.ratio)[Math.floor((pairs.length - 1) / 2)];
      const slim = (s: Measured) => ({ rps: Math.round(s.rps), p50Ms: s.p50Ms, p99Ms: s.p99Ms, serverCpuPct: s.serverCpuPct, cpuUsPerRequest: s.cpuUsPerRequest });
      results[n] = {
        metarelay: slim(m),
        bare: slim(b),
        ratio,
        ratios: pairs.map((x) => x.ratio),
        idleCpuUsPerRequest: Number((idleCpuUsPerSec / m.rps).toFixed(1)),
        cpuRatio: Number((b.cpuUsPerRequest / m.cpuUsPerRequest).toFixed(3)),
        meetsTarget: ratio >= TARGET_RATIO,
      };
    }
    await bare.stop();
    await svc.server.stop();
    out[mode] = results;
  }
  return {
    bench: 'token-cached-reads',
    tokens: TOKENS,
    ...o,
    target: TARGET_RATIO,
    loadavg1mBefore: load0,
    loadavg1mAfter: os.loadavg()[0],
    machine: machineInfo(),
    results: out,
  };
});
