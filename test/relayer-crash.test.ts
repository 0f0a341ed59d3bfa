// A real `metarelay relayer` process killed (SIGKILL, by its own crash hook) at the two points where a
// crash is hardest to recover from, each more than once: right after signed attempts are committed
// (in the database, never broadcast), and right after they were broadcast (on the node, not recorded
// as broadcast). After the kills a `metarelay serve` finishes the queue, and the chain is the judge:
// all 200 meta-transactions SUCCEEDED, each executed exactly once (every wallet nonce used once, every
// balance exactly what was minted), sender nonces contiguous.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, http, parseAbi, type Address, type Hex } from 'viem';
import { rpcCall } from '../src/devchain/rpc.ts';
import { FINAL_STATUSES } from '../src/relayer/store.ts';
import { openDb, type Db } from '../src/store/db.ts';
import { setAutomine } from './support/anvil-control.ts';
import { startCli, type LongRunning } from './support/cli.ts';
import type { TestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';
import { QUOTE_SECRET, type RelayerEnv } from './support/relayer-env.ts';
import { deployWallets, expectClean, mintBundles, sendAll, waitFor, type LoadItem } from './support/relay-load.ts';
import type { TokenChain } from './support/token-chain.ts';
import { freePort } from './support/ports.ts';
import { relayedChainConfig, startSponsoredChain } from './support/sponsored-chain.ts';

const USERS = 50;
const SPACES = 4;

let chain: TokenChain;
let testDb: TestDb;
let token: Address;
let accessKey: string;
let port: number;
/** serve that only takes meta-transactions in (no dispatcher), and the full configuration. */
let intakeConfig: string;
let fullConfig: string;
let child: LongRunning | undefined;

beforeAll(async () => {
  ({ chain, token, testDb, accessKey } = await startSponsoredChain('crash'));
  port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'metarelay-crash-'));
  const config = (inProcessDispatcher: boolean) => ({
    port,
    database: testDb.location,
    allowPrivateNetworks: true,
    logLevel: 'warn',
    inProcessWorker: false,
    relayer: { quoteSecret: QUOTE_SECRET, inProcessDispatcher },
    // Few in flight per sender: the queue goes out over many dispatch passes, so ":3" has a third.
    chains: [relayedChainConfig(chain, token, { maxInFlightPerSender: 8 })],
  });
  intakeConfig = join(dir, 'intake.json');
  fullConfig = join(dir, 'full.json');
  writeFileSync(intakeConfig, JSON.stringify(config(false)));
  writeFileSync(fullConfig, JSON.stringify(config(true)));
}, 120_000);

afterAll(async () => {
  await child?.stop('SIGKILL');
  await testDb?.drop();
  await chain?.stop();
});

async function relayerUrl(): Promise<string> {
  await waitFor(
    'metarelay to answer',
    async () =>
      fetch(`http://127.0.0.1:${port}/health`)
        .then((r) => r.ok)
        .catch(() => false),
    60_000,
    100,
  );
  return `http://127.0.0.1:${port}/relayer/${chain.chainConfig.name}/rpc/Relayer`;
}

async function post(url: string, body: unknown) {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-access-key': accessKey }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

/** The database while no metarelay process holds it (PGlite is one process's). */
async function withDb<T>(fn: (db: Db) => Promise<T>): Promise<T> {
  if (TEST_DB === 'postgres') return fn(testDb.db);
  const db = await openDb(testDb.location);
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

interface Attempt {
  id: number;
  hash: Hex;
  meta: string | null;
  broadcast: boolean;
  status: string;
}

const attemptsAfter = (db: Db, id: number) =>
  db
    .query<{ id: string; hash: Hex; meta_txn_id: string | null; broadcast: boolean; status: string }>(
      `SELECT id::text AS id, hash, meta_txn_id, broadcast_at IS NOT NULL AS broadcast, status FROM relay_txs WHERE chain_id = $1 AND id > $2 ORDER BY id`,
      [chain.chainConfig.chainId, id],
    )
    .then((r) => r.rows.map((x): Attempt => ({ id: Number(x.id), hash: x.hash, meta: x.meta_txn_id, broadcast: x.broadcast, status: x.status })));

describe('relayer crash recovery (a real metarelay process, killed at chosen points)', () => {
  it('200 meta-transactions survive kills after persist and after broadcast, twice each: all SUCCEEDED, each executed once on chain', async () => {
    const pub = createPublicClient({ transport: http(chain.anvil.rpcUrl), cacheTime: 0 });
    const env = { rpcUrl: chain.anvil.rpcUrl, public: pub, chainId: chain.chainConfig.chainId, token, services: { db: testDb.db } } as unknown as RelayerEnv;
    const users = await deployWallets(env, USERS);
    const items = await mintBundles(env, users, SPACES);
    // Blocks every second: broadcast transactions wait in the mempool a while, as on a real chain.
    await setAutomine(chain.anvil.rpcUrl, false);
    await rpcCall(chain.anvil.rpcUrl, 'evm_setIntervalMining', [1]);
    if (TEST_DB === 'pglite') await testDb.db.close();

    // Everything is queued first, by a serve without a dispatcher, so no kill interrupts the intake.
    child = startCli(['serve', '--config', intakeConfig]);
    const intake = await relayerUrl();
    const send = (item: LoadItem) => post(`${intake}/SendMetaTxn`, { call: { walletAddress: item.user.wallet.address, contract: item.bundle.entrypoint, input: item.bundle.input } });
    const ids = (await sendAll(send, items, 16)).map((id) => id.replace(/^0x/, ''));
    expect(await child.stop('SIGTERM')).toBe(0);
    child = undefined;

    for (const spec of ['after-persist', 'after-persist:3', 'after-broadcast', 'after-broadcast:2']) {
      const before = await withDb(async (db) => Number((await db.query<{ m: string }>('SELECT coalesce(max(id), 0)::text AS m FROM relay_txs')).rows[0]!.m));
      const relayer = startCli(['relayer', '--config', fullConfig], { METARELAY_CRASH_AT: spec });
      child = relayer;
      await waitFor(`the relayer to die at ${spec}`, async () => relayer.child.exitCode !== null || relayer.child.signalCode !== null, 180_000, 50);
      child = undefined;
      // It killed itself: SIGKILL, not an exit of its own (a crash elsewhere would exit with a code).
      expect([relayer.child.signalCode, relayer.child.exitCode], relayer.output()).toEqual(['SIGKILL', null]);

      await withDb(async (db) => {
        const fresh = await attemptsAfter(db, before);
        // The pass it died in: signed, committed, and (markBroadcast never ran) not recorded as broadcast.
        const lastPass = fresh.filter((a) => !a.broadcast && a.status === 'PENDING');
        expect(lastPass.length, JSON.stringify(fresh)).toBeGreaterThan(0);
        const onNode = await Promise.all(
          lastPass.map((a) =>
            pub.getTransaction({ hash: a.hash }).then(
              () => true,
              () => false,
            ),
          ),
        );
        // after-persist: the node has never seen them; after-broadcast: it has every one.
        expect(onNode, spec).toEqual(lastPass.map(() => spec.startsWith('after-broadcast')));
        const metas = lastPass.flatMap((a) => (a.meta ? [a.meta] : []));
        const st = await db.query<{ status: string }>('SELECT DISTINCT status FROM meta_txns WHERE chain_id = $1 AND id = ANY($2)', [chain.chainConfig.chainId, metas]);
        expect(st.rows.map((r) => r.status)).toEqual(['SENT']);
        if (process.env.TEST_LOG) console.log(`killed at ${spec}: ${fresh.length} attempts signed in this run, ${lastPass.length} in the pass it died in`);
      });
    }

    // Some work is still left for the restart: the kills landed mid-queue.
    const left = await withDb(async (db) =>
      Number((await db.query<{ n: string }>(`SELECT count(*)::text AS n FROM meta_txns WHERE chain_id = $1 AND status IN ('QUEUED', 'SENT')`, [chain.chainConfig.chainId])).rows[0]!.n),
    );
    expect(left).toBeGreaterThan(0);
    if (process.env.TEST_LOG) console.log(`left for the restart: ${left} of ${ids.length}`);

    child = startCli(['serve', '--config', fullConfig]);
    const again = await relayerUrl();
    await waitFor(
      'all 200 final after the restart',
      async () => {
        const s = await Promise.all(ids.map((id) => post(`${again}/GetMetaTxnStatus`, { metaTxID: id }).then((r) => r.body.status as string)));
        return s.every((x) => FINAL_STATUSES.has(x));
      },
      240_000,
      1_000,
    );
    expect(await child.stop('SIGTERM')).toBe(0);
    child = undefined;

    if (TEST_DB === 'pglite') testDb.db = await openDb(testDb.location);
    // SUCCEEDED once each, one mined slot each, contiguous sender nonces, every wallet nonce used once,
    // every wallet holding exactly SPACES tokens.
    await expectClean({ ...env, services: { db: testDb.db } } as unknown as RelayerEnv, ids, users, SPACES);
    // On-chain ground truth for "none executed twice": the token minted exactly one per meta-transaction.
    const supply = await pub.readContract({ address: token, abi: parseAbi(['function totalSupply() view returns (uint256)']), functionName: 'totalSupply' });
    expect(supply).toBe(BigInt(USERS * SPACES));
  }, 900_000);
});
