// The dispatch engine under real faults: anvil with automine off (blocks are mined by the test), and a
// JSON-RPC proxy between metarelay and anvil that can make calls hang after forwarding them.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, http, type Address, type Hex } from 'viem';
import { dropTransaction, mine, restartAnvil, revert, setAutomine, setNextBaseFee, snapshot, txpoolContent, txpoolHashes } from './support/anvil-control.ts';
import { erc20, sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { allFinal, deployWallets, mintBundles, sendAll, sendVia, senderNoncesContiguous, statuses, waitFor, type User } from './support/relay-load.ts';
import { raise } from '../src/relayer/engine/gas-price.ts';

let env: RelayerEnv;
let users: User[];
let nextUser = 0;

interface AttemptRow {
  hash: Hex;
  status: string;
  max_fee: string;
  max_priority_fee: string;
  broadcast_block: string;
  broadcast_at: Date | null;
  sender: Address;
  nonce: string;
}

beforeAll(async () => {
  env = await startRelayerEnv({ proxy: true, rpcTimeoutMs: 1_000, relayer: { confirmations: 3, pollMs: 30 } });
  await sponsor(env, 'CONTRACT', env.token);
  users = await deployWallets(env, 10);
  await setAutomine(env.rpcUrl, false);
}, 120_000);

afterAll(async () => {
  await env?.close();
});

const dispatcher = () => env.services.dispatchers[0];
const head = async () => Number(await env.public.getBlockNumber({ cacheTime: 0 }));

/** Mines one block and waits until the dispatcher has swept it. */
async function mineAndSweep(blocks = 1) {
  await mine(env.rpcUrl, blocks);
  const h = await head();
  await waitFor(`the dispatcher to sweep block ${h}`, async () => dispatcher().head >= h, 20_000, 10);
  // One more tick so whatever the sweep broadcast has reached the node.
  const t = dispatcher().head;
  await new Promise((r) => setTimeout(r, 150));
  return t;
}

async function sendOne(): Promise<{ id: string; user: User }> {
  const user = users[nextUser++];
  const [item] = await mintBundles(env, [user], 1);
  const r = await sendVia(env)(item);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return { id: r.body.txnHash.replace(/^0x/, ''), user };
}

async function attempts(id: string): Promise<AttemptRow[]> {
  const r = await env.services.db.query<AttemptRow>(
    `SELECT t.hash, t.status, t.max_fee::text AS max_fee, t.max_priority_fee::text AS max_priority_fee, t.broadcast_block::text AS broadcast_block,
            t.broadcast_at, t.sender, t.nonce::text AS nonce
     FROM meta_txns m JOIN relay_txs t ON t.chain_id = m.chain_id AND t.sender = m.sender AND t.nonce = m.txn_nonce
     WHERE m.chain_id = $1 AND m.id = $2 ORDER BY t.id`,
    [env.chainId, id],
  );
  return r.rows;
}

async function meta(id: string) {
  const row = await env.services.metaTxns.find(env.chainId, id);
  if (!row) throw new Error(`no meta-transaction ${id}`);
  return row;
}

async function minted(user: User) {
  return env.public.readContract({ address: env.token, abi: erc20, functionName: 'balanceOf', args: [user.wallet.address] });
}

describe('relayer dispatch under faults (automine off, blocks mined by the test)', () => {
  it('a first attempt priced out by a base-fee jump is replaced after 3 blocks with both fees >= 110%, mined once', async () => {
    const { id, user } = await sendOne();
    const [first] = await waitFor('the first broadcast', async () => {
      const a = await attempts(id);
      return a.length && a[0].broadcast_at ? a : undefined;
    });
    expect(await txpoolHashes(await txpoolContent(env.rpcUrl))).toContain(first.hash);
    // The next blocks' base fee is far above what the first attempt offers: it cannot be included.
    await setNextBaseFee(env.rpcUrl, BigInt(first.max_fee) * 3n);
    const start = Number(first.broadcast_block);
    let replaced: AttemptRow[] = [];
    for (let i = 0; i < 6 && replaced.length < 2; i++) {
      await mineAndSweep();
      replaced = await attempts(id);
      if (replaced.length < 2) expect((await meta(id)).status).toBe('SENT');
    }
    expect(replaced.length).toBe(2);
    const [a, b] = replaced;
    expect(b.nonce).toBe(a.nonce);
    expect(b.sender).toBe(a.sender);
    expect(Number(b.broadcast_block) - start).toBeGreaterThanOrEqual(3);
    expect(BigInt(b.max_fee)).toBeGreaterThanOrEqual(raise(BigInt(a.max_fee), 10));
    expect(BigInt(b.max_priority_fee)).toBeGreaterThanOrEqual(raise(BigInt(a.max_priority_fee), 10));

    await mineAndSweep();
    await waitFor('SUCCEEDED', async () => (await meta(id)).status === 'SUCCEEDED');
    const after = await attempts(id);
    expect(after.filter((x) => x.status === 'MINED' || x.status === 'CONFIRMED').map((x) => x.hash)).toEqual([b.hash]);
    expect(after[0].status).toBe('REPLACED');
    expect((await meta(id)).txn_hash).toBe(b.hash);
    expect(await minted(user)).toBe(1n);
    const metrics = await env.services.metrics.registry.getSingleMetricAsString('metarelay_relayer_broadcasts_total');
    expect(metrics).toMatch(/kind="replacement"[^\n]* [1-9]/);
  }, 90_000);

  it('a transaction dropped from the mempool is re-broadcast (same signed bytes) and mined', async () => {
    const { id, user } = await sendOne();
    const [first] = await waitFor('the first broadcast', async () => {
      const a = await attempts(id);
      return a.length && a[0].broadcast_at ? a : undefined;
    });
    const sends = env.proxy!.count('eth_sendRawTransaction');
    expect(await dropTransaction(env.rpcUrl, first.hash)).toBe(true);
    expect(txpoolHashes(await txpoolContent(env.rpcUrl))).not.toContain(first.hash);
    await mineAndSweep();
    await waitFor('the re-broadcast to reach the pool', async () => txpoolHashes(await txpoolContent(env.rpcUrl)).includes(first.hash));
    expect(env.proxy!.count('eth_sendRawTransaction')).toBeGreaterThan(sends);
    await mineAndSweep();
    await waitFor('SUCCEEDED', async () => (await meta(id)).status === 'SUCCEEDED');
    const all = await attempts(id);
    expect(all.map((x) => x.hash)).toEqual([first.hash]);
    expect((await meta(id)).txn_hash).toBe(first.hash);
    expect(await minted(user)).toBe(1n);
  }, 60_000);

  it('eth_sendRawTransaction timing out after the node took it: the slot is looked up, never signed again', async () => {
    const removeRule = env.proxy!.addRule((c) => (c.method === 'eth_sendRawTransaction' ? { kind: 'timeoutAfterForward' } : undefined));
    try {
      const before = { sends: env.proxy!.count('eth_sendRawTransaction') };
      const { id, user } = await sendOne();
      const [first] = await waitFor('the attempt to be recorded', async () => {
        const a = await attempts(id);
        return a.length ? a : undefined;
      });
      // The node has it although the relayer never got an answer.
      await waitFor('the forwarded transaction in the pool', async () => txpoolHashes(await txpoolContent(env.rpcUrl)).includes(first.hash), 20_000);
      await waitFor('the broadcast to time out', async () => env.proxy!.count('eth_sendRawTransaction') > before.sends, 20_000);
      const senderBefore = await env.public.getTransactionCount({ address: first.sender, blockTag: 'latest' });
      // Time for a wrong second signing to happen (load only delays it); the transaction is mined either way.
      await new Promise((r) => setTimeout(r, 2_500));
      // Mined and swept until it is confirmed: under load the relayer may still be waiting out the
      // broadcast's timeout at the first sweep, and nothing sweeps again without a block.
      await waitFor('SUCCEEDED', async () => (await meta(id)).status === 'SUCCEEDED' || void (await mineAndSweep()), 30_000);
      expect((await attempts(id)).map((x) => x.hash)).toEqual([first.hash]);
      expect(await env.public.getTransactionCount({ address: first.sender, blockTag: 'latest' })).toBe(senderBefore + 1);
      expect(await minted(user)).toBe(1n);
    } finally {
      removeRule();
    }
  }, 90_000);

  it('a reorg that removes the mined transaction puts the meta-transaction back to SENT; it is re-included and confirmed', async () => {
    const snap = await snapshot(env.rpcUrl);
    const { id, user } = await sendOne();
    await waitFor('the first broadcast', async () => {
      const a = await attempts(id);
      return a.length && a[0].broadcast_at ? a : undefined;
    });
    await mineAndSweep();
    await waitFor('SUCCEEDED', async () => (await meta(id)).status === 'SUCCEEDED');
    const mined = await meta(id);
    expect(mined.confirmed).toBe(false);
    const block = mined.block_number!;
    const oldHash = JSON.parse(mined.receipt!).blockHash;

    // The chain goes back to before the transaction: its block is gone.
    await revert(env.rpcUrl, snap);
    await waitFor('the reorg to be seen (status back to SENT)', async () => (await meta(id)).status === 'SENT', 20_000);
    expect((await meta(id)).receipt).toBeNull();
    // Re-broadcast (the reverted chain's pool no longer has it), then a block includes it again.
    const hash = (await meta(id)).txn_hash!;
    await waitFor('the re-broadcast', async () => txpoolHashes(await txpoolContent(env.rpcUrl)).includes(hash), 20_000);
    await mineAndSweep();
    await waitFor('SUCCEEDED again', async () => (await meta(id)).status === 'SUCCEEDED', 20_000);
    const again = await meta(id);
    expect(JSON.parse(again.receipt!).blockHash).not.toBe(oldHash);
    expect(again.block_number).toBe(block);
    expect(await minted(user)).toBe(1n);
    const reorgs = await env.services.metrics.registry.getSingleMetricAsString('metarelay_relayer_reorged_total');
    expect(reorgs).toMatch(/ [1-9]/);

    // Final after the confirmation depth (3): the block and two on top of it.
    await mineAndSweep(2);
    await waitFor('confirmed', async () => (await meta(id)).confirmed, 10_000);
  }, 90_000);

  it('the fee cap forbids a replacement: the meta-transaction says why and the engine does not loop', async () => {
    const { id } = await sendOne();
    const [first] = await waitFor('the first broadcast', async () => {
      const a = await attempts(id);
      return a.length && a[0].broadcast_at ? a : undefined;
    });
    // A cap just above the first attempt: no replacement 10% higher fits under it.
    const d = dispatcher();
    const cap = d.policy.capWei;
    d.policy.capWei = BigInt(first.max_fee) + 1n;
    try {
      await setNextBaseFee(env.rpcUrl, BigInt(first.max_fee) * 3n);
      for (let i = 0; i < 4; i++) await mineAndSweep();
      const row = await meta(id);
      expect(row.status).toBe('SENT');
      expect(row.stalled).toMatch(/above the cap/);
      expect((await attempts(id)).length).toBe(1);
      const capped = await env.services.metrics.registry.getSingleMetricAsString('metarelay_relayer_fee_capped');
      expect(capped, capped).toMatch(/ [1-9]\d*$/m);
    } finally {
      d.policy.capWei = cap;
    }
    // With the cap lifted, the next sweep replaces it and it is mined.
    await mineAndSweep();
    await mineAndSweep();
    await waitFor('SUCCEEDED', async () => (await meta(id)).status === 'SUCCEEDED', 20_000);
    expect((await meta(id)).stalled).toBeNull();
  }, 90_000);

  it('a broadcast refused below a signed one leaves a hole: filled with a zero-value self-transfer, the refused one re-sent, nonces contiguous', async () => {
    const dispatcher0 = dispatcher();
    await dispatcher0.stop();
    const picked = users.slice(nextUser, nextUser + 3);
    nextUser += 3;
    const items = await mintBundles(env, picked, 1);
    const ids = (await sendAll(sendVia(env), items, 1)).map((x) => x.replace(/^0x/, ''));
    // One sender takes the three (the other is stopped), so the refused first one is below signed ones.
    const admin = { authorization: `Bearer ${env.adminToken}` };
    expect((await env.call('StopSender', { sender: 1 }, admin)).status).toBe(200);
    // The first broadcast of the next tick is refused by the node (a reason that is not about the nonce).
    let sends = 0;
    const refuse = env.proxy!.addRule((c) => (c.method === 'eth_sendRawTransaction' && ++sends === 1 ? { kind: 'fail', message: 'intrinsic gas too low' } : undefined));
    try {
      dispatcher0.start();
      const filler = await waitFor(
        'a filler transaction',
        async () => {
          const r = await env.services.db.query<{ sender: string; nonce: string }>(`SELECT sender, nonce::text AS nonce FROM relay_txs WHERE chain_id = $1 AND kind = 'filler'`, [env.chainId]);
          return r.rows[0];
        },
        20_000,
      );
      const refused = await env.services.db.query<{ sender: string; nonce: string; status: string }>(
        `SELECT sender, nonce::text AS nonce, status FROM relay_txs WHERE chain_id = $1 AND status = 'FAILED' AND kind = 'meta' ORDER BY id DESC LIMIT 1`,
        [env.chainId],
      );
      expect(refused.rows[0]).toMatchObject({ sender: filler.sender, nonce: filler.nonce });
    } finally {
      refuse();
      await env.call('StartSender', { sender: 1 }, admin);
    }
    // Mined and swept until all three are confirmed (bounded), however long each tick takes under load.
    await waitFor('all three SUCCEEDED', async () => [...(await statuses(env, ids)).values()].every((x) => x === 'SUCCEEDED') || void (await mineAndSweep()), 30_000);
    expect([...(await statuses(env, ids)).values()]).toEqual(['SUCCEEDED', 'SUCCEEDED', 'SUCCEEDED']);
    await mineAndSweep();
    for (const s of await senderNoncesContiguous(env)) expect(s.ok, s.detail).toBe(true);
    for (const u of picked) expect(await minted(u)).toBe(1n);
  }, 90_000);
});

describe('RPC failover', () => {
  let fo: RelayerEnv;

  beforeAll(async () => {
    fo = await startRelayerEnv({ proxy: true, failover: true, rpcTimeoutMs: 1_000 });
    await sponsor(fo, 'CONTRACT', fo.token);
  }, 120_000);

  afterAll(async () => {
    await fo?.close();
  });

  it('the first RPC URL failing every call (HTTP 503), or hanging a broadcast after forwarding it, the second serves: relayed once', async () => {
    const [user] = await deployWallets(fo, 1);
    const [item] = await mintBundles(fo, [user], 1);
    const down = fo.proxy!.addRule((c) => (c.method === 'eth_sendRawTransaction' ? { kind: 'timeoutAfterForward' } : { kind: 'http', status: 503 }));
    try {
      const seen = fo.proxy!.calls.length;
      const r = await sendVia(fo)(item);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      const id = r.body.txnHash.replace(/^0x/, '');
      await waitFor('SUCCEEDED', async () => (await fo.services.metaTxns.find(fo.chainId, id))?.status === 'SUCCEEDED', 30_000);
      // The first URL was tried (and failed) before the second answered.
      expect(fo.proxy!.calls.length).toBeGreaterThan(seen);
      const slots = await fo.services.db.query<{ n: string }>('SELECT count(*)::text AS n FROM relay_txs WHERE chain_id = $1', [fo.chainId]);
      expect(Number(slots.rows[0].n)).toBe(1);
      expect(await fo.public.readContract({ address: fo.token, abi: erc20, functionName: 'balanceOf', args: [user.wallet.address] })).toBe(1n);
    } finally {
      down();
    }
  }, 90_000);
});

describe('the node restarts and loses its pool', () => {
  let nr: RelayerEnv;

  beforeAll(async () => {
    nr = await startRelayerEnv({ proxy: true, rpcTimeoutMs: 1_000 });
    await sponsor(nr, 'CONTRACT', nr.token);
  }, 120_000);

  afterAll(async () => {
    await nr?.close();
  });

  it('anvil stopped and started again (chain kept, mempool lost, new port): in-flight transactions are re-broadcast and mined once', async () => {
    const fresh = await deployWallets(nr, 3);
    await setAutomine(nr.rpcUrl, false);
    const items = await mintBundles(nr, fresh, 1);
    const ids = (await sendAll(sendVia(nr), items, 3)).map((x) => x.replace(/^0x/, ''));
    await waitFor('all three broadcast', async () => (await statuses(nr, ids)).size === 3 && [...(await statuses(nr, ids)).values()].every((x) => x === 'SENT'), 20_000);
    await waitFor('all three in the pool', async () => txpoolHashes(await txpoolContent(nr.rpcUrl)).length >= 3, 20_000);
    // The node goes away with its pool; the relayer keeps talking to the proxy, now pointing at the new node.
    const again = await restartAnvil(nr.chain.anvil, { blockTime: null });
    try {
      nr.proxy!.setUpstream(again.rpcUrl);
      expect(txpoolHashes(await txpoolContent(again.rpcUrl))).toEqual([]);
      // Automine: the re-broadcasts are mined as they arrive.
      const final = await allFinal(nr, ids, 60_000);
      expect([...final.values()]).toEqual(['SUCCEEDED', 'SUCCEEDED', 'SUCCEEDED']);
      const pub = createPublicClient({ transport: http(again.rpcUrl), cacheTime: 0 });
      for (const u of fresh) expect(await pub.readContract({ address: nr.token, abi: erc20, functionName: 'balanceOf', args: [u.wallet.address] })).toBe(1n);
      const rebroadcasts = await nr.services.metrics.registry.getSingleMetricAsString('metarelay_relayer_broadcasts_total');
      expect(rebroadcasts).toMatch(/kind="rebroadcast"[^\n]* [1-9]/);
      const slots = await nr.services.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM relay_txs WHERE chain_id = $1 AND status <> 'FAILED'`, [nr.chainId]);
      expect(Number(slots.rows[0].n)).toBe(3);
    } finally {
      await again.stop();
    }
  }, 120_000);
});
