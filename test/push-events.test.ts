// The push events added after metatxn.status and token.metadata_updated, each judged by what a real
// local receiver got: sender.low_balance / sender.recovered (real anvil balances, once per crossing,
// one event when two processes record the same crossing), metatxn.status for a fee-bumped replacement
// and for a reorg (automine off, blocks mined by the test), refresh.task_finished and
// contract.info_updated.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseEther, type Address, type Hex } from 'viem';
import { privateKeyToAddress } from 'viem/accounts';
import { rpcCall } from '../src/devchain/rpc.ts';
import { openDb } from '../src/store/db.ts';
import { recordBalanceLevel } from '../src/relayer/engine/balance-level.ts';
import { senderBalanceEvents } from '../src/events/sender-events.ts';
import { verifySignature } from '../src/events/signature.ts';
import { mine, revert, setAutomine, setNextBaseFee, snapshot, txpoolContent, txpoolHashes } from './support/anvil-control.ts';
import { SENDER_KEYS, sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { deployWallets, mintBundles, sendVia, waitFor, type User } from './support/relay-load.ts';
import { eventually, startRawServer, type RawServer } from './support/token-chain.ts';

let env: RelayerEnv;
let hooks: RawServer;
let secret: string;
let users: User[];
let nextUser = 0;
const received: { headers: Record<string, unknown>; body: string; json: any }[] = [];

const WARN = '5';
const FLOOR = '1';

beforeAll(async () => {
  env = await startRelayerEnv({
    webhooks: { pollMs: 20, retryBaseMs: 100 },
    // Balances are changed from outside (anvil_setBalance): every sweep reads them, quiet senders included.
    relayer: { confirmations: 3, pollMs: 30, minSenderBalance: FLOOR, warnSenderBalance: WARN, quietSenderReadMs: 0 },
  });
  hooks = await startRawServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      received.push({ headers: req.headers, body, json: JSON.parse(body) });
      res.writeHead(204).end();
    });
  });
  const r = await fetch(`${env.baseUrl}/rpc/Console/CreateWebhook`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${env.adminToken}` },
    body: JSON.stringify({ projectId: env.project.id, url: `${hooks.url}/events`, events: ['*'] }),
  });
  const created = await r.json();
  expect(r.status, JSON.stringify(created)).toBe(200);
  secret = created.secret;
  await sponsor(env, 'CONTRACT', env.token);
  users = await deployWallets(env, 4);
  await setAutomine(env.rpcUrl, false);
}, 120_000);

afterAll(async () => {
  await env?.close();
  await hooks?.stop();
});

const ofType = (type: string) => received.filter((r) => r.json.type === type);
const dispatcher = () => env.services.dispatchers[0];
const head = async () => Number(await env.public.getBlockNumber({ cacheTime: 0 }));

async function mineAndSweep(blocks = 1) {
  await mine(env.rpcUrl, blocks);
  const h = await head();
  await waitFor(`the dispatcher to sweep block ${h}`, async () => dispatcher().head >= h, 20_000, 10);
  await new Promise((r) => setTimeout(r, 150));
}

async function sendOne(): Promise<string> {
  const [item] = await mintBundles(env, [users[nextUser++]], 1);
  const r = await sendVia(env)(item);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.txnHash.replace(/^0x/, '');
}

const statusEvents = (id: string) =>
  ofType('metatxn.status')
    .map((r) => r.json.data)
    .filter((d) => d.metaTxnId === id);

describe('metatxn.status for replaced and reorged transactions', () => {
  it('a fee-bumped replacement is pushed as SENT with cause "replaced" and the new txnHash, before SUCCEEDED', async () => {
    const id = await sendOne();
    const first = await eventually(
      async () => statusEvents(id).find((d) => d.status === 'SENT'),
      (d) => expect(d).toBeTruthy(),
      20_000,
    );
    expect(first!.cause).toBeNull();
    const attempt = await env.services.db.query<{ hash: Hex; max_fee: string }>(
      `SELECT t.hash, t.max_fee::text AS max_fee FROM meta_txns m JOIN relay_txs t ON t.chain_id = m.chain_id AND t.sender = m.sender AND t.nonce = m.txn_nonce
       WHERE m.chain_id = $1 AND m.id = $2 ORDER BY t.id`,
      [env.chainId, id],
    );
    // SENT is recorded before the broadcast: priced out before it reaches the node, it would be refused there
    // (a new first attempt), not replaced.
    await waitFor('the first attempt in the pool', async () => txpoolHashes(await txpoolContent(env.rpcUrl)).includes(attempt.rows[0].hash), 20_000);
    // Priced out: the next blocks' base fee is far above the first attempt's cap, so it waits and is replaced after 3 blocks.
    await setNextBaseFee(env.rpcUrl, BigInt(attempt.rows[0].max_fee) * 3n);
    for (let i = 0; i < 6 && !statusEvents(id).some((d) => d.cause === 'replaced'); i++) await mineAndSweep();
    // On failure, say what happened instead: the events pushed, the attempts and why the slot stalled.
    const story = async () => {
      const rows = await env.services.db.query(
        `SELECT t.hash, t.status, t.broadcast_block, t.max_fee::text AS max_fee, m.status AS meta_status, m.stalled FROM meta_txns m
         JOIN relay_txs t ON t.chain_id = m.chain_id AND t.sender = m.sender AND t.nonce = m.txn_nonce WHERE m.chain_id = $1 AND m.id = $2 ORDER BY t.id`,
        [env.chainId, id],
      );
      return JSON.stringify({ head: await head(), events: statusEvents(id).map((d) => [d.status, d.cause]), attempts: rows.rows });
    };
    const replaced = await eventually(
      async () => statusEvents(id).find((d) => d.cause === 'replaced'),
      (d) => expect(d).toBeTruthy(),
    ).catch(async (err) => {
      throw new Error(`no "replaced" event: ${await story()}`, { cause: err });
    });
    expect(replaced).toMatchObject({ status: 'SENT', cause: 'replaced' });
    expect(replaced!.txnHash).not.toBe(first!.txnHash);
    expect(replaced!.receipt.txnReceipt ?? replaced!.receipt).toBeTruthy();
    await mineAndSweep();
    const done = await eventually(
      async () => statusEvents(id),
      (e) => expect(e.at(-1)?.status).toBe('SUCCEEDED'),
      20_000,
    );
    const stored = await env.services.metaTxns.find(env.chainId, id);
    expect(done.at(-1)!.txnHash).toBe(stored!.txn_hash);
    expect(done.at(-1)!.txnHash).toBe(replaced!.txnHash);
  }, 90_000);

  it('a reorg that drops the mined transaction is pushed as SENT with cause "reorged", then SUCCEEDED again', async () => {
    const snap = await snapshot(env.rpcUrl);
    const id = await sendOne();
    await eventually(
      async () => statusEvents(id).find((d) => d.status === 'SENT'),
      (d) => expect(d).toBeTruthy(),
      20_000,
    );
    await mineAndSweep();
    await eventually(
      async () => statusEvents(id),
      (e) => expect(e.at(-1)?.status).toBe('SUCCEEDED'),
      20_000,
    );
    await revert(env.rpcUrl, snap);
    // A chain of the same height again, without the transaction: the sweep sees the block hash change.
    await mineAndSweep(2);
    const reorged = await eventually(
      async () => statusEvents(id).find((d) => d.cause === 'reorged'),
      (d) => expect(d).toBeTruthy(),
      20_000,
    );
    expect(reorged).toMatchObject({ status: 'SENT', cause: 'reorged', minedAt: null });
    for (let i = 0; i < 5 && statusEvents(id).at(-1)?.status !== 'SUCCEEDED'; i++) await mineAndSweep();
    const all = await eventually(
      async () => statusEvents(id),
      (e) => expect(e.at(-1)?.status).toBe('SUCCEEDED'),
      20_000,
    );
    expect(all.map((d) => d.status)).toEqual(['QUEUED', 'SENT', 'SUCCEEDED', 'SENT', 'SUCCEEDED']);
  }, 90_000);
});

describe('sender.low_balance and sender.recovered', () => {
  const sender = privateKeyToAddress(SENDER_KEYS[0]).toLowerCase() as Address;
  const setBalance = (ether: string) => rpcCall(env.rpcUrl, 'anvil_setBalance', [sender, `0x${parseEther(ether).toString(16)}`]);
  const senderEvents = () => received.map((r) => r.json).filter((e) => e.type.startsWith('sender.') && e.data.sender === sender);

  // The events the sweeps recorded for this sender (the sweep records them before the dispatcher's head moves on).
  const recorded = async () => Number((await env.services.db.query<{ n: string }>('SELECT count(*)::text AS n FROM events WHERE lower(subject) = $1', [`sender:${env.chainId}:${sender}`])).rows[0].n);

  it('is sent once per crossing of the warning threshold and of minSenderBalance, not on every sweep, signed', async () => {
    const before = senderEvents().length;
    const recordedBefore = await recorded();
    await setBalance('3');
    await mineAndSweep();
    const warned = await eventually(
      async () => senderEvents().slice(before),
      (e) => expect(e.length).toBe(1),
    );
    expect(warned[0]).toMatchObject({
      type: 'sender.low_balance',
      chainId: env.chainId,
      projectId: null,
      data: {
        level: 'warning',
        previousLevel: 'ok',
        takesWork: true,
        balance: parseEther('3').toString(),
        minSenderBalance: parseEther(FLOOR).toString(),
        warnSenderBalance: parseEther(WARN).toString(),
      },
    });
    // More sweeps at the same level: nothing new.
    await mineAndSweep(1);
    await mineAndSweep(1);
    await setBalance('0.5');
    await mineAndSweep();
    const low = await eventually(
      async () => senderEvents().slice(before),
      (e) => expect(e.length).toBe(2),
    );
    expect(low[1]).toMatchObject({ type: 'sender.low_balance', data: { level: 'low', previousLevel: 'warning', takesWork: false } });
    await mineAndSweep();
    await setBalance('100');
    await mineAndSweep();
    const all = await eventually(
      async () => senderEvents().slice(before),
      (e) => expect(e.length).toBe(3),
    );
    expect(all[2]).toMatchObject({ type: 'sender.recovered', data: { level: 'ok', previousLevel: 'low', takesWork: true } });
    await mineAndSweep();
    // Judged where events are made: the sweeps recorded three, the last one (no crossing) none. The
    // deliveries are then looked at too; a wrong one could only come later under load, not fail this.
    expect((await recorded()) - recordedBefore).toBe(3);
    await new Promise((r) => setTimeout(r, 300));
    expect(senderEvents().length - before).toBe(3);
    const raw = received.find((r) => r.json.id === all[2].id)!;
    expect(verifySignature(secret, String(raw.headers['metarelay-signature']), raw.body)).toBe(true);
  }, 60_000);

  it('two processes recording the same crossing at once write one event (the level moves under the row lock)', async () => {
    const url = env.testDb.location;
    // A second connection to the same database when there is a server; PGlite is one process's database, so its two writers share it.
    const other = url.startsWith('postgres') ? await openDb(url) : env.testDb.db;
    try {
      const hook = senderBalanceEvents(env.services.events.bell);
      const crossing = { chainId: env.chainId, sender, balance: 1n, minSenderBalance: parseEther(FLOOR), warnSenderBalance: parseEther(WARN) };
      const count = async () =>
        Number((await env.services.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM events WHERE type LIKE 'sender.%' AND subject = $1`, [`sender:${env.chainId}:${sender}`])).rows[0].n);
      const n0 = await count();
      const results = await Promise.all([recordBalanceLevel(env.testDb.db, crossing, hook), recordBalanceLevel(other, crossing, hook)]);
      expect(results.filter(Boolean).length).toBe(1);
      expect(await count()).toBe(n0 + 1);
    } finally {
      if (other !== env.testDb.db) await other.close();
    }
  });
});

describe('refresh.task_finished', () => {
  it('is sent once when a task ends: all items done (with its counts), cancelled, or empty', async () => {
    const tasks = env.services.tasks;
    const contract = env.token.toLowerCase();
    const t = await tasks.create({ projectId: env.project.id, kind: 'tokens', chainId: env.chainId, contract, items: ['1', '2', '3'].map((item) => ({ item, contract })), priority: 5 });
    const owner = 'test-worker';
    const claimed = await tasks.claim(owner, 10, 30);
    const mine_ = claimed.filter((c) => c.task_id === t.id);
    expect(mine_.length).toBe(3);
    await tasks.complete(
      owner,
      env.chainId,
      mine_.slice(0, 2).map((c) => ({ taskId: t.id, item: c.item, contract, ok: true })),
    );
    await tasks.complete(owner, env.chainId, [{ taskId: t.id, item: mine_[2].item, contract, ok: false, reason: 'HTTP_404' }]);
    // Settling again (a repair pass) must not announce it twice.
    await tasks.settle([t.id]);
    const cancelled = await tasks.create({ projectId: env.project.id, kind: 'tokens', chainId: env.chainId, contract, items: [{ item: '9', contract }], priority: 5 });
    expect(await tasks.cancel(cancelled.id)).toBe(true);
    const empty = await tasks.create({ projectId: env.project.id, kind: 'tokens', chainId: env.chainId, contract, items: [], priority: 5 });
    const finished = await eventually(
      async () => ofType('refresh.task_finished').map((r) => r.json),
      (e) => expect(e.length).toBeGreaterThanOrEqual(3),
    );
    await new Promise((r) => setTimeout(r, 300));
    const byTask = (id: number) =>
      ofType('refresh.task_finished')
        .map((r) => r.json)
        .filter((e) => e.data.taskId === id);
    expect(byTask(t.id).length).toBe(1);
    expect(byTask(t.id)[0]).toMatchObject({
      projectId: env.project.id,
      chainId: env.chainId,
      data: { status: 'DONE', total: 3, succeeded: 2, failed: 1, kind: 'tokens', contractAddress: contract, cancelled: false },
    });
    expect(byTask(t.id)[0].data.finishedAt).toBeTruthy();
    expect(byTask(cancelled.id)).toMatchObject([{ data: { status: 'FAILED', cancelled: true, lastError: 'cancelled', total: 1 } }]);
    expect(byTask(empty.id)).toMatchObject([{ data: { status: 'DONE', total: 0 } }]);
    expect(finished.length).toBe(3);
  });
});

describe('contract.info_updated', () => {
  it("is sent when a contract's stored ContractInfo changes (a first read, an override), not when a write leaves it the same", async () => {
    const address = env.token.toLowerCase();
    const mineEvents = () =>
      ofType('contract.info_updated')
        .map((r) => r.json)
        .filter((e) => e.data.contractAddress === address);
    const r = await fetch(`${env.baseUrl}/rpc/Metadata/GetContractInfo`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-access-key': env.accessKey },
      body: JSON.stringify({ chainID: String(env.chainId), contractAddress: address }),
    });
    expect(r.status).toBe(200);
    const first = await eventually(
      async () => mineEvents(),
      (e) => expect(e.length).toBe(1),
      20_000,
    );
    expect(first[0]).toMatchObject({ projectId: null, chainId: env.chainId, data: { chainId: env.chainId, contractAddress: address, info: { address, type: 'ERC20' } } });
    expect(first[0].data.changed).toContain('type');
    const store = env.services.contractStore;
    await store.upsertLayers(env.chainId, [{ address: address as Address, override: { name: 'Renamed Token' } }]);
    const second = await eventually(
      async () => mineEvents(),
      (e) => expect(e.length).toBe(2),
    );
    expect(second[1].data.changed).toContain('name');
    expect(second[1].data.changed).not.toContain('type');
    expect(second[1].data.info).toMatchObject({ name: 'Renamed Token' });
    // The same override again, and a write of an unrelated layer to the same values: nothing a client sees changed.
    await store.upsertLayers(env.chainId, [{ address: address as Address, override: { name: 'Renamed Token' } }]);
    await new Promise((r) => setTimeout(r, 400));
    expect(mineEvents().length).toBe(2);
  });
});
