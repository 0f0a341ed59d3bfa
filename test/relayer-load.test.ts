// The dispatch engine at volume, on anvil mining a block every second: 1 000 meta-transactions from 100
// wallets over 10 nonce spaces; and two relayer instances sharing one database, one stopping midway.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Hex } from 'viem';
import { rpcCall } from '../src/devchain/rpc.ts';
import { createServices, type Services } from '../src/services.ts';
import { openDb, type Db } from '../src/store/db.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { setAutomine } from './support/anvil-control.ts';
import { SENDER_KEYS, sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { deployWallets, expectClean, mintBundles, sendAll, sendVia, waitFor, type LoadItem } from './support/relay-load.ts';
import { rpc } from './support/service.ts';
import { buildApp } from '../src/cli/app.ts';
import { TEST_DB } from './support/env.ts';

/** anvil accounts 3 and 4, added to the test env's two senders. */
const MORE_SENDERS: Hex[] = ['0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6', '0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a'];

async function intervalMining(env: RelayerEnv) {
  await setAutomine(env.rpcUrl, false);
  await rpcCall(env.rpcUrl, 'evm_setIntervalMining', [1]);
}

describe('relayer at volume (1 s blocks)', () => {
  let env: RelayerEnv;

  beforeAll(async () => {
    // Every send comes from this one test client: its per-address share of the queue (200 by default,
    // tested in relayer-abuse) would measure how fast the chain mines, not the engine at volume.
    env = await startRelayerEnv({ relayer: { pollMs: 100, maxQueuedPerAddress: 100_000 } });
    await sponsor(env, 'CONTRACT', env.token);
  }, 120_000);

  afterAll(async () => {
    await env?.close();
  });

  it('1 000 meta-transactions from 100 wallets over 10 nonce spaces: all mined once, none lost, ledger equal to the chain', async () => {
    const users = await deployWallets(env, 100);
    const items = await mintBundles(env, users, 10);
    await intervalMining(env);
    const ids = await sendAll(sendVia(env), items, 16);
    expect(new Set(ids).size).toBe(1000);
    await expectClean(env, ids, users, 10);
  }, 400_000);
});

describe('two relayer instances on one database', () => {
  let env: RelayerEnv;
  let second: Services;
  let secondDb: Db | undefined;

  beforeAll(async () => {
    // Both dispatch (relayer.dispatchers `every`): the fair share of the senders between processes.
    env = await startRelayerEnv({ relayer: { senderKeys: [...SENDER_KEYS, ...MORE_SENDERS], pollMs: 50 }, service: { dispatchers: 'every' } });
    await sponsor(env, 'CONTRACT', env.token);
    // PostgreSQL: its own connection pool, as another process would have. PGlite is one process's file,
    // so the second instance shares the handle (still its own dispatcher, lease owner and ledger reads).
    secondDb = TEST_DB === 'postgres' ? await openDb(env.testDb.location) : undefined;
    second = await createServices(env.services.config, { db: secondDb ?? env.services.db, log: createLogger((process.env.TEST_LOG as 'silent' | undefined) ?? 'silent'), pollingIntervalMs: 50 });
    second.startDispatchers();
  }, 120_000);

  afterAll(async () => {
    await second?.close();
    await secondDb?.close();
    await env?.close();
  });

  it('both sign on a fair share of the senders, one stops midway and the other takes its senders over: no nonce used twice, no meta-transaction sent twice', async () => {
    const [one, two] = [env.services.dispatchers[0], second.dispatchers[0]];
    // Four senders, two processes: two each, and none held by both.
    await waitFor('the senders to be shared', async () => one.held.length === 2 && two.held.length === 2);
    expect(new Set([...one.held, ...two.held]).size).toBe(4);
    const users = await deployWallets(env, 20);
    const items = await mintBundles(env, users, 10);
    await intervalMining(env);
    const broadcasts = async (s: Services) => (await s.metrics.registry.getSingleMetric('metarelay_relayer_broadcasts_total')!.get()).values.reduce((a, v) => a + v.value, 0);
    // Intake wakes its own process's dispatcher at once, which can take a whole burst before the other
    // polls: half the first half goes in through each instance, as behind a load balancer.
    const secondApp = await buildApp(second);
    const viaSecond = (item: LoadItem) =>
      rpc(
        secondApp,
        `/relayer/${env.chain.chainConfig.name}/rpc/Relayer/SendMetaTxn`,
        { call: { walletAddress: item.user.wallet.address, contract: item.bundle.entrypoint, input: item.bundle.input } },
        { 'x-access-key': env.accessKey },
      );
    const firstHalf = (await Promise.all([sendAll(sendVia(env), items.slice(0, 50), 4), sendAll(viaSecond, items.slice(50, 100), 4)])).flat();
    await secondApp.close();
    await waitFor('both to broadcast', async () => (await broadcasts(env.services)) > 0 && (await broadcasts(second)) > 0);
    // The first instance hands over while its transactions are in flight.
    await one.stop();
    await waitFor('the second to hold all four', async () => two.held.length === 4);
    const secondHalf = await sendAll(sendVia(env), items.slice(100), 8);
    await expectClean(env, [...firstHalf, ...secondHalf], users, 10);
  }, 400_000);
});
