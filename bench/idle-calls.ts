// What an idle service costs its node: the services of `serve` (relayer with 3 senders and its
// dispatcher, the chain watcher, the indexer's head follower) on one anvil chain mining a block every
// second, behind a counting JSON-RPC proxy, with nothing to relay. Prints JSON-RPC calls per second by
// method over the measured window (issue #31: the goal is at most 2 calls/s).
//
//   npx tsx bench/idle-calls.ts                 (IDLE_SEC=60 measured after IDLE_WARMUP_SEC=10)
//   METARELAY_TEST_DB=postgres npx tsx bench/idle-calls.ts
import { parseConfig } from '../src/config/load.ts';
import { deploySequenceV2Context, startAnvil } from '../src/devchain/index.ts';
import { createServices } from '../src/services.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { startRpcRecorder } from './lib/rpc-recorder.ts';
import { benchDb, log } from './support.ts';

/** anvil's accounts 1, 2 and 3. */
const SENDERS = [
  '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d',
  '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a',
  '0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6',
] as const;

const measureSec = Number(process.env.IDLE_SEC ?? 60);
const warmupSec = Number(process.env.IDLE_WARMUP_SEC ?? 10);
const dbKind = process.env.METARELAY_TEST_DB === 'postgres' ? 'postgres' : 'pglite';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const anvil = await startAnvil({ blockTime: 1 });
await deploySequenceV2Context(anvil.rpcUrl);
const recorder = await startRpcRecorder(anvil.rpcUrl);
const store = await benchDb(dbKind);
const config = parseConfig({
  allowPrivateNetworks: true,
  logLevel: 'silent',
  database: store.location,
  relayer: { quoteSecret: 'bench-quote-secret-0123456789abcdef0123' },
  chains: [
    {
      chainId: anvil.chainId,
      name: 'anvil',
      rpcUrls: [recorder.url],
      watch: true,
      relayer: {
        senderKeys: [...SENDERS],
        feeTokens: [{ address: null, name: 'Ether', symbol: 'ETH', decimals: 18, nativePrice: '1' }],
      },
      indexer: { scope: 'all' },
    },
  ],
});
const services = await createServices(config, { db: store.db, log: createLogger('silent') });
services.startDispatchers();
services.startBackground();
log(`idle: warming up ${warmupSec} s, then measuring ${measureSec} s (anvil --block-time 1, ${dbKind})`);
await sleep(warmupSec * 1000);
recorder.take();
const started = Date.now();
await sleep(measureSec * 1000);
const trips = recorder.take();
const seconds = (Date.now() - started) / 1000;
await services.close();
await recorder.stop();
await anvil.stop();
await store.drop();

const byMethod = new Map<string, number>();
for (const t of trips) for (const c of t.calls) byMethod.set(c.split(' ')[0], (byMethod.get(c.split(' ')[0]) ?? 0) + 1);
const calls = [...byMethod.values()].reduce((a, b) => a + b, 0);
const round = (x: number) => Math.round(x * 100) / 100;
console.log(
  JSON.stringify(
    {
      seconds: round(seconds),
      callsPerSec: round(calls / seconds),
      httpRequestsPerSec: round(trips.length / seconds),
      byMethod: Object.fromEntries([...byMethod].sort((a, b) => b[1] - a[1]).map(([m, n]) => [m, round(n / seconds)])),
      perDay: Math.round((calls / seconds) * 86_400),
    },
    null,
    2,
  ),
);
