// Graceful drain of a real metarelay process relaying a stream of meta-transactions: SIGTERM mid-stream
// refuses new SendMetaTxn (503 + Retry-After) while reads and receipts are still answered, records what
// is in flight, hands its senders back and exits 0; a second relayer process carries on with those
// senders at once (not when the lease would have run out), and nothing is lost or sent twice. A second
// signal ends a drain at once.
// On PostgreSQL the second process runs alongside; PGlite is one process's database, so there it starts
// after the first has exited.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, http, type Address } from 'viem';
import { rpcCall } from '../src/devchain/rpc.ts';
import { FINAL_STATUSES } from '../src/relayer/store.ts';
import { openDb, type Db } from '../src/store/db.ts';
import { setAutomine } from './support/anvil-control.ts';
import { startCli, type LongRunning } from './support/cli.ts';
import type { TestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';
import { QUOTE_SECRET, SENDER_KEYS, type RelayerEnv } from './support/relayer-env.ts';
import { deployWallets, expectClean, mintBundles, sendAll, waitFor, type LoadItem } from './support/relay-load.ts';
import type { TokenChain } from './support/token-chain.ts';
import { freePort } from './support/ports.ts';
import { relayedChainConfig, startSponsoredChain } from './support/sponsored-chain.ts';

const USERS = 15;
const SPACES = 2;

let chain: TokenChain;
let testDb: TestDb;
let token: Address;
let accessKey: string;
const children: LongRunning[] = [];
const dir = mkdtempSync(join(tmpdir(), 'metarelay-drain-'));

function configFile(name: string, port: number): string {
  const file = join(dir, `${name}.json`);
  writeFileSync(
    file,
    JSON.stringify({
      port,
      database: testDb.location,
      allowPrivateNetworks: true,
      logLevel: 'info',
      inProcessWorker: false,
      relayer: { quoteSecret: QUOTE_SECRET },
      shutdown: { graceMs: 1_500, deadlineMs: 20_000 },
      // Few in flight per sender: the stream takes several blocks, so the signal lands mid-stream.
      chains: [relayedChainConfig(chain, token, { maxInFlightPerSender: 3 })],
    }),
  );
  return file;
}

beforeAll(async () => {
  ({ chain, token, testDb, accessKey } = await startSponsoredChain('drain'));
}, 120_000);

afterAll(async () => {
  for (const c of children) await c.stop('SIGKILL');
  await testDb?.drop();
  await chain?.stop();
});

async function post(base: string, method: string, body: unknown) {
  const r = await fetch(`${base}/relayer/${chain.chainConfig.name}/rpc/Relayer/${method}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-access-key': accessKey },
    body: JSON.stringify(body),
  });
  return { status: r.status, retryAfter: r.headers.get('retry-after'), body: await r.json() };
}

/** The database while no PGlite-holding process runs (PostgreSQL: the shared connection). */
async function withDb<T>(fn: (db: Db) => Promise<T>): Promise<T> {
  if (TEST_DB === 'postgres') return fn(testDb.db);
  const db = await openDb(testDb.location);
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

/** Waits for the process to end by itself (stop() would signal it again: a second signal exits at once). */
const exitOf = (p: LongRunning) => (p.child.exitCode !== null ? Promise.resolve(p.child.exitCode) : new Promise<number | null>((r) => p.child.once('exit', (code) => r(code))));

const sendersOf = (db: Db, pid: number) =>
  db
    .query<{ address: string; lease_until: Date }>(`SELECT address, lease_until FROM relay_senders WHERE chain_id = $1 AND split_part(owner, ':', 2) = $2`, [chain.chainConfig.chainId, String(pid)])
    .then((r) => r.rows);

describe(`graceful drain (${TEST_DB})`, () => {
  it('a relayer drained mid-stream loses nothing, and the other process takes its senders over at once', async () => {
    const pub = createPublicClient({ transport: http(chain.anvil.rpcUrl), cacheTime: 0 });
    const env = { rpcUrl: chain.anvil.rpcUrl, public: pub, chainId: chain.chainConfig.chainId, token, services: { db: testDb.db } } as unknown as RelayerEnv;
    const users = await deployWallets(env, USERS);
    const items = await mintBundles(env, users, SPACES);
    await setAutomine(chain.anvil.rpcUrl, false);
    await rpcCall(chain.anvil.rpcUrl, 'evm_setIntervalMining', [1]);
    if (TEST_DB === 'pglite') await testDb.db.close();

    const [portA, portB] = [await freePort(), await freePort()];
    const a = startCli(['serve', '--config', configFile('a', portA)]);
    children.push(a);
    const baseA = `http://127.0.0.1:${portA}`;
    await a.waitFor(/Server listening at/);
    let b: LongRunning | undefined;
    const startB = async () => {
      b = startCli(['serve', '--config', configFile('b', portB)]);
      children.push(b);
      await b.waitFor(/Server listening at/);
    };
    if (TEST_DB === 'postgres') await startB();

    const send = (item: LoadItem) => post(baseA, 'SendMetaTxn', { call: { walletAddress: item.user.wallet.address, contract: item.bundle.entrypoint, input: item.bundle.input } });
    const ids = await sendAll(send, items, 8);
    // Mid-stream: some relayed, some not yet.
    await waitFor(
      'the stream under way',
      async () => {
        const s = await Promise.all(ids.map((id) => post(baseA, 'GetMetaTxnStatus', { metaTxID: id }).then((r) => r.body.status as string)));
        const done = s.filter((x) => FINAL_STATUSES.has(x)).length;
        return done > 0 && done < ids.length && s.some((x) => x === 'SENT');
      },
      60_000,
      100,
    );
    // The lease A holds now would, without a hand-back, keep its senders from B until it ran out.
    const leaseEnds = TEST_DB === 'postgres' ? Math.max(...(await sendersOf(testDb.db, a.child.pid!)).map((r) => new Date(r.lease_until).getTime())) : 0;
    if (TEST_DB === 'postgres') expect(leaseEnds).toBeGreaterThan(0);

    a.child.kill('SIGTERM');
    await a.waitFor(/shutting down: draining/);
    // New work is refused with a hint to retry elsewhere; reads are still answered during the grace period.
    const refused = await send(items[0]);
    expect(refused.status).toBe(503);
    expect(refused.retryAfter).toBe('1');
    expect((await post(baseA, 'GetMetaTxnStatus', { metaTxID: ids[0] })).status).toBe(200);
    expect((await fetch(`${baseA}/ready`)).status).toBe(503);
    expect(await exitOf(a)).toBe(0);
    const exitedAt = Date.now();
    expect(a.output()).toMatch(/shut down cleanly/);
    // Its senders were handed back on the way out.
    if (TEST_DB === 'pglite') {
      expect(await withDb((db) => sendersOf(db, a.child.pid!))).toEqual([]);
      await startB();
    }
    if (TEST_DB === 'postgres') {
      await waitFor('B holding every sender', async () => (await sendersOf(testDb.db, b!.child.pid!)).length === SENDER_KEYS.length, 30_000, 20);
      const tookOverMs = Date.now() - exitedAt;
      // Before A's lease would have run out: handed back, not waited out.
      expect(Date.now()).toBeLessThan(leaseEnds);
      console.log(`drain: B held all ${SENDER_KEYS.length} senders ${tookOverMs} ms after A exited (A's lease had ${leaseEnds - exitedAt} ms left)`);
    }
    const baseB = `http://127.0.0.1:${portB}`;
    await waitFor(
      'every meta-transaction final through B',
      async () => {
        const s = await Promise.all(ids.map((id) => post(baseB, 'GetMetaTxnStatus', { metaTxID: id }).then((r) => r.body.status as string)));
        return s.every((x) => FINAL_STATUSES.has(x));
      },
      180_000,
      500,
    );
    // A second signal during the drain does not wait for the grace period: it exits at once. (Another
    // signal than the first: the same one again within SAME_SIGNAL_MS is the same Ctrl-C, src/cli/shutdown.ts.)
    b!.child.kill('SIGTERM');
    await b!.waitFor(/shutting down: draining/);
    b!.child.kill('SIGINT');
    expect(await exitOf(b!)).toBe(130);
    expect(b!.output()).toMatch(/second signal: exiting now/);
    expect(b!.output()).not.toMatch(/shut down cleanly/);
    if (TEST_DB === 'pglite') testDb.db = await openDb(testDb.location);
    await expectClean({ ...env, services: { db: testDb.db } } as unknown as RelayerEnv, ids, users, SPACES);
  }, 600_000);
});
