// What an idle service costs its node: the services of `serve` (relayer with 3 senders and its
// dispatcher, the chain watcher, the indexer's head follower) on one anvil chain mining a block every
// second, behind a counting JSON-RPC proxy, with nothing to relay. Prints JSON-RPC calls per second by
// method over the measured window (issue #31: the goal is at most 2 calls/s).
//
//   npx tsx bench/idle-calls.ts                 (IDLE_SEC=60 measured after IDLE_WARMUP_SEC=10)
//   METARELAY_TEST_DB=postgres npx tsx bench/idle-calls.ts
//
// Options: IDLE_BLOCK_TIME (anvil's block time, s; default 1), IDLE_BLOCK_TIME_MS (chains[].blockTimeMs;
// unset: learned), IDLE_WATCHED=1 (the watcher knows an NFT contract, so its idle reads are eth_getLogs
// too), IDLE_SERVICES=relayer (the relayer alone: no watcher, no indexer).
import { parseConfig } from '../src/config/load.ts';
import { deploySequenceV2Context, rpcCall, startAnvil } from '../src/devchain/index.ts';
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
const blockTime = Number(process.env.IDLE_BLOCK_TIME ?? 1);
const blockTimeMs = process.env.IDLE_BLOCK_TIME_MS ? Number(process.env.IDLE_BLOCK_TIME_MS) : undefined;
const relayerOnly = process.env.IDLE_SERVICES === 'relayer';
const watched = process.env.IDLE_WATCHED === '1';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const anvil = await startAnvil({ blockTime });
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
      ...(blockTimeMs ? { blockTimeMs } : {}),
      watch: !relayerOnly,
      relayer: {
        senderKeys: [...SENDERS],
        feeTokens: [{ address: null, name: 'Ether', symbol: 'ETH', decimals: 18, nativePrice: '1' }],
      },
      ...(relayerOnly ? {} : { indexer: { scope: 'all' as const } }),
    },
  ],
});
const services = await createServices(config, { db: store.db, log: createLogger('silent') });
// A contract the watcher knows: its reads are eth_getLogs (with none it has nothing to ask).
if (watched) await store.db.query(`INSERT INTO contracts (chain_id, address, type) VALUES ($1, $2, 'ERC721')`, [anvil.chainId, `0x${'ab'.repeat(20)}`]);
services.startDispatchers();
services.startBackground();
const what = relayerOnly ? 'relayer only' : `relayer + watcher${watched ? ' (a contract known)' : ''} + indexer`;
log(`idle: ${what}; warming up ${warmupSec} s, then measuring ${measureSec} s (anvil --block-time ${blockTime}, ${dbKind})`);
await sleep(warmupSec * 1000);
recorder.take();
const started = Date.now();
const headAt = async () => Number(await rpcCall<string>(anvil.rpcUrl, 'eth_blockNumber', []));
Number(
  await (await fetch(anvil.rpcUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' }))
    .json()
    .then((r: { result: string }) => r.result),
);
const firstBlock = await headAt();
await sleep(measureSec * 1000);
const trips = recorder.take();
const seconds = (Date.now() - started) / 1000;
const blocks = (await headAt()) - firstBlock;
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
      services: what,
      blockTimeS: blockTime,
      seconds: round(seconds),
      blocks,
      callsPerSec: round(calls / seconds),
      callsPerBlock: round(calls / Math.max(1, blocks)),
      httpRequestsPerSec: round(trips.length / seconds),
      byMethod: Object.fromEntries([...byMethod].sort((a, b) => b[1] - a[1]).map(([m, n]) => [m, round(n / seconds)])),
      perDay: Math.round((calls / seconds) * 86_400),
    },
    null,
    2,
  ),
);
