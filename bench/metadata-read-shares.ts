// Fair shares of a key's metadata reads by cost (http/metadata/read-shares.ts), beside
// bench/indexer-read-shares.ts: first what each kind of read costs alone (the weights' sizing), then a
// victim's ordinary reads (GetTokenMetadata of 10 settled tokens) alone and while BENCH_ATTACKERS loops
// with the same publishable key, from another client network, send GetTokenMetadataBatch of 50 × 50 ids
// as fast as they are answered (a refused one tries again after BENCH_RETRY_MS). Shares off, then on
// (metadata.readShares). Every body differs, so neither side is answered from the response cache.
//
//   npx tsx bench/metadata-read-shares.ts               # PGlite in a temp folder
//   BENCH_DB=postgres npx tsx bench/metadata-read-shares.ts
//   BENCH_VICTIM_READS=200 BENCH_ATTACKERS=20 BENCH_RETRY_MS=50 BENCH_SIZING=20
//   BENCH_HOT_CACHE=1   # tokens from the in-process hot cache; default off: every read from the store,
//                       # the cost a read must be weighed at, since whether its tokens are hot is not known before it runs
//
// The victim connects from 127.0.1.1 and the attackers from 127.0.0.1: two /24 networks on loopback.
// Result JSON on stdout; progress on stderr.
import http from 'node:http';
import os from 'node:os';
import type { Address } from 'viem';
import { parseConfig } from '../src/config/load.ts';
import { erc721Document, erc721Path } from '../src/devchain/index.ts';
import { buildApp } from '../src/cli/app.ts';
import { createServices } from '../src/services.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { closeNow, dbKindFromEnv, deployErc721WithTokens, envNumber, machineInfo, openBenchDb, progress, runBench, startChain, type BenchChain, type BenchDb, type Cleanup } from './lib/harness.ts';
import { summarize } from './support.ts';

type Answer = { status: number; ms: number; bytes: number };

/** GETs and POSTs over a keep-alive agent bound to one local address (the client network the service sees). */
function client(base: string, localAddress: string, key: string) {
  const agent = new http.Agent({ keepAlive: true, localAddress, maxSockets: 64 });
  const url = new URL(base);
  const send = (method: string, path: string, body?: unknown): Promise<Answer> => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string | number> = { 'x-access-key': key };
    if (payload !== undefined) Object.assign(headers, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) });
    const t0 = performance.now();
    return new Promise((resolve, reject) => {
      const req = http.request({ host: url.hostname, port: url.port, path, method, agent, headers }, (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => {
          bytes += c.length;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - t0, bytes }));
      });
      req.on('error', reject);
      req.end(payload);
    });
  };
  return { agent, post: (path: string, body: unknown) => send('POST', path, body), get: (path: string) => send('GET', path) };
}

async function serve(chain: BenchChain, bdb: BenchDb, cleanup: Cleanup, shares: boolean, hot: boolean) {
  const config = parseConfig({
    database: bdb.location,
    chains: [{ chainId: chain.anvil.chainId, name: 'anvil', rpcUrls: [chain.anvil.rpcUrl], watch: false }],
    allowPrivateNetworks: true,
    logLevel: 'silent',
    media: { enabled: false },
    inProcessWorker: false,
    // Hot: the tokens stay in the hot cache for the run. Not: every read goes to the store.
    metadata: { ...(hot ? { hotCacheTtlMs: 3_600_000 } : { hotCacheSize: 0 }), readShares: { enabled: shares } },
  });
  const services = await createServices(config, { db: bdb.db, log: createLogger('silent'), migrate: false });
  const app = await buildApp(services);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address() as { port: number };
  const project = await services.projects.create(`bench-meta-${shares ? 'shares' : 'none'}-${Date.now()}`);
  const { key } = await services.accessKeys.create(project.id, 'bench');
  const close = async () => {
    await closeNow(app);
    await services.close();
  };
  cleanup.add('close metarelay', close);
  return { services, base: `http://127.0.0.1:${addr.port}`, key, close };
}

/** `n` spellings of one address (its letters' cases): a batch's keys that name one contract `n` times. */
function spellings(a: string, n: number): string[] {
  const letters = [...a.slice(2)].flatMap((ch, i) => (/[a-f]/.test(ch) ? [i + 2] : []));
  return Array.from({ length: n }, (_, k) => [...a].map((ch, i) => (letters.includes(i) && (k >> letters.indexOf(i)) & 1 ? ch.toUpperCase() : ch)).join(''));
}

runBench(async (cleanup) => {
  const victimReads = envNumber('BENCH_VICTIM_READS', 200);
  const attackers = envNumber('BENCH_ATTACKERS', 20);
  const sizingRuns = envNumber('BENCH_SIZING', 20);
  const retryMs = Number(process.env.BENCH_RETRY_MS ?? 50);
  const hot = process.env.BENCH_HOT_CACHE === '1';
  const bdb = await openBenchDb(dbKindFromEnv(), cleanup);
  const chain = await startChain(cleanup);
  const N = 1000;
  const ids = Array.from({ length: N }, (_, i) => String(i + 1));
  for (const id of ids) chain.origin.setDocument(erc721Path(id), erc721Document(chain.origin.url, id));
  const nft = (await deployErc721WithTokens(chain, { baseUri: `${chain.origin.url}/erc721/`, contractUri: '', ids: ids.map(BigInt) })).toLowerCase() as Address;
  const keys = spellings(nft, 50);
  const window = (from: number, n: number) => Array.from({ length: n }, (_, i) => ids[(from + i) % N]);
  const rpc = '/rpc/Metadata/';
  // Each call a body of its own (no answer from the response cache).
  let seq = 0;
  const bodies = {
    one: () => ({ chainID: 'anvil', contractAddress: nft, tokenIDs: window(seq++, 1) }),
    ten: () => ({ chainID: 'anvil', contractAddress: nft, tokenIDs: window((seq++ * 7) % N, 10) }),
    hundred: () => ({ chainID: 'anvil', contractAddress: nft, tokenIDs: window(seq++ * 13, 100) }),
    batch: () => {
      const k = seq++;
      return { chainID: 'anvil', contractTokenMap: Object.fromEntries(keys.map((a, i) => [a, window(k * 17 + i * 50, 50)])) };
    },
    search: (pageSize: number) => ({ chainID: 'anvil', contractAddress: nft, q: `Dev ERC721 #${1 + (seq++ % 9)}`, page: { pageSize } }),
    filter: (pageSize: number) => ({ chainID: 'anvil', contractAddress: nft, filter: { properties: [{ name: 'Level', min: seq++ % 5, max: 1000 }] }, page: { pageSize } }),
  };

  const results = [];
  let sizing: Record<string, unknown> | undefined;
  for (const shares of [false, true]) {
    const svc = await serve(chain, bdb, cleanup, shares, hot);
    const s = svc.services;
    const c = s.chains.get(chain.anvil.chainId)!;
    for (let i = 0; i < N; i += 100) await s.tokens.getTokens(c, nft, ids.slice(i, i + 100), { waitMs: 60_000 });
    const victim = client(svc.base, '127.0.1.1', svc.key);
    const attacker = client(svc.base, '127.0.0.1', svc.key);
    if (!shares) {
      // What each read costs alone, sequentially (shares off: nothing refused).
      const time = async (what: string, call: () => Promise<Answer>) => {
        const ms: number[] = [];
        let rows = 0;
        for (let i = 0; i < sizingRuns; i++) {
          const r = await call();
          if (r.status !== 200) throw new Error(`${what}: HTTP ${r.status}`);
          ms.push(r.ms);
          rows = r.bytes;
        }
        return { ...summarize(ms), bytes: rows };
      };
      for (let i = 0; i < 5; i++) await victim.post(`${rpc}GetTokenMetadataBatch`, bodies.batch());
      progress('sizing');
      sizing = {
        getTokenMetadata1: await time('1 id', () => victim.post(`${rpc}GetTokenMetadata`, bodies.one())),
        getTokenMetadata10: await time('10 ids', () => victim.post(`${rpc}GetTokenMetadata`, bodies.ten())),
        getTokenMetadata100: await time('100 ids', () => victim.post(`${rpc}GetTokenMetadata`, bodies.hundred())),
        rest100: await time('REST 100 ids', () => victim.get(`/tokens/anvil/${nft}/${window(seq++ * 13, 100).join(',')}`)),
        batch50x50: await time('50 x 50', () => victim.post(`${rpc}GetTokenMetadataBatch`, bodies.batch())),
        searchByQuery1000: await time('search', () => victim.post(`${rpc}SearchTokenMetadataByQuery`, bodies.search(1000))),
        searchByQuery100: await time('search', () => victim.post(`${rpc}SearchTokenMetadataByQuery`, bodies.search(100))),
        searchByQuery20: await time('search', () => victim.post(`${rpc}SearchTokenMetadataByQuery`, bodies.search(20))),
        searchByFilter1000: await time('search by filter', () => victim.post(`${rpc}SearchTokenMetadata`, bodies.filter(1000))),
        searchByFilter100: await time('search by filter', () => victim.post(`${rpc}SearchTokenMetadata`, bodies.filter(100))),
        propertyFilters: await time('property filters', () => victim.post(`${rpc}GetTokenMetadataPropertyFilters`, { chainID: 'anvil', contractAddress: keys[seq++ % keys.length] })),
        contractInfoBatch100: await time('contract info x100', () => victim.post(`${rpc}GetContractInfoBatch`, { chainID: 'anvil', contractAddresses: keys.slice(0, 1 + (seq++ % 49)) })),
      };
      progress(`sizing: ${JSON.stringify(sizing)}`);
    }
    const victimRun = async () => {
      const samples: number[] = [];
      let refused = 0;
      for (let i = 0; i < victimReads; i++) {
        const r = await victim.post(`${rpc}GetTokenMetadata`, bodies.ten());
        if (r.status === 200) samples.push(r.ms);
        else refused++;
      }
      return { ...summarize(samples), refused };
    };
    for (let i = 0; i < 20; i++) await victim.post(`${rpc}GetTokenMetadata`, bodies.ten());
    progress(`shares ${shares ? 'on' : 'off'}: victim alone`);
    const alone = await victimRun();
    progress(`shares ${shares ? 'on' : 'off'}: victim under ${attackers} attackers`);
    let stop = false;
    const tally = { done: 0, refused: 0, heavyMs: [] as number[] };
    const attack = Array.from({ length: attackers }, async () => {
      while (!stop) {
        const r = await attacker.post(`${rpc}GetTokenMetadataBatch`, bodies.batch());
        if (r.status === 200) {
          tally.done++;
          tally.heavyMs.push(r.ms);
        } else {
          tally.refused++;
          if (retryMs > 0) await new Promise((w) => setTimeout(w, retryMs));
        }
      }
    });
    // Let the attack reach its steady state before the victim is measured.
    await new Promise((w) => setTimeout(w, 2_000));
    const t0 = performance.now();
    const under = await victimRun();
    const seconds = (performance.now() - t0) / 1000;
    stop = true;
    await Promise.all(attack);
    victim.agent.destroy();
    attacker.agent.destroy();
    results.push({
      shares,
      victimAlone: alone,
      victimUnderAttack: under,
      p50Ratio: +(under.p50Ms / alone.p50Ms).toFixed(2),
      attackers: { done: tally.done, refused: tally.refused, batchesPerSec: +(tally.done / (seconds + 2)).toFixed(1), batch: summarize(tally.heavyMs) },
      loadavg: os.loadavg().map((x) => +x.toFixed(2)),
    });
    progress(`shares ${shares ? 'on' : 'off'}: victim p50 ${alone.p50Ms} ms alone, ${under.p50Ms} ms under attack; attackers ${tally.done} done, ${tally.refused} refused`);
    await svc.close();
  }
  return { bench: 'metadata-read-shares', db: dbKindFromEnv(), machine: machineInfo(), hotCache: hot, victimReads, attackers, retryMs, sizing, results };
});
