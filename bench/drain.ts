// Issue #32: how long `metarelay serve` takes from SIGTERM to exit under load, with receipt long polls open.
//
//   METARELAY_TEST_DB=pglite   npx tsx bench/drain.ts
//   METARELAY_TEST_DB=postgres npx tsx bench/drain.ts      # PostgreSQL at 127.0.0.1:5432
//
// Options: BENCH_WALLETS (40: one sponsored meta-transaction each), BENCH_POLLS (32: GetMetaTxnReceipt
// long polls held at the signal, the per-address cap), BENCH_READERS (8 closed-loop GetMetaTxnStatus).
// Anvil does not mine, so every meta-transaction is SENT and every long poll is held (receiptWaitMs is
// the default 15 s) when SIGTERM arrives; shutdown.graceMs is the default 2 s. Printed: signal to exit,
// signal to each long poll's answer, reads answered during the drain, the exit code.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setAutomine } from '../test/support/anvil-control.ts';
import { startCli } from '../test/support/cli.ts';
import { freePort } from '../test/support/ports.ts';
import { PAYEE, QUOTE_SECRET, SENDER_KEYS, type RelayerEnv } from '../test/support/relayer-env.ts';
import { deployWallets, mintBundles, sendAll } from '../test/support/relay-load.ts';
import { startTokenChain } from '../test/support/token-chain.ts';
import { createPublicClient, http, type Address } from 'viem';
import { deploySequenceV2Context } from '../src/devchain/index.ts';
import { sponsorRepo } from '../src/relayer/intake/sponsors.ts';
import { accessKeyRepo } from '../src/store/access-keys.ts';
import { projectRepo } from '../src/store/projects.ts';
import { benchDb } from './support.ts';

const WALLETS = Number(process.env.BENCH_WALLETS ?? 40);
const POLLS = Number(process.env.BENCH_POLLS ?? 32);
const READERS = Number(process.env.BENCH_READERS ?? 8);

const TEST_DB = process.env.METARELAY_TEST_DB === 'postgres' ? 'postgres' : 'pglite';
const chain = await startTokenChain();
await deploySequenceV2Context(chain.anvil.rpcUrl);
const [token] = await chain.deploy([{ contract: 'DevERC20', args: ['Fee USD', 'FUSD'] }]);
const testDb = await benchDb(TEST_DB);
const project = await projectRepo(testDb.db).create('drain-bench');
const accessKey = (await accessKeyRepo(testDb.db).create(project.id, 'bench')).key;
await sponsorRepo(testDb.db).add({ projectId: project.id, chainId: chain.chainConfig.chainId, kind: 'CONTRACT', address: token!.toLowerCase() as Address, name: 'token', active: true });
const env = {
  rpcUrl: chain.anvil.rpcUrl,
  public: createPublicClient({ transport: http(chain.anvil.rpcUrl), cacheTime: 0 }),
  chainId: chain.chainConfig.chainId,
  token,
  services: { db: testDb.db },
} as unknown as RelayerEnv;
const users = await deployWallets(env, WALLETS);
const items = await mintBundles(env, users, 1);
await setAutomine(chain.anvil.rpcUrl, false);
if (TEST_DB === 'pglite') await testDb.db.close();

const port = await freePort();
const cfg = join(mkdtempSync(join(tmpdir(), 'metarelay-drain-bench-')), 'metarelay.json');
writeFileSync(
  cfg,
  JSON.stringify({
    port,
    database: testDb.location,
    allowPrivateNetworks: true,
    logLevel: 'info',
    inProcessWorker: false,
    relayer: { quoteSecret: QUOTE_SECRET },
    chains: [
      {
        ...chain.chainConfig,
        watch: false,
        relayer: { senderKeys: SENDER_KEYS, paymentAddress: PAYEE, feeTokens: [{ address: token, name: 'Fee USD', symbol: 'FUSD', decimals: 6, nativePrice: '0.0004' }], pollMs: 50 },
      },
    ],
  }),
);
const srv = startCli(['serve', '--config', cfg]);
const exited = new Promise<number | null>((r) => srv.child.once('exit', (code) => r(code)));
try {
  await srv.waitFor(/Server listening at/);
  const base = `http://127.0.0.1:${port}/relayer/${chain.chainConfig.name}/rpc/Relayer/`;
  const post = (method: string, body: unknown) =>
    fetch(base + method, { method: 'POST', headers: { 'content-type': 'application/json', 'x-access-key': accessKey }, body: JSON.stringify(body) }).then(async (r) => ({
      status: r.status,
      body: (await r.json()) as any,
    }));
  const ids = await sendAll((item) => post('SendMetaTxn', { call: { walletAddress: item.user.wallet.address, contract: item.bundle.entrypoint, input: item.bundle.input } }), items, 16);
  // Wait until the dispatcher has broadcast them (nothing is mined), so the polls are held.
  for (;;) {
    const s = await Promise.all(ids.map((id) => post('GetMetaTxnStatus', { metaTxID: id }).then((r) => r.body.status)));
    if (s.every((x) => x === 'SENT')) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  let signalAt = 0;
  const pollAnswers: number[] = [];
  const polls = ids.slice(0, POLLS).map((id) =>
    post('GetMetaTxnReceipt', { metaTxID: id })
      .then((_r) => pollAnswers.push(performance.now() - signalAt))
      .catch(() => undefined),
  );
  await new Promise((r) => setTimeout(r, 500));
  let reading = true;
  let reads = 0;
  const readers = Array.from({ length: READERS }, async (_, i) => {
    while (reading) {
      const r = await post('GetMetaTxnStatus', { metaTxID: ids[i % ids.length] }).catch(() => undefined);
      if (!r) break;
      if (signalAt) reads++;
    }
  });
  await new Promise((r) => setTimeout(r, 500));
  signalAt = performance.now();
  srv.child.kill('SIGTERM');
  const code = await exited;
  const exitMs = performance.now() - signalAt;
  reading = false;
  await Promise.all([...polls, ...readers]);
  if (code !== 0 || process.env.BENCH_SHOW_LOG)
    console.log(
      srv
        .output()
        .split('\n')
        .filter((l) => !l.includes('"msg":"request"'))
        .slice(-15)
        .join('\n'),
    );
  const sorted = pollAnswers.sort((a, b) => a - b);
  console.log(
    `drain (${TEST_DB}): SIGTERM to exit ${Math.round(exitMs)} ms, exit code ${code}; ${sorted.length}/${POLLS} long polls answered, ` +
      `after ${Math.round(sorted[0] ?? NaN)}..${Math.round(sorted.at(-1) ?? NaN)} ms; ${reads} reads answered during the drain (${READERS} readers)`,
  );
} finally {
  await srv.stop('SIGKILL');
  await testDb.drop().catch(() => undefined);
  await chain.stop();
}
