// What one JSON-RPC call to the node costs this process: Node's global fetch (undici behind WHATWG
// streams) against src/chain/node-fetch.ts (node:http keep-alive, the whole body into a Response), the
// fetch every chain client sends through since the thirteenth session (docs/performance-log.md, "The
// node's HTTP and PostgreSQL's round trips").
//
//   npx tsx bench/chain-http.ts
//
// Options: BENCH_CALLS (3 000 a round), BENCH_CONCURRENCY (8 in flight), BENCH_ROUNDS (3, alternated).
// Each round: eth_blockNumber to a local anvil, warmed up first; CPU of this process per call
// (process.cpuUsage), wall time. Result JSON on stdout; progress on stderr.
import { nodeFetch } from '../src/chain/node-fetch.ts';
import { startAnvil } from '../src/devchain/index.ts';
import { envNumber, machineInfo, progress, runBench } from './lib/harness.ts';

const CALLS = envNumber('BENCH_CALLS', 3000);
const CONCURRENCY = envNumber('BENCH_CONCURRENCY', 8);
const ROUNDS = envNumber('BENCH_ROUNDS', 3);

type Fetch = (url: string, init: RequestInit) => Promise<Response>;

async function round(url: string, f: Fetch) {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] });
  const call = async () => {
    const res = await f(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const answer = (await res.json()) as { result?: string };
    if (!answer.result) throw new Error(`no result: ${JSON.stringify(answer)}`);
  };
  for (let i = 0; i < 300; i++) await call();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  let started = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (started < CALLS) {
        started++;
        await call();
      }
    }),
  );
  const cpu = process.cpuUsage(c0);
  const wallMs = performance.now() - t0;
  return { cpuMsPerCall: Math.round(((cpu.user + cpu.system) / 1000 / CALLS) * 1000) / 1000, callsPerSec: Math.round((CALLS / wallMs) * 1000) };
}

runBench(async (cleanup) => {
  const anvil = await startAnvil({ blockTime: null });
  cleanup.add('anvil', () => anvil.stop());
  const rounds: Array<{ fetch: unknown; nodeFetch: unknown }> = [];
  for (let i = 0; i < ROUNDS; i++) {
    const a = await round(anvil.rpcUrl, (u, init) => fetch(u, init));
    const b = await round(anvil.rpcUrl, nodeFetch);
    progress(`round ${i + 1}: fetch ${a.cpuMsPerCall} ms/call, nodeFetch ${b.cpuMsPerCall} ms/call`);
    rounds.push({ fetch: a, nodeFetch: b });
  }
  return { bench: 'chain-http', command: 'npx tsx bench/chain-http.ts', calls: CALLS, concurrency: CONCURRENCY, machine: machineInfo(), rounds };
});
