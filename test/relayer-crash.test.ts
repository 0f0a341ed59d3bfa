// kill -9 of a real `metarelay serve` process while 200 meta-transactions are queued, signed or in flight,
// then a restart on the same database: every one ends SUCCEEDED, none twice, sender nonces contiguous.

import { writeFileSync, mkdtempSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, http, type Address } from 'viem';
import { deploySequenceV2Context } from '../src/devchain/index.ts';
import { rpcCall } from '../src/devchain/rpc.ts';
import { sponsorRepo } from '../src/relayer/sponsors.ts';
import { FINAL_STATUSES } from '../src/relayer/store.ts';
import { accessKeyRepo } from '../src/store/access-keys.ts';
import { openDb } from '../src/store/db.ts';
import { projectRepo } from '../src/store/projects.ts';
import { setAutomine } from './support/anvil-control.ts';
import { startCli, type LongRunning } from './support/cli.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';
import { PAYEE, QUOTE_SECRET, SENDER_KEYS, type RelayerEnv } from './support/relayer-env.ts';
import { deployWallets, expectClean, mintBundles, sendAll, waitFor, type LoadItem } from './support/relay-load.ts';
import { startTokenChain, type TokenChain } from './support/token-chain.ts';

let chain: TokenChain;
let testDb: TestDb;
let token: Address;
let accessKey: string;
let configFile: string;
let child: LongRunning | undefined;

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as AddressInfo).port;
  await new Promise((r) => srv.close(r));
  return port;
}

beforeAll(async () => {
  chain = await startTokenChain();
  await deploySequenceV2Context(chain.anvil.rpcUrl);
  [token] = await chain.deploy([{ contract: 'DevERC20', args: ['Fee USD', 'FUSD'] }]);
  testDb = await createTestDb();
  const project = await projectRepo(testDb.db).create(`crash-${Math.random().toString(36).slice(2, 8)}`);
  accessKey = (await accessKeyRepo(testDb.db).create(project.id, 'crash')).key;
  await sponsorRepo(testDb.db).add({ projectId: project.id, chainId: chain.chainConfig.chainId, kind: 'CONTRACT', address: token.toLowerCase() as Address, name: 'token', active: true });
  const port = await freePort();
  configFile = join(mkdtempSync(join(tmpdir(), 'metarelay-crash-')), 'config.json');
  writeFileSync(
    configFile,
    JSON.stringify({
      port,
      database: testDb.location,
      allowPrivateNetworks: true,
      logLevel: 'warn',
      inProcessWorker: false,
      relayer: { quoteSecret: QUOTE_SECRET },
      chains: [
        {
          ...chain.chainConfig,
          watch: false,
          relayer: {
            senderKeys: SENDER_KEYS,
            paymentAddress: PAYEE,
            feeTokens: [{ address: token, name: 'Fee USD', symbol: 'FUSD', decimals: 6, nativePrice: '0.0004' }],
            pollMs: 50,
          },
        },
      ],
    }),
  );
}, 120_000);

afterAll(async () => {
  await child?.stop('SIGKILL');
  await testDb?.drop();
  await chain?.stop();
});

function startServe(): LongRunning {
  return startCli(['serve', '--config', configFile]);
}

async function baseUrl(p: LongRunning): Promise<string> {
  const port = JSON.parse((await import('node:fs')).readFileSync(configFile, 'utf8')).port;
  await waitFor('metarelay to answer', async () => fetch(`http://127.0.0.1:${port}/health`).then((r) => r.ok).catch(() => false), 60_000, 100);
  void p;
  return `http://127.0.0.1:${port}/relayer/${chain.chainConfig.name}/rpc/Relayer`;
}

async function post(url: string, body: unknown) {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-access-key': accessKey }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

describe('relayer crash recovery (a real metarelay process, kill -9)', () => {
  it('200 meta-transactions queued, signed or in flight survive kill -9 and a restart: all SUCCEEDED, none twice, nonces contiguous', async () => {
    const pub = createPublicClient({ transport: http(chain.anvil.rpcUrl), cacheTime: 0 });
    const env = { rpcUrl: chain.anvil.rpcUrl, public: pub, chainId: chain.chainConfig.chainId, token, services: { db: testDb.db } } as unknown as RelayerEnv;
    const users = await deployWallets(env, 50);
    const items = await mintBundles(env, users, 4);
    await setAutomine(chain.anvil.rpcUrl, false);
    await rpcCall(chain.anvil.rpcUrl, 'evm_setIntervalMining', [1]);
    // PGlite is one process's database: the test lets go of it while metarelay runs.
    if (TEST_DB === 'pglite') await testDb.db.close();

    child = startServe();
    const relayer = await baseUrl(child);
    const send = (item: LoadItem) => post(`${relayer}/SendMetaTxn`, { call: { walletAddress: item.user.wallet.address, contract: item.bundle.entrypoint, input: item.bundle.input } });
    const ids = (await sendAll(send, items, 16)).map((id) => id.replace(/^0x/, ''));
    // Every SendMetaTxn was answered, so every one is in the database; now the process dies mid-work.
    await child.stop('SIGKILL');
    child = undefined;

    const db = TEST_DB === 'pglite' ? await openDb(testDb.location) : testDb.db;
    const at = await db.query<{ status: string; n: string }>('SELECT status, count(*)::text AS n FROM meta_txns WHERE chain_id = $1 GROUP BY status', [chain.chainConfig.chainId]);
    const byStatus = Object.fromEntries(at.rows.map((r) => [r.status, Number(r.n)]));
    expect(Object.values(byStatus).reduce((a, b) => a + b, 0)).toBe(200);
    // The kill landed while work was left: some not yet final.
    expect((byStatus.QUEUED ?? 0) + (byStatus.SENT ?? 0), JSON.stringify(byStatus)).toBeGreaterThan(0);
    if (process.env.TEST_LOG) console.log("at kill -9:", byStatus);
    if (TEST_DB === 'pglite') await db.close();

    child = startServe();
    const again = await baseUrl(child);
    await waitFor(
      'all 200 final after the restart',
      async () => {
        const s = await Promise.all(ids.map((id) => post(`${again}/GetMetaTxnStatus`, { metaTxID: id }).then((r) => r.body.status as string)));
        return s.every((x) => FINAL_STATUSES.has(x));
      },
      180_000,
      1_000,
    );
    await child.stop('SIGTERM');
    child = undefined;

    if (TEST_DB === 'pglite') testDb.db = await openDb(testDb.location);
    await expectClean({ ...env, services: { db: testDb.db } } as unknown as RelayerEnv, ids, users, 4);
  }, 400_000);
});
