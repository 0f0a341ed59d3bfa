// A second client's first reads while an attacker's keyless reads name a metadata host that never
// answers (issue 54, finding 1): the victim's latency and answers, unloaded and under the attack.
// Runs on any version of the service (it sets no new config), so before/after compare like for like.
//
//   npx tsx bench/fetch-fair-shares.ts            # PGlite in a temp folder
//   BENCH_DB=postgres npx tsx bench/fetch-fair-shares.ts
//
// Result JSON on stdout; progress on stderr.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { CONTRACT_DOCUMENT_PATH, contractDocument, erc721Document, erc721Path } from '../src/devchain/index.ts';
import { dbKindFromEnv, deployErc721WithTokens, machineInfo, openBenchDb, progress, runBench, startChain, startMetarelay, type Cleanup } from './lib/harness.ts';

const VICTIM_READS = 8;
const ORIGIN_DELAY_MS = 20;

function p50(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
}

runBench(async (cleanup: Cleanup) => {
  const chain = await startChain(cleanup);
  // The attacker's host: takes every request and never answers.
  const held: http.ServerResponse[] = [];
  const slow = http.createServer((_req, res) => void held.push(res));
  await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
  cleanup.add('slow host', () => {
    for (const res of held) res.destroy();
    slow.closeAllConnections();
    return new Promise<void>((r) => slow.close(() => r()));
  });
  const slowUrl = `http://127.0.0.1:${(slow.address() as AddressInfo).port}`;

  const victimIds = Array.from({ length: 2 * VICTIM_READS }, (_, i) => String(i + 1));
  for (const id of victimIds) chain.origin.setDocument(erc721Path(id), erc721Document(chain.origin.url, id), { delayMs: ORIGIN_DELAY_MS });
  chain.origin.setDocument(CONTRACT_DOCUMENT_PATH, contractDocument(chain.origin.url));
  const victim = await deployErc721WithTokens(chain, { baseUri: `${chain.origin.url}/erc721/`, contractUri: `${chain.origin.url}${CONTRACT_DOCUMENT_PATH}`, ids: victimIds.map(BigInt) });
  const attackIds = Array.from({ length: 200 }, (_, i) => BigInt(i + 1));
  const attacker = await deployErc721WithTokens(chain, { baseUri: `${slowUrl}/t/`, contractUri: `${slowUrl}/c.json`, ids: attackIds, batchSize: 100 });

  const db = await openBenchDb(dbKindFromEnv(), cleanup);
  const mr = await startMetarelay(chain, db, cleanup);
  const read = async (contract: string, ids: string, ip: string) => {
    const t0 = performance.now();
    const res = await mr.app.inject({ method: 'GET', url: `/tokens/anvil/${contract}/${ids}`, remoteAddress: ip });
    const ms = performance.now() - t0;
    const body = res.statusCode === 200 ? (JSON.parse(res.body) as Array<{ status: string }>) : [];
    return { ms, status: res.statusCode, available: body.filter((t) => t.status === 'AVAILABLE').length };
  };
  const victimRun = async (ids: string[]) => {
    const out = { ms: [] as number[], available: 0 };
    // One unseen token per read, one read at a time: a first view of a token page.
    for (const id of ids) {
      const r = await read(victim, id, '10.1.1.1');
      out.ms.push(r.ms);
      out.available += r.available;
    }
    return out;
  };

  const unloaded = await victimRun(victimIds.slice(0, VICTIM_READS));
  progress(`unloaded: p50 ${p50(unloaded.ms).toFixed(0)} ms, ${unloaded.available}/${VICTIM_READS} AVAILABLE`);

  // The attack: two keyless reads of 100 unseen tokens on the slow host, from two addresses.
  const attacks = [read(attacker, attackIds.slice(0, 100).join(','), '10.6.6.6'), read(attacker, attackIds.slice(100).join(','), '10.6.6.7')];
  await new Promise((r) => setTimeout(r, 300));
  const attacked = await victimRun(victimIds.slice(VICTIM_READS));
  progress(`attacked: p50 ${p50(attacked.ms).toFixed(0)} ms, ${attacked.available}/${VICTIM_READS} AVAILABLE; the slow host holds ${held.length} requests`);
  await Promise.all(attacks);

  return {
    bench: 'fetch-fair-shares',
    machine: machineInfo(),
    victimReads: VICTIM_READS,
    originDelayMs: ORIGIN_DELAY_MS,
    unloaded: { p50Ms: Math.round(p50(unloaded.ms)), available: unloaded.available },
    attacked: { p50Ms: Math.round(p50(attacked.ms)), available: attacked.available, slowHostRequestsHeld: held.length },
  };
});
