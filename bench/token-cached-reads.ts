// Cached token metadata reads: metarelay's REST and RPC forms against a bare fastify server that
// answers the very same bytes, so the ratio is what metarelay's own work per request costs.
//
//   npx tsx bench/token-cached-reads.ts                 # PGlite in a temp folder
//   BENCH_DB=postgres npx tsx bench/token-cached-reads.ts
//   BENCH_SECONDS=10 BENCH_WARMUP_SECONDS=2 BENCH_CONNECTIONS=50
//   BENCH_ONLY=rpcMetarelay      # a subset of restMetarelay,restBare,rpcMetarelay,rpcBare (for profiling)
//
// Result JSON on stdout; progress on stderr.
import Fastify from 'fastify';
import { erc721Document, erc721Path } from '../src/devchain/index.ts';
import {
  closeNow,
  dbKindFromEnv,
  deployErc721WithTokens,
  envNumber,
  machineInfo,
  openBenchDb,
  progress,
  runBench,
  startChain,
  startMetarelay,
  type Cleanup,
} from './lib/harness.ts';
import { startLoadGenerator, type LoadSummary, type LoadTarget } from './lib/load.ts';

const TOKENS = 50;

type RunResult = LoadSummary & { serverCpuPct: number; cpuUsPerRequest: number; tokenLookups?: Record<string, number> };
const TARGET_RATIO = 0.5;

async function fetchText(url: string, init: RequestInit = {}): Promise<{ status: number; body: string; contentType: string }> {
  const res = await fetch(url, init);
  return { status: res.status, body: await res.text(), contentType: res.headers.get('content-type') ?? '' };
}

async function metricDelta(get: () => Promise<Record<string, number>>, fn: () => Promise<LoadSummary>) {
  const before = await get();
  const summary = await fn();
  const after = await get();
  const delta: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) if (v - (before[k] ?? 0)) delta[k] = v - (before[k] ?? 0);
  return { summary, delta };
}

runBench(async (cleanup: Cleanup) => {
  const seconds = envNumber('BENCH_SECONDS', 10);
  const warmupSeconds = envNumber('BENCH_WARMUP_SECONDS', 2);
  const connections = envNumber('BENCH_CONNECTIONS', 50);
  const dbKind = dbKindFromEnv();

  const chain = await startChain(cleanup);
  const ids = Array.from({ length: TOKENS }, (_, i) => String(i + 1));
  for (const id of ids) chain.origin.setDocument(erc721Path(id), erc721Document(chain.origin.url, id));
  const contract = (
    await deployErc721WithTokens(chain, {
      baseUri: `${chain.origin.url}/erc721/`,
      contractUri: `${chain.origin.url}/contract/erc721.json`,
      ids: ids.map(BigInt),
    })
  ).toLowerCase();

  const bdb = await openBenchDb(dbKind, cleanup);
  const mr = await startMetarelay(chain, bdb, cleanup);
  progress(`metarelay on ${mr.baseUrl} (${dbKind})`);

  const rpcHeaders = { 'content-type': 'application/json', 'x-access-key': mr.accessKey };
  const rpcBody = JSON.stringify({ chainID: 'anvil', contractAddress: contract, tokenIDs: ids });
  const restPath = `/tokens/anvil/${contract}/1`;
  const rpcPath = '/rpc/Metadata/GetTokenMetadata';

  // Warm: one call resolves all 50 (chain read + origin fetch + store); every later read is cached.
  const warm = await fetchText(`${mr.baseUrl}${rpcPath}`, { method: 'POST', headers: rpcHeaders, body: rpcBody });
  if (warm.status !== 200) throw new Error(`warm-up GetTokenMetadata: HTTP ${warm.status} ${warm.body.slice(0, 300)}`);
  const warmTokens = (JSON.parse(warm.body) as { tokenMetadata: Array<{ status: string }> }).tokenMetadata;
  const notReady = warmTokens.filter((t) => t.status !== 'AVAILABLE').length;
  if (warmTokens.length !== TOKENS || notReady) throw new Error(`warm-up: ${notReady} of ${warmTokens.length} tokens not AVAILABLE`);
  // The tokens' media is fetched eagerly after they resolve: done before the origin is counted.
  await mr.services.media?.idle();
  const originFetches = chain.origin.requestCount();

  // The bare servers answer with exactly what metarelay answers now, byte for byte.
  const restNow = await fetchText(`${mr.baseUrl}${restPath}`);
  const rpcNow = await fetchText(`${mr.baseUrl}${rpcPath}`, { method: 'POST', headers: rpcHeaders, body: rpcBody });
  if (restNow.status !== 200 || rpcNow.status !== 200) throw new Error(`cached reads: HTTP ${restNow.status}/${rpcNow.status}`);
  const restBody = restNow.body;
  const rpcResponseBody = rpcNow.body;

  const bare = Fastify({ logger: false });
  bare.get('/tokens/:network/:contract/:ids', async (_req, reply) => reply.type('application/json').send(restBody));
  bare.post(rpcPath, async (_req, reply) => reply.type('application/json').send(rpcResponseBody));
  cleanup.add('close bare fastify', () => closeNow(bare));
  await bare.listen({ host: '127.0.0.1', port: 0 });
  const bareAddr = bare.server.address();
  if (!bareAddr || typeof bareAddr === 'string') throw new Error('bare fastify did not bind a TCP port');
  const bareUrl = `http://127.0.0.1:${bareAddr.port}`;
  for (const [u, init, expected] of [
    [`${bareUrl}${restPath}`, {}, restBody],
    [`${bareUrl}${rpcPath}`, { method: 'POST', headers: rpcHeaders, body: rpcBody }, rpcResponseBody],
  ] as const) {
    const r = await fetchText(u, init);
    if (r.body !== expected) throw new Error(`bare server at ${u} does not echo metarelay's body`);
  }

  const load = startLoadGenerator();
  cleanup.add('stop load generator', () => load.stop());

  const targets: Record<'restMetarelay' | 'restBare' | 'rpcMetarelay' | 'rpcBare', LoadTarget> = {
    restMetarelay: { url: `${mr.baseUrl}${restPath}`, method: 'GET' },
    restBare: { url: `${bareUrl}${restPath}`, method: 'GET' },
    rpcMetarelay: { url: `${mr.baseUrl}${rpcPath}`, method: 'POST', headers: rpcHeaders, body: rpcBody },
    rpcBare: { url: `${bareUrl}${rpcPath}`, method: 'POST', headers: rpcHeaders, body: rpcBody },
  };
  const cacheLookups = async () => {
    const out: Record<string, number> = {};
    for (const v of (await mr.services.metrics.metadataCache.get()).values) out[String(v.labels.result)] = v.value;
    return out;
  };

  // Each metarelay form is measured right next to its bare twin, so both see the same machine noise.
  const order = ['restMetarelay', 'restBare', 'rpcMetarelay', 'rpcBare'] as const;
  const only = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',').map((x) => x.trim())) : undefined;
  for (const n of only ?? []) if (!(order as readonly string[]).includes(n)) throw new Error(`BENCH_ONLY: unknown run "${n}"`);
  const results: Partial<Record<keyof typeof targets, RunResult>> = {};
  for (const name of order.filter((n) => !only || only.has(n))) {
    progress(`${name}: warm-up ${warmupSeconds} s, then ${seconds} s at ${connections} connections`);
    await load.run(targets[name], { connections, seconds: warmupSeconds });
    const cpuBefore = process.cpuUsage();
    const { summary, delta } = await metricDelta(cacheLookups, () => load.run(targets[name], { connections, seconds }));
    const cpu = process.cpuUsage(cpuBefore);
    // The server's own CPU time per answer: unlike req/s, not capped by what the load generator
    // manages to send on a small machine.
    const cpuUs = cpu.user + cpu.system;
    const serverCpu = { serverCpuPct: Math.round((100 * cpuUs) / (summary.durationS * 1e6)), cpuUsPerRequest: Math.round(cpuUs / summary.requests) };
    if (summary.non2xx || summary.errors) {
      throw new Error(`${name}: ${summary.non2xx} non-2xx answers and ${summary.errors} errors; the figures would be meaningless`);
    }
    results[name] = { ...summary, ...serverCpu, ...(name.endsWith('Metarelay') ? { tokenLookups: delta } : {}) };
    progress(
      `${name}: ${summary.rps.toFixed(0)} req/s, p50 ${summary.p50Ms} ms, p99 ${summary.p99Ms} ms, ` +
        `server CPU ${serverCpu.serverCpuPct}% (${serverCpu.cpuUsPerRequest} µs/request)`,
    );
  }
  if (chain.origin.requestCount() !== originFetches) throw new Error('the origin was asked again during the cached-read runs');

  const round = (n: number, d = 3) => Number(n.toFixed(d));
  const slim = (s: RunResult | undefined) => s && ({
    rps: round(s.rps, 0),
    p50Ms: s.p50Ms,
    p99Ms: s.p99Ms,
    meanMs: round(s.meanMs, 2),
    requests: s.requests,
    serverCpuPct: s.serverCpuPct,
    cpuUsPerRequest: s.cpuUsPerRequest,
    ...(s.tokenLookups ? { tokenLookups: s.tokenLookups } : {}),
  });
  const ratio = (a: RunResult | undefined, b: RunResult | undefined) => (a && b ? a.rps / b.rps : null);
  const cpuRatio = (a: RunResult | undefined, b: RunResult | undefined) => (a && b ? round(b.cpuUsPerRequest / a.cpuUsPerRequest) : null);
  const restRatio = ratio(results.restMetarelay, results.restBare);
  const rpcRatio = ratio(results.rpcMetarelay, results.rpcBare);
  return {
    bench: 'token-cached-reads',
    db: dbKind,
    tokens: TOKENS,
    connections,
    seconds,
    warmupSeconds,
    responseBytes: { rest: Buffer.byteLength(restBody), rpc: Buffer.byteLength(rpcResponseBody) },
    machine: machineInfo(),
    results: {
      'a_rest_metarelay GET /tokens/anvil/<c>/1': slim(results.restMetarelay),
      'c_rest_bare': slim(results.restBare),
      'b_rpc_metarelay POST GetTokenMetadata 50 ids': slim(results.rpcMetarelay),
      'd_rpc_bare': slim(results.rpcBare),
    },
    ratios: {
      'a/c': restRatio === null ? null : round(restRatio),
      'b/d': rpcRatio === null ? null : round(rpcRatio),
      target: TARGET_RATIO,
      restMeetsTarget: restRatio === null ? null : restRatio >= TARGET_RATIO,
      rpcMeetsTarget: rpcRatio === null ? null : rpcRatio >= TARGET_RATIO,
      // Bare CPU per request over metarelay's: the same question asked of server cost, not throughput.
      cpuPerRequestBareOverMetarelay: { rest: cpuRatio(results.restMetarelay, results.restBare), rpc: cpuRatio(results.rpcMetarelay, results.rpcBare) },
    },
  };
});
