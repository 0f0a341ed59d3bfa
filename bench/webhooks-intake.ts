// Issue #15: what webhooks cost the relayer's intake. SendMetaTxn accepted per second (decoded,
// simulated, persisted as QUEUED with its metatxn.status event in the same transaction) with no
// webhook endpoint ("off": the outbox row is still written, no delivery row) against one endpoint
// subscribed to metatxn.status with a local receiver answering 204 and the delivery worker running in
// the same process ("on": a delivery row per event, and every QUEUED/SENT/SUCCEEDED POSTed while the
// next bundles arrive). Rounds alternate off, on, off, on… on one relayer, so drift of the machine's
// load shows as a difference between rounds of the same kind.
//
//   METARELAY_TEST_DB=pglite   npx tsx bench/webhooks-intake.ts
//   METARELAY_TEST_DB=postgres npx tsx bench/webhooks-intake.ts
//
// Options: BENCH_WALLETS (20), BENCH_PER_WALLET (5 bundles per wallet per round, each in its own nonce
// space), BENCH_ROUNDS (4), BENCH_CONCURRENCY (16 requests in flight).
// Result JSON on stdout; progress on stderr.
import { loadavg } from 'node:os';
import { encodeFunctionData } from 'viem';
import { erc20, sponsor, startRelayerEnv } from '../test/support/relayer-env.ts';
import { deployWallets, sendAll, sendVia, type LoadItem } from '../test/support/relay-load.ts';
import { signedBundle } from '../test/support/sequence-wallet.ts';
import { startRawServer } from '../test/support/token-chain.ts';
import { log } from './support.ts';
import { provideTestDbContext } from './lib/relayer-bench.ts';
import { Cleanup } from './lib/harness.ts';

const W = Number(process.env.BENCH_WALLETS ?? 20);
const PER = Number(process.env.BENCH_PER_WALLET ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const CONC = Number(process.env.BENCH_CONCURRENCY ?? 16);

const cleanup = new Cleanup();
await provideTestDbContext(cleanup);
const env = await startRelayerEnv({ webhooks: { pollMs: 50 } });
let delivered = 0;
const receiver = await startRawServer((req, res) => {
  req.resume();
  req.on('end', () => {
    delivered++;
    res.writeHead(204).end();
  });
});
await sponsor(env, 'CONTRACT', env.token);
const users = await deployWallets(env, W);
log(
  `${W} wallets deployed; load average ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}`,
);

async function console_(method: string, body: unknown) {
  const r = await fetch(`${env.baseUrl}/rpc/Console/${method}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${env.adminToken}` },
    body: JSON.stringify(body),
  });
  const json = await r.json();
  if (r.status !== 200) throw new Error(`${method}: ${JSON.stringify(json)}`);
  return json;
}

const results: { round: number; webhooks: 'on' | 'off'; bundles: number; seconds: number; perSec: number; load1: number }[] = [];
let hookId: number | undefined;
for (let round = 0; round < ROUNDS; round++) {
  const on = round % 2 === 1;
  if (on && hookId === undefined) hookId = (await console_('CreateWebhook', { projectId: env.project.id, url: `${receiver.url}/hook`, events: ['metatxn.status'] })).webhook.id;
  if (hookId !== undefined) await console_('UpdateWebhook', { id: hookId, enabled: on });
  // Fresh nonce spaces each round: every bundle is independent of the earlier rounds'.
  const items: LoadItem[] = await Promise.all(
    users.flatMap((user) =>
      Array.from({ length: PER }, async (_, s) => {
        const space = BigInt(1 + round * PER + s);
        const bundle = await signedBundle({
          signerKey: user.signer.privateKey,
          wallet: user.wallet,
          chainId: env.chainId,
          deployed: true,
          nonce: { space, n: 0n },
          txs: [{ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'mint', args: [user.wallet.address, 1n] }) }],
        });
        return { user, space, n: 0n, bundle };
      }),
    ),
  );
  const t0 = performance.now();
  await sendAll(sendVia(env), items, CONC);
  const seconds = (performance.now() - t0) / 1000;
  const r = {
    round,
    webhooks: on ? ('on' as const) : ('off' as const),
    bundles: items.length,
    seconds: Math.round(seconds * 100) / 100,
    perSec: Math.round(items.length / seconds),
    load1: Math.round(loadavg()[0] * 10) / 10,
  };
  results.push(r);
  log(`round ${round} webhooks ${r.webhooks}: ${r.bundles} accepted in ${r.seconds} s = ${r.perSec}/s (load ${r.load1}); delivered so far ${delivered}`);
  // Let the round's transactions be mined and its deliveries go before the next round is timed.
  const until = Date.now() + 20_000;
  while (Date.now() < until) {
    const q = await env.services.metaTxns.depth(env.chainId);
    if (q.queued + q.sent === 0) break;
    await new Promise((res) => setTimeout(res, 200));
  }
}
const mean = (k: 'on' | 'off') => {
  const xs = results.filter((r) => r.webhooks === k).map((r) => r.perSec);
  return Math.round(xs.reduce((a, b) => a + b, 0) / xs.length);
};
const off = mean('off');
const on = mean('on');
await env.close();
await receiver.stop();
await cleanup.run();
console.log(
  JSON.stringify({
    db: process.env.METARELAY_TEST_DB ?? 'pglite',
    wallets: W,
    perWallet: PER,
    concurrency: CONC,
    rounds: results,
    offPerSec: off,
    onPerSec: on,
    cost: `${Math.round((1 - on / off) * 1000) / 10}%`,
    delivered,
  }),
);
process.exit(0);
