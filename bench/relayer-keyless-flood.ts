// Issue #52, finding 7: a keyed caller's FeeOptions latency while keyless callers flood FeeOptions with
// maximal calls (16 bundles, each burning 800 000 gas), against its latency unloaded. Target: keyed p50
// during the flood within 2 × its unloaded p50.
//
//   METARELAY_TEST_DB=pglite npx tsx bench/relayer-keyless-flood.ts
//
// Options: BENCH_KEYED (40 keyed FeeOptions per phase, one at a time), BENCH_CLIENTS (8 keyless clients,
// each from a loopback address of its own, one call at a time, looping until the keyed phase ends),
// BENCH_BUCKETS (open: the keyless gas and request buckets are unlimited, so only the keyless share and
// the per-call gas budget bound the flood — the harder case; default: the shipped defaults, where most
// flood calls are refused 429 before any node call), BENCH_SHARE (anonymousSimulationConcurrency).
//
// The relayer is the test environment's (test/support/relayer-env.ts) behind a counting JSON-RPC proxy
// (test/support/rpc-proxy.ts), on an automining anvil. Everything goes over real HTTP. Reported: keyed
// p50/p99 unloaded and during the flood and their ratio, the keyless answers by status, and the keyless
// simulations (eth_call) that reached the node per keyless call.
//
// Result JSON on stdout; progress on stderr.
import http from 'node:http';
import { encodeFunctionData, parseAbi, type Address, type Hex } from 'viem';
import { SEQUENCE_V2_CONTEXT } from '../src/devchain/sequence.ts';
import { PAYEE, erc20, startRelayerEnv } from '../test/support/relayer-env.ts';
import { deployWallets } from '../test/support/relay-load.ts';
import { newSigner, sequenceWalletAbi, walletFor, type SequenceTx } from '../test/support/sequence-wallet.ts';
import { provideTestDbContext, round3 } from './lib/relayer-bench.ts';
import { envNumber, machineInfo, progress, runBench } from './lib/harness.ts';
import { summarize } from './support.ts';

const KEYED = envNumber('BENCH_KEYED', 40);
const CLIENTS = envNumber('BENCH_CLIENTS', 8);
const BUCKETS = (process.env.BENCH_BUCKETS ?? 'open') as 'open' | 'default';
// BENCH_SHARE: anonymousSimulationConcurrency (unset: the shipped default).
const SHARE = process.env.BENCH_SHARE ? envNumber('BENCH_SHARE', 2) : undefined;
const BUNDLES = 16;
const PER_BUNDLE = 800_000n;
const burnerAbi = parseAbi(['function go(uint256 need, uint256 reserve)']);

const tuple = (t: SequenceTx) => ({ delegateCall: false, revertOnError: true, gasLimit: t.gasLimit ?? 0n, target: t.to, value: 0n, data: t.data ?? '0x' });
const execute = (txs: SequenceTx[]): Hex => encodeFunctionData({ abi: sequenceWalletAbi, functionName: 'execute', args: [txs.map(tuple), 0n, '0x'] });

function post(url: string, from: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; ms: number }> {
  const u = new URL(url);
  const payload = JSON.stringify(body);
  const start = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        localAddress: from,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), ...headers },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - start }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

runBench(async (cleanup) => {
  await provideTestDbContext(cleanup);
  const open = BUCKETS === 'open';
  const env = await startRelayerEnv({
    proxy: true,
    service: {
      ...(open ? { anonymousSimulationGasPerSec: 1e12, anonymousSimulationGasBurst: 1e12 } : { anonymousRatePerSec: 10, anonymousBurst: 40 }),
      ...(SHARE ? { anonymousSimulationConcurrency: SHARE } : {}),
    },
  });
  cleanup.add('stop the relayer', () => env.close());
  const [burner] = await env.chain.deploy([{ contract: 'TestGasGriefer' }]);
  const floodWallets = (await deployWallets(env, BUNDLES)).map((u) => u.wallet.address as Address);
  const keylessWallets = new Set(floodWallets.map((w) => w.toLowerCase()));
  const burn: SequenceTx = { to: burner, data: encodeFunctionData({ abi: burnerAbi, functionName: 'go', args: [0n, 30_000n] }), gasLimit: PER_BUNDLE };
  const floodCall = { wallet: floodWallets[0], to: SEQUENCE_V2_CONTEXT.guestModule, data: execute(floodWallets.map((w) => ({ to: w, data: execute([burn]) }))) };
  const feeOptions = `${env.relayerUrl}/rpc/Relayer/FeeOptions`;
  const keyedCall = () => {
    const w = walletFor(newSigner().address);
    return { wallet: w.address, to: w.address, data: execute([{ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [PAYEE, 0n] }) }]) };
  };
  // Every keyed answer's time counts, and an answer other than a quote (an error under the flood) is counted too.
  const keyed = async () => {
    const ms: number[] = [];
    const failed: Record<string, number> = {};
    for (let i = 0; i < KEYED; i++) {
      const r = await post(feeOptions, '127.0.0.1', keyedCall(), { 'x-access-key': env.accessKey });
      if (r.status !== 200) failed[r.status] = (failed[r.status] ?? 0) + 1;
      ms.push(r.ms);
    }
    return { ...summarize(ms), notQuoted: failed };
  };

  // Warm the paths once (code reads, the estimation module), then the unloaded phase.
  await keyed();
  progress('unloaded');
  const unloaded = await keyed();

  progress(`flood: ${CLIENTS} keyless clients`);
  const proxy = env.proxy!;
  proxy.calls.length = 0;
  let stop = false;
  const statuses: Record<string, number> = {};
  const clients = Array.from({ length: CLIENTS }, async (_, i) => {
    for (let k = 0; k < 5_000 && !stop; k++) {
      const r = await post(feeOptions, `127.0.0.${11 + i}`, floodCall).catch(() => ({ status: 0, ms: 0 }));
      statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    }
  });
  // The flood is under way once the node has seen keyless simulations.
  while (!proxy.calls.some((c) => c.method === 'eth_call' && keylessWallets.has(String((c.params[0] as { to?: string })?.to ?? '').toLowerCase()))) {
    await new Promise((r) => setTimeout(r, 10));
  }
  const flooded = await keyed();
  stop = true;
  await Promise.all(clients);
  const keylessRuns = proxy.calls.filter((c) => c.method === 'eth_call' && keylessWallets.has(String((c.params[0] as { to?: string })?.to ?? '').toLowerCase())).length;
  const keylessCalls = Object.values(statuses).reduce((a, b) => a + b, 0);

  return {
    bench: 'relayer-keyless-flood',
    machine: machineInfo(),
    buckets: BUCKETS,
    share: SHARE ?? 'default',
    keyless: {
      clients: CLIENTS,
      bundlesPerCall: BUNDLES,
      gasPerBundle: Number(PER_BUNDLE),
      calls: keylessCalls,
      byStatus: statuses,
      nodeSimulations: keylessRuns,
      nodeSimulationsPerCall: round3(keylessRuns / Math.max(1, keylessCalls)),
    },
    keyedUnloaded: unloaded,
    keyedDuringFlood: flooded,
    p50Ratio: round3(flooded.p50Ms / unloaded.p50Ms),
  };
});
