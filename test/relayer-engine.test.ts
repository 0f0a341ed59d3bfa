// Engine features beyond the fault harness: relay batching through the guest module, and the sender
// balance floor.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, parseAbi, parseEther, type Address } from 'viem';
import { rpcCall } from '../src/devchain/rpc.ts';
import { SENDER_KEYS, erc20, sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { allFinal, deployWallets, mintBundles, sendAll, sendVia, waitFor, type LoadItem, type User } from './support/relay-load.ts';
import { signedBundle } from './support/sequence-wallet.ts';

const nftAbi = parseAbi(['function mint(address to, uint256 id)', 'function ownerOf(uint256 id) view returns (address)']);

async function receipt(env: RelayerEnv, id: string) {
  const r = await env.call('GetMetaTxnReceipt', { metaTxID: id });
  expect(r.status).toBe(200);
  return r.body.receipt;
}

describe('relay batching through the guest module', () => {
  let env: RelayerEnv;
  let nft: Address;
  let users: User[];

  beforeAll(async () => {
    // One sender, so every ready meta-transaction goes to the same batch.
    env = await startRelayerEnv({ relayer: { senderKeys: [SENDER_KEYS[0]], batchSize: 8 } });
    [nft] = await env.chain.deploy([{ contract: 'TestEnumerableERC721', args: ['https://example.test/'] }]);
    await sponsor(env, 'CONTRACT', env.token);
    await sponsor(env, 'CONTRACT', nft);
    users = await deployWallets(env, 4);
  }, 120_000);

  afterAll(async () => {
    await env?.close();
  });

  it('ready meta-transactions of different wallets share one transaction; each keeps its own status, and one failing does not sink the others', async () => {
    const [a, b] = await mintBundles(env, users.slice(0, 2), 1);
    // Two wallets mint the same NFT id: each simulates fine alone, only the first can succeed in the batch.
    const nftMint = (u: User) =>
      signedBundle({
        signerKey: u.signer.privateKey,
        wallet: u.wallet,
        chainId: env.chainId,
        deployed: true,
        txs: [{ to: nft, data: encodeFunctionData({ abi: nftAbi, functionName: 'mint', args: [u.wallet.address, 7n] }) }],
      }).then((bundle): LoadItem => ({ user: u, space: 0n, n: 0n, bundle }));
    const c = await nftMint(users[2]);
    const d = await nftMint(users[3]);

    // Hold dispatch while they queue, so one tick finds all four ready.
    const dispatcher = env.services.dispatchers[0];
    await dispatcher.stop();
    const ids = (await sendAll(sendVia(env), [a, b, c, d], 1)).map((x) => x.replace(/^0x/, ''));
    dispatcher.start();
    const final = await allFinal(env, ids, 60_000);

    const rows = await Promise.all(ids.map((id) => env.services.metaTxns.find(env.chainId, id)));
    expect(new Set(rows.map((r) => r!.txn_hash)).size).toBe(1);
    expect(rows.map((r) => r!.batch_index)).toEqual([0, 1, 2, 3]);
    const sent = await env.services.db.query<{ kind: string; n: string }>('SELECT kind, count(*)::text AS n FROM relay_txs WHERE chain_id = $1 GROUP BY kind', [env.chainId]);
    expect(Object.fromEntries(sent.rows.map((r) => [r.kind, Number(r.n)]))).toEqual({ batch: 1 });

    expect(ids.map((id) => final.get(id))).toEqual(['SUCCEEDED', 'SUCCEEDED', 'SUCCEEDED', 'FAILED']);
    // The batch's gas is shared by the members (by estimate), not shown whole on each of them.
    const mined = await env.public.getTransactionReceipt({ hash: rows[0]!.txn_hash as `0x${string}` });
    const shares = rows.map((r) => BigInt(r!.gas_used!));
    expect(shares.reduce((a, b) => a + b, 0n)).toBe(mined.gasUsed);
    for (const g of shares) expect(g).toBeLessThan(mined.gasUsed);
    const failed = await receipt(env, ids[3]);
    expect(failed.status).toBe('FAILED');
    expect(failed.revertReason).toMatch(/reverted/);
    const ok = await receipt(env, ids[0]);
    expect(ok.status).toBe('SUCCEEDED');
    expect(ok.txnHash).toBe(failed.txnHash);
    // The console's detail view shows each member the batch transaction that carried it.
    const detail = await env.app.inject({
      method: 'POST',
      url: '/rpc/Console/GetMetaTransaction',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${env.adminToken}` },
      payload: JSON.stringify({ chainID: String(env.chainId), metaTxID: ids[1] }),
    });
    expect(detail.statusCode, detail.body).toBe(200);
    expect(detail.json().attempts.map((t: { hash: string }) => t.hash)).toEqual([ok.txnHash]);
    // What each member did happened exactly once.
    expect(await env.public.readContract({ address: nft, abi: nftAbi, functionName: 'ownerOf', args: [7n] })).toBe(users[2].wallet.address);
    for (const u of users.slice(0, 2)) expect(await env.public.readContract({ address: env.token, abi: erc20, functionName: 'balanceOf', args: [u.wallet.address] })).toBe(1n);
  }, 120_000);
});

describe('sender balance floor', () => {
  let env: RelayerEnv;

  beforeAll(async () => {
    // anvil accounts hold 10 000 ETH: a floor of 20 000 puts both senders below it.
    env = await startRelayerEnv({ relayer: { minSenderBalance: '20000' } });
    await sponsor(env, 'CONTRACT', env.token);
  }, 120_000);

  afterAll(async () => {
    await env?.close();
  });

  it('a sender below the floor takes no new work, RuntimeStatus and the metrics say so; topped up, it resumes', async () => {
    const users = await deployWallets(env, 1);
    const [item] = await mintBundles(env, users, 1);
    const r = await sendVia(env)(item);
    expect(r.status).toBe(200);
    const id = r.body.txnHash.replace(/^0x/, '');
    await waitFor('the floor to be seen', async () => env.services.dispatchers[0].senders.size === 2 && [...env.services.dispatchers[0].senders.values()].every((s) => s.belowFloor));
    await new Promise((res) => setTimeout(res, 500));
    expect((await env.services.metaTxns.find(env.chainId, id))!.status).toBe('QUEUED');

    const status = await env.call('RuntimeStatus', {}, { 'x-access-key': env.accessKey });
    expect(status.status).toBe(200);
    for (const s of status.body.status.senders) {
      expect(s.enabled).toBe(false);
      expect(s.belowFloor).toBe(true);
    }
    expect(status.body.status.queue).toEqual({ queued: 1, sent: 0 });
    const metric = await env.services.metrics.registry.getSingleMetricAsString('metarelay_relayer_sender_below_floor');
    expect(metric.match(/ 1$/gm)?.length).toBe(2);

    for (const key of SENDER_KEYS) {
      const { privateKeyToAccount } = await import('viem/accounts');
      await rpcCall(env.rpcUrl, 'anvil_setBalance', [privateKeyToAccount(key).address, `0x${parseEther('30000').toString(16)}`]);
    }
    // The floor is read once per block, as is everything the sweep looks at.
    await rpcCall(env.rpcUrl, 'evm_mine', []);
    await waitFor('SUCCEEDED after the top-up', async () => (await env.services.metaTxns.find(env.chainId, id))!.status === 'SUCCEEDED', 30_000);
    const after = await env.call('RuntimeStatus', {}, { 'x-access-key': env.accessKey });
    expect(after.body.status.senders.every((s: { enabled: boolean }) => s.enabled)).toBe(true);
  }, 120_000);
});

describe('StopSender and StartSender', () => {
  let env: RelayerEnv;

  beforeAll(async () => {
    env = await startRelayerEnv();
    await sponsor(env, 'CONTRACT', env.token);
  }, 120_000);

  afterAll(async () => {
    await env?.close();
  });

  /** Sends one mint per user and returns the sender each was mined by, once all are final. */
  async function relayed(users: User[]) {
    const ids = (await sendAll(sendVia(env), await mintBundles(env, users, 1), 4)).map((x) => x.replace(/^0x/, ''));
    const final = await allFinal(env, ids, 60_000);
    expect([...final.values()].every((s) => s === 'SUCCEEDED')).toBe(true);
    const rows = await Promise.all(ids.map((id) => env.services.metaTxns.find(env.chainId, id)));
    return new Set(rows.map((r) => r!.sender));
  }

  it('admin only, with a clear error for a sender that does not exist', async () => {
    const none = await env.call('StopSender', { sender: 0 });
    expect(none.status).toBe(401);
    expect(none.body.error).toBe('Unauthorized');
    const key = await env.call('StopSender', { sender: 0 }, { 'x-access-key': env.accessKey });
    expect(key.status).toBe(403);
    const wrong = await env.call('StopSender', { sender: 2 }, { authorization: `Bearer ${env.adminToken}` });
    expect(wrong.status).toBe(400);
    expect(wrong.body.error).toBe('InvalidArgument');
    expect(wrong.body.cause).toMatch(/no sender 2: .* has senders 0 to 1/);
    const bad = await env.call('StartSender', { sender: 'one' }, { authorization: `Bearer ${env.adminToken}` });
    expect(bad.status).toBe(400);
    // Nothing was stopped by the refused calls.
    const status = await env.call('RuntimeStatus', {}, { 'x-access-key': env.accessKey });
    expect(status.body.status.senders.map((s: { stoppedAt: string | null }) => s.stoppedAt)).toEqual([null, null]);
  });

  it('a stopped sender takes no new work while the other does it all; RuntimeStatus and the metrics say so; started again, it works', async () => {
    const admin = { authorization: `Bearer ${env.adminToken}` };
    const [s0, s1] = (await env.call('RuntimeStatus', {}, { 'x-access-key': env.accessKey })).body.status.senders.map((s: { address: string }) => s.address.toLowerCase());
    const users = await deployWallets(env, 6);

    const stop = await env.call('StopSender', { sender: 0 }, admin);
    expect(stop.status, JSON.stringify(stop.body)).toBe(200);
    expect(stop.body).toEqual({});
    // The dispatcher reads the flag on its next claim of the leases.
    await waitFor('the stop to be seen', async () => env.services.dispatchers[0].stopped.has(s0));
    expect(await relayed(users.slice(0, 3))).toEqual(new Set([s1]));

    const status = (await env.call('RuntimeStatus', {}, { 'x-access-key': env.accessKey })).body.status.senders;
    expect(status[0]).toMatchObject({ enabled: false, belowFloor: false });
    expect(Date.parse(status[0].stoppedAt)).not.toBeNaN();
    expect(status[1]).toMatchObject({ enabled: true, stoppedAt: null });
    const metric = await env.services.metrics.registry.getSingleMetricAsString('metarelay_relayer_sender_stopped');
    expect(metric).toContain(`sender="${s0}"} 1`);
    expect(metric).toContain(`sender="${s1}"} 0`);

    // Start the first, stop the second: the work moves over.
    expect((await env.call('StartSender', { sender: 0 }, admin)).status).toBe(200);
    expect((await env.call('StopSender', { sender: 1 }, admin)).status).toBe(200);
    await waitFor('the swap to be seen', async () => env.services.dispatchers[0].stopped.has(s1) && !env.services.dispatchers[0].stopped.has(s0));
    expect(await relayed(users.slice(3))).toEqual(new Set([s0]));
    expect((await env.call('RuntimeStatus', {}, { 'x-access-key': env.accessKey })).body.status.senders.map((s: { enabled: boolean }) => s.enabled)).toEqual([true, false]);
    expect((await env.call('StartSender', { sender: 1 }, admin)).status).toBe(200);
    expect((await env.call('RuntimeStatus', {}, { 'x-access-key': env.accessKey })).body.status.senders.map((s: { enabled: boolean }) => s.enabled)).toEqual([true, true]);
  }, 120_000);
});
