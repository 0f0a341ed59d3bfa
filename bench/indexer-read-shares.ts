// Fair shares of a key's indexer reads (issue 54, finding 7): a victim's ordinary reads (GetTokenBalances,
// page of 50 with metadata) alone, then while 20 attackers with the same publishable key, from another
// client network, read pages of 1 000 balances with metadata as fast as they are answered (a refused
// attacker tries again after BENCH_RETRY_MS). Run with the shares off, then on (indexer.readShares).
//
//   npx tsx bench/indexer-read-shares.ts               # PGlite in a temp folder
//   BENCH_DB=postgres npx tsx bench/indexer-read-shares.ts
//   BENCH_VICTIM_READS=200 BENCH_ATTACKERS=20 BENCH_RETRY_MS=50
//
// The victim connects from 127.0.1.1 and the attackers from 127.0.0.1: two /24 networks on loopback.
// Result JSON on stdout; progress on stderr.
import http from 'node:http';
import os from 'node:os';
import type { Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { parseConfig } from '../src/config/load.ts';
import { ANVIL_DEPLOYER_KEY, erc721Document, erc721Path } from '../src/devchain/index.ts';
import { buildApp } from '../src/cli/app.ts';
import { createServices } from '../src/services.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { closeNow, dbKindFromEnv, deployErc721WithTokens, envNumber, machineInfo, openBenchDb, progress, runBench, startChain, type BenchChain, type BenchDb, type Cleanup } from './lib/harness.ts';
import { summarize } from './support.ts';

type Answer = { status: number; ms: number };

/** POSTs JSON over a keep-alive agent bound to one local address (the client network the service sees). */
function client(base: string, localAddress: string, key: string) {
  const agent = new http.Agent({ keepAlive: true, localAddress, maxSockets: 64 });
  const url = new URL(base);
  return {
    agent,
    post(path: string, body: unknown): Promise<Answer> {
      const payload = JSON.stringify(body);
      const t0 = performance.now();
      return new Promise((resolve, reject) => {
        const req = http.request(
          { host: url.hostname, port: url.port, path, method: 'POST', agent, headers: { 'content-type': 'application/json', 'x-access-key': key, 'content-length': Buffer.byteLength(payload) } },
          (res) => {
            res.on('data', () => undefined);
            res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - t0 }));
          },
        );
        req.on('error', reject);
        req.end(payload);
      });
    },
  };
}

async function serve(chain: BenchChain, bdb: BenchDb, cleanup: Cleanup, shares: boolean) {
  const config = parseConfig({
    database: bdb.location,
    chains: [{ chainId: chain.anvil.chainId, name: 'anvil', rpcUrls: [chain.anvil.rpcUrl], watch: false, indexer: { scope: 'all', fromBlock: 0, confirmations: 0, chunkBlocks: 200 } }],
    allowPrivateNetworks: true,
    logLevel: 'silent',
    media: { enabled: false },
    inProcessWorker: false,
    indexer: { readShares: { enabled: shares } },
  });
  const services = await createServices(config, { db: bdb.db, log: createLogger('silent'), migrate: false });
  const app = await buildApp(services);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address() as { port: number };
  const project = await services.projects.create(`bench-${shares ? 'shares' : 'none'}`);
  const { key } = await services.accessKeys.create(project.id, 'bench');
  const close = async () => {
    await closeNow(app);
    await services.close();
  };
  cleanup.add('close metarelay', close);
  return { services, base: `http://127.0.0.1:${addr.port}`, key, close };
}

runBench(async (cleanup) => {
  const victimReads = envNumber('BENCH_VICTIM_READS', 200);
  const attackers = envNumber('BENCH_ATTACKERS', 20);
  const retryMs = Number(process.env.BENCH_RETRY_MS ?? 50);
  const bdb = await openBenchDb(dbKindFromEnv(), cleanup);
  const chain = await startChain(cleanup);
  const ids = Array.from({ length: 1000 }, (_, i) => BigInt(i + 1));
  for (const id of ids) chain.origin.setDocument(erc721Path(String(id)), erc721Document(chain.origin.url, String(id)));
  const nft = (await deployErc721WithTokens(chain, { baseUri: `${chain.origin.url}/erc721/`, contractUri: '', ids })).toLowerCase() as Address;
  const holder = privateKeyToAccount(ANVIL_DEPLOYER_KEY).address.toLowerCase();
  const path = '/indexer/anvil/rpc/Indexer/GetTokenBalances';
  const ordinary = { accountAddress: holder, contractAddress: nft, includeCollectionTokens: true, includeMetadata: true, page: { pageSize: 50 } };
  const heavy = { accountAddress: holder, includeCollectionTokens: true, includeMetadata: true, page: { pageSize: 1000 } };

  const results = [];
  for (const shares of [false, true]) {
    const svc = await serve(chain, bdb, cleanup, shares);
    const s = svc.services;
    const ix = s.indexers.get(chain.anvil.chainId)!;
    while (await ix.follower.poll());
    // The metadata resolved first: the steady state of a served collection.
    for (let i = 0; i < ids.length; i += 100) await s.tokens.getTokens(ix.chain, nft, ids.slice(i, i + 100).map(String), { waitMs: 60_000 });
    await s.contracts.get(ix.chain, [nft], { waitMs: 60_000 });
    const victim = client(svc.base, '127.0.1.1', svc.key);
    const attacker = client(svc.base, '127.0.0.1', svc.key);
    const victimRun = async () => {
      const samples: number[] = [];
      let refused = 0;
      for (let i = 0; i < victimReads; i++) {
        const r = await victim.post(path, ordinary);
        if (r.status === 200) samples.push(r.ms);
        else refused++;
      }
      return { ...summarize(samples), refused };
    };
    for (let i = 0; i < 20; i++) await victim.post(path, ordinary);
    progress(`shares ${shares ? 'on' : 'off'}: victim alone`);
    const alone = await victimRun();
    progress(`shares ${shares ? 'on' : 'off'}: victim under ${attackers} attackers`);
    let stop = false;
    const tally = { done: 0, refused: 0, heavyMs: [] as number[] };
    const attack = Array.from({ length: attackers }, async () => {
      while (!stop) {
        const r = await attacker.post(path, heavy);
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
      attackers: { done: tally.done, refused: tally.refused, heavyPerSec: +(tally.done / (seconds + 2)).toFixed(1), heavy: summarize(tally.heavyMs) },
      loadavg: os.loadavg().map((x) => +x.toFixed(2)),
    });
    progress(`shares ${shares ? 'on' : 'off'}: victim p50 ${alone.p50Ms} ms alone, ${under.p50Ms} ms under attack; attackers ${tally.done} done, ${tally.refused} refused`);
    await svc.close();
  }
  return { bench: 'indexer-read-shares', db: dbKindFromEnv(), machine: machineInfo(), victimReads, attackers, retryMs, results };
});
