// One dispatcher per chain across the fleet (relayer.dispatchers `leader`, the default): three `serve`
// processes on one PostgreSQL database, SendMetaTxn through all three. One process leads the chain's
// dispatch (its advisory lock) and alone holds the senders and signs; the others' intakes wake it by
// NOTIFY. The leader killed with SIGKILL mid-stream, another takes over, and every meta-transaction
// executes exactly once, judged on the chain (TxExecuted per meta-transaction, wallet nonces and
// balances, sender nonces contiguous, no slot signed twice). PostgreSQL only: PGlite is one process per
// database.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, http, type Address } from 'viem';
import { rpcCall } from '../src/devchain/rpc.ts';
import { FINAL_STATUSES } from '../src/relayer/store.ts';
import { setAutomine } from './support/anvil-control.ts';
import { startCli, type LongRunning } from './support/cli.ts';
import type { TestDb } from './support/db.ts';
import { QUOTE_SECRET, type RelayerEnv } from './support/relayer-env.ts';
import { deployWallets, expectClean, mintBundles, sendAll, waitFor, type LoadItem } from './support/relay-load.ts';
import type { TokenChain } from './support/token-chain.ts';
import { freePort } from './support/ports.ts';
import { relayedChainConfig, startSponsoredChain } from './support/sponsored-chain.ts';

const USERS = 20;
const SPACES = 2;

let chain: TokenChain;
let testDb: TestDb;
let token: Address;
let accessKey: string;
let procs: LongRunning[] = [];
let bases: string[] = [];
const dir = mkdtempSync(join(tmpdir(), 'metarelay-fleet-dispatch-'));

const leadsDispatch = (p: LongRunning) => new RegExp(`"role":"dispatch:${chain.chainConfig.chainId}","msg":"leading"`).test(p.output());

/** The pids that hold a sender lease or a dispatcher heartbeat of the chain now. */
async function dispatchingPids(): Promise<number[]> {
  const r = await testDb.db.query<{ pid: string }>(
    `SELECT DISTINCT split_part(owner, ':', 2) AS pid FROM relay_senders WHERE chain_id = $1 AND owner IS NOT NULL AND lease_until > now()
     UNION SELECT DISTINCT split_part(owner, ':', 2) FROM relay_instances WHERE chain_id = $1 AND seen_until > now()`,
    [chain.chainConfig.chainId],
  );
  return r.rows.map((x) => Number(x.pid)).sort();
}

async function post(base: string, method: string, body: unknown) {
  const r = await fetch(`${base}/relayer/${chain.chainConfig.name}/rpc/Relayer/${method}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-access-key': accessKey },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

beforeAll(async () => {
  ({ chain, token, testDb, accessKey } = await startSponsoredChain('fleet-dispatch'));
  const ports = [await freePort(), await freePort(), await freePort()];
  bases = ports.map((p) => `http://127.0.0.1:${p}`);
  procs = ports.map((port, i) => {
    const file = join(dir, `serve-${i}.json`);
    writeFileSync(
      file,
      JSON.stringify({
        port,
        database: testDb.location,
        allowPrivateNetworks: true,
        logLevel: 'info',
        inProcessWorker: true,
        // Takeover within about a check: short here, so the test waits little.
        postgres: { leaderCheckMs: 250, leaderSessionTimeoutMs: 5_000 },
        media: { enabled: false },
        relayer: { quoteSecret: QUOTE_SECRET },
        // Few in flight per sender: the stream takes several blocks, so the kill lands mid-stream.
        chains: [relayedChainConfig(chain, token, { maxInFlightPerSender: 3 })],
      }),
    );
    return startCli(['serve', '--config', file]);
  });
  await Promise.all(procs.map((p) => p.waitFor(/Server listening at/)));
}, 120_000);

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  await testDb?.drop();
  await chain?.stop();
});

describe('one dispatcher per chain in a fleet of three serve processes', () => {
  it('only the leader signs; killed mid-stream, another takes over and every meta-transaction executes once', async () => {
    const pub = createPublicClient({ transport: http(chain.anvil.rpcUrl), cacheTime: 0 });
    const env = { rpcUrl: chain.anvil.rpcUrl, public: pub, chainId: chain.chainConfig.chainId, token, services: { db: testDb.db } } as unknown as RelayerEnv;
    const users = await deployWallets(env, USERS);
    const items = await mintBundles(env, users, SPACES);
    await setAutomine(chain.anvil.rpcUrl, false);
    await rpcCall(chain.anvil.rpcUrl, 'evm_setIntervalMining', [1]);

    const leader = await waitFor('one process to lead the dispatch', async () => procs.filter(leadsDispatch).length === 1, 30_000, 50).then(() => procs.findIndex(leadsDispatch));
    // Round-robin over the three, as without a load balancer: two thirds arrive where no dispatcher runs.
    let k = 0;
    const send = (item: LoadItem) => post(bases[k++ % 3]!, 'SendMetaTxn', { call: { walletAddress: item.user.wallet.address, contract: item.bundle.entrypoint, input: item.bundle.input } });
    const firstHalf = await sendAll(send, items.slice(0, 30), 6);
    // Mid-stream: some relayed, some not yet; only the leader holds senders or beats as a dispatcher.
    await waitFor(
      'the stream under way',
      async () => {
        const s = await Promise.all(firstHalf.map((id) => post(bases[leader]!, 'GetMetaTxnStatus', { metaTxID: id }).then((r) => r.body.status as string)));
        return s.some((x) => FINAL_STATUSES.has(x)) && s.some((x) => x === 'SENT' || x === 'QUEUED');
      },
      60_000,
      100,
    );
    expect(await dispatchingPids()).toEqual([procs[leader]!.child.pid]);

    procs[leader]!.child.kill('SIGKILL');
    const others = [0, 1, 2].filter((i) => i !== leader);
    await waitFor('another process to lead the dispatch', async () => others.some((i) => leadsDispatch(procs[i]!)), 30_000, 50);
    const next = others.find((i) => leadsDispatch(procs[i]!))!;
    // The rest through the two left (round-robin), while the new leader takes the senders over.
    let j = 0;
    const sendLeft = (item: LoadItem) =>
      post(bases[others[j++ % 2]!]!, 'SendMetaTxn', { call: { walletAddress: item.user.wallet.address, contract: item.bundle.entrypoint, input: item.bundle.input } });
    const secondHalf = await sendAll(sendLeft, items.slice(30), 6);
    await waitFor('the new leader holding the senders', async () => (await dispatchingPids()).includes(procs[next]!.child.pid!), 60_000, 100);
    await expectClean(env, [...firstHalf, ...secondHalf], users, SPACES);
    // Only the new leader dispatches now (the dead one's leases and heartbeat gone or run out).
    await waitFor('one dispatching process', async () => (await dispatchingPids()).join() === String(procs[next]!.child.pid), 60_000, 200);
    expect(others.filter((i) => leadsDispatch(procs[i]!))).toEqual([next]);
  }, 400_000);
});
