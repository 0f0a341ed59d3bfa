// Issue #34, the Indexer's webhook listeners, through the official SequenceIndexer client against a real
// service and indexer on anvil: every method field by field, real transfers indexed and POSTed, signed, to
// a local node:http receiver when (and only when) they match, paused listeners told nothing, projects kept
// apart, hostile input refused with webrpc errors.
import { SequenceIndexer, type EventLog, type WebhookListener } from '@0xsequence/indexer';
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifySignature } from '../src/events/signature.ts';
import type { ChainIndexer } from '../src/indexer/index.ts';
import { mine, revert, snapshot } from './support/anvil-control.ts';
import { rpc, startTestService, type TestService } from './support/service.ts';
import { eventually, startRawServer, startTokenChain, type RawServer, type TokenChain } from './support/token-chain.ts';
import { catchUp } from './support/catch-up.ts';

const ADMIN = 'indexer-listeners-test-admin-token';
const MAX = 4;
const someone = () => privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;

let [chain, t, ix, client, other, receiver] = [] as unknown as [TokenChain, TestService, ChainIndexer, SequenceIndexer, SequenceIndexer, RawServer];
let [erc20, nft, multi] = [] as unknown as Address[];
const got: Array<{ path: string; headers: Record<string, unknown>; body: string }> = [];

/** The refusal a call ended with (the client throws WebrpcError subclasses). */
const refusal = (p: Promise<unknown>) =>
  p.then(
    () => Promise.reject(new Error('the call was not refused')),
    (err: { name: string; status: number; cause?: string }) => err,
  );

const deliveriesOf = async (id: number) => Number((await t.services.db.query<{ n: string }>('SELECT count(*) AS n FROM webhook_deliveries WHERE webhook_id = $1', [id])).rows[0]!.n);
const bodiesAt = (path: string) => got.filter((g) => g.path === path).map((g) => JSON.parse(g.body) as EventLog & { id: number; chainId: number });
const call = (address: Address, contract: string, functionName: string, args: unknown[]) => ({ address, contract, functionName, args });

beforeAll(async () => {
  chain = await startTokenChain();
  t = await startTestService({
    // Deliveries to private addresses only where allowed: the receiver's host is.
    allowPrivateNetworks: false,
    chains: [{ ...chain.chainConfig, watch: false, indexer: { scope: 'all', fromBlock: 0, confirmations: 0, chunkBlocks: 50, pollMs: 50 } }],
    admin: { tokens: [ADMIN] },
    webhooks: { deadlineMs: 2_000, retryBaseMs: 100, pollMs: 50, retryHorizonSec: 60, allowedPrivateHosts: ['127.0.0.1'], maxListeners: MAX },
  });
  ix = t.services.indexers.get(chain.anvil.chainId)!;
  receiver = await startRawServer((req, res, url) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      got.push({ path: url.pathname, headers: req.headers, body });
      res.writeHead(200).end('{}');
    });
  });
  const base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  // Listeners are written with the project's secret key, where Sequence's client sends its secret
  // credential (jwtAuth: Authorization: BEARER), beside the app's publishable key.
  client = new SequenceIndexer(`${base}/indexer/anvil`, t.accessKey, t.secretKey);
  const p2 = await t.services.projects.create('listeners-other');
  other = new SequenceIndexer(`${base}/indexer/anvil`, undefined, (await t.services.accessKeys.create(p2.id, 'k', { kind: 'secret' })).key);
  [erc20, nft, multi] = (await chain.deploy([{ contract: 'TestIndexERC20' }, { contract: 'TestIndexERC721' }, { contract: 'TestIndexERC1155', args: ['http://127.0.0.1/{id}.json'] }])).map(
    (a) => a.toLowerCase() as Address,
  ) as [Address, Address, Address];
  await catchUp(ix);
  t.services.events.delivery.start();
}, 120_000);

afterAll(async () => {
  await receiver?.stop();
  await t?.close();
  await chain?.stop();
});

describe('the listener methods, field by field', () => {
  it('add, get, list, update, toggle, pause, resume, remove and removeAll answer the generated types', async () => {
    const A = someone();
    const added = await client.addWebhookListener({
      url: `${receiver.url}/crud`,
      filters: { events: ['Transfer(address indexed from, address indexed to, uint256 value)'], contractAddresses: [erc20.toUpperCase().replace('0X', '0x')], accounts: [A], tokenIDs: [] },
    });
    expect(added.status).toBe(true);
    expect((added as unknown as { secret: string }).secret).toMatch(/^whsec_/);
    const l: WebhookListener = added.listener;
    expect(l).toEqual({
      id: expect.any(Number),
      projectID: t.project.id,
      url: `${receiver.url}/crud`,
      filters: { events: ['Transfer(address indexed from, address indexed to, uint256 value)'], contractAddresses: [erc20], accounts: [A], tokenIDs: [] },
      name: '',
      updatedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      active: true,
    });
    expect((await client.getWebhookListener({ id: l.id })).listener).toEqual(l);
    expect((await client.getAllWebhookListeners({})).listeners).toEqual([l]);
    // A projectId naming the key's own project is honoured; another one is refused.
    expect((await client.getWebhookListener({ id: l.id, projectId: t.project.id })).listener).toEqual(l);
    expect(await refusal(client.getWebhookListener({ id: l.id, projectId: t.project.id + 100 }))).toMatchObject({ name: 'PermissionDenied', status: 403 });

    // Update: every field of the listener sent back is honoured.
    const upd = await client.updateWebhookListener({
      listener: { ...l, url: `${receiver.url}/crud2`, name: 'renamed', active: false, filters: { contractAddresses: [nft], tokenIDs: ['0x1f', '7'] } },
    });
    expect(upd.status).toBe(true);
    const now = (await client.getWebhookListener({ id: l.id })).listener;
    expect(now).toMatchObject({ id: l.id, projectID: t.project.id, url: `${receiver.url}/crud2`, name: 'renamed', active: false });
    expect(now.filters).toEqual({ events: [], contractAddresses: [nft], accounts: [], tokenIDs: ['31', '7'] });
    expect(new Date(now.updatedAt).getTime()).toBeGreaterThanOrEqual(new Date(l.updatedAt).getTime());
    // The copy read before the update is stale: refused, not applied over the newer one.
    const stale = await refusal(client.updateWebhookListener({ listener: { ...l, name: 'lost', updatedAt: '2000-01-01T00:00:00.000Z' } }));
    expect(stale).toMatchObject({ name: 'RequestConflict' });
    // The message reads in order: when the listener last changed, then the stale date the request sent.
    expect(stale.cause).toBe(
      `listener ${l.id} was last changed at ${new Date(now.updatedAt).toISOString()}, not at the updatedAt 2000-01-01T00:00:00.000Z sent: it changed since that copy was read. Read it again (GetWebhookListener) and send its updatedAt`,
    );
    expect(await refusal(client.updateWebhookListener({ listener: { ...now, projectID: t.project.id + 1 } }))).toMatchObject({ name: 'InvalidArgument' });

    const toggled = (await client.toggleWebhookListener({ id: l.id })).webhookListener;
    expect(toggled).toMatchObject({ id: l.id, active: true, name: 'renamed' });
    const second = (await client.addWebhookListener({ url: `${receiver.url}/crud3`, filters: { accounts: [A] } })).listener;
    expect((await client.pauseAllWebhookListeners({})).status).toBe(true);
    expect((await client.getAllWebhookListeners({})).listeners.map((x) => [x.id, x.active])).toEqual([
      [l.id, false],
      [second.id, false],
    ]);
    expect((await client.resumeAllWebhookListeners({})).status).toBe(true);
    expect((await client.getAllWebhookListeners({})).listeners.every((x) => x.active)).toBe(true);

    expect((await client.removeWebhookListener({ id: l.id })).status).toBe(true);
    expect(await refusal(client.getWebhookListener({ id: l.id }))).toMatchObject({ name: 'NotFound' });
    expect(await refusal(client.removeWebhookListener({ id: l.id }))).toMatchObject({ name: 'NotFound' });
    expect((await client.removeAllWebhookListeners({})).status).toBe(true);
    expect((await client.getAllWebhookListeners({})).listeners).toEqual([]);
    // Listeners are not the console's webhooks.
    const hooks = await rpc(t.app, '/rpc/Console/ListWebhooks', { projectId: t.project.id }, { authorization: `Bearer ${ADMIN}` });
    expect(hooks.body).toEqual({ webhooks: [] });
  });

  it('an admin token acts for the project projectId names, and must name one', async () => {
    const admin = { authorization: `Bearer ${ADMIN}` };
    const path = '/indexer/anvil/rpc/Indexer/';
    const none = await rpc(t.app, `${path}GetAllWebhookListeners`, {}, admin);
    expect(none.body).toMatchObject({ error: 'InvalidArgument', cause: expect.stringContaining('projectId') });
    const made = await rpc(t.app, `${path}AddWebhookListener`, { projectId: t.project.id, url: `${receiver.url}/admin`, filters: { accounts: [someone()] } }, admin);
    expect(made.status).toBe(200);
    expect((await client.getAllWebhookListeners({})).listeners.map((x) => x.id)).toEqual([made.body.listener.id]);
    expect((await rpc(t.app, `${path}GetAllWebhookListeners`, { projectId: 999_999 }, admin)).body).toMatchObject({ error: 'ProjectNotFound' });
    expect((await rpc(t.app, `${path}GetAllWebhookListeners`, {})).body).toMatchObject({ error: 'Unauthorized' });
    await client.removeAllWebhookListeners({});
  });
});

describe('deliveries', () => {
  it('a matching transfer is POSTed as an EventLog, signed; one that does not match is not; a paused listener is told nothing until resumed', async () => {
    const [A, B] = [someone(), someone()];
    const coin = await client.addWebhookListener({ url: `${receiver.url}/coin`, filters: { events: ['Transfer'], contractAddresses: [erc20], accounts: [A] } });
    const art = await client.addWebhookListener({ url: `${receiver.url}/art`, filters: { contractAddresses: [nft], tokenIDs: ['7'] } });
    const batch = await client.addWebhookListener({ url: `${receiver.url}/batch`, filters: { events: ['TransferBatch(address,address,address,uint256[],uint256[])'], accounts: [B] } });
    const secret = (r: unknown) => (r as { secret: string }).secret;
    await chain.send([
      call(erc20, 'TestIndexERC20', 'mint', [A, 500n]), // coin
      call(erc20, 'TestIndexERC20', 'mint', [B, 9n]), // no one: B is not coin's account
      call(nft, 'TestIndexERC721', 'mint', [B, 7n]), // art
      call(nft, 'TestIndexERC721', 'mint', [B, 8n]), // no one: token 8
      call(multi, 'TestIndexERC1155', 'mintBatch', [B, [1n, 2n], [10n, 20n]]), // batch
      call(multi, 'TestIndexERC1155', 'mint', [B, 3n, 1n]), // no one: TransferSingle
    ]);
    await catchUp(ix);
    // Events are written with the step that indexed them: once caught up, every delivery exists.
    expect([await deliveriesOf(coin.listener.id), await deliveriesOf(art.listener.id), await deliveriesOf(batch.listener.id)]).toEqual([1, 1, 1]);
    await eventually(
      async () => got.filter((g) => ['/coin', '/art', '/batch'].includes(g.path)).length,
      (n) => expect(n).toBe(3),
    );
    const [c] = bodiesAt('/coin');
    const delivery = got.find((g) => g.path === '/coin')!;
    expect(verifySignature(secret(coin), String(delivery.headers['metarelay-signature']), delivery.body)).toBe(true);
    expect(verifySignature(secret(art), String(delivery.headers['metarelay-signature']), delivery.body)).toBe(false);
    expect(delivery.headers['metarelay-event-type']).toBe('indexer.event_log');
    expect(c).toMatchObject({
      id: expect.any(Number),
      type: 'BLOCK_ADDED',
      contractAddress: erc20,
      contractType: 'ERC20',
      logDataType: 'TOKEN_TRANSFER',
      txnHash: expect.stringMatching(/^0x[0-9a-f]{64}$/),
      blockHash: expect.stringMatching(/^0x[0-9a-f]{64}$/),
      chainId: chain.anvil.chainId,
      event: { eventSig: 'Transfer(address,address,uint256)', names: ['from', 'to', 'value'], values: ['0x0000000000000000000000000000000000000000', A, '500'] },
    });
    expect(c!.uid).toBe(`${c!.txnHash}:${c!.txnLogIndex}`);
    const receipt = await ix.chain.public.getTransactionReceipt({ hash: c!.txnHash as `0x${string}` });
    expect(receipt.blockNumber).toBe(BigInt(c!.blockNumber));
    expect(c!.rawLog).toEqual({ address: erc20, topics: receipt.logs[0]!.topics, data: receipt.logs[0]!.data });
    expect(bodiesAt('/art')[0]).toMatchObject({ contractType: 'ERC721', event: { names: ['from', 'to', 'tokenId'], values: [expect.any(String), B, '7'] } });
    expect(bodiesAt('/batch')[0]).toMatchObject({
      contractType: 'ERC1155',
      event: { names: ['operator', 'from', 'to', 'ids', 'values'], values: [expect.any(String), expect.any(String), B, '["1","2"]', '["10","20"]'] },
    });

    // Paused: the transfer is indexed, nothing is queued for it. Resumed: the next one is delivered.
    await client.toggleWebhookListener({ id: coin.listener.id });
    await chain.send([call(erc20, 'TestIndexERC20', 'mint', [A, 1n])]);
    await catchUp(ix);
    expect(await deliveriesOf(coin.listener.id)).toBe(1);
    await client.toggleWebhookListener({ id: coin.listener.id });
    await chain.send([call(erc20, 'TestIndexERC20', 'mint', [A, 2n])]);
    await catchUp(ix);
    await eventually(
      async () => bodiesAt('/coin').map((b) => b.event!.values[2]),
      (v) => expect(v).toEqual(['500', '2']),
    );
    await client.removeAllWebhookListeners({});
  });
});

describe('reorgs', () => {
  it("a reorg that takes a told log away sends it again as BLOCK_REMOVED, then the new fork's log as BLOCK_ADDED", async () => {
    const A = someone();
    const url = chain.anvil.rpcUrl;
    await client.addWebhookListener({ url: `${receiver.url}/reorg`, filters: { contractAddresses: [erc20], accounts: [A] } });
    const snap = await snapshot(url);
    await chain.send([call(erc20, 'TestIndexERC20', 'mint', [A, 11n])]);
    await catchUp(ix);
    await eventually(
      async () => bodiesAt('/reorg').length,
      (n) => expect(n).toBe(1),
    );
    await revert(url, snap);
    await chain.resyncNonce();
    await chain.send([call(erc20, 'TestIndexERC20', 'mint', [A, 22n])]);
    await mine(url, 2);
    await catchUp(ix);
    const [added, removed, again] = await eventually(
      async () => bodiesAt('/reorg'),
      (b) => expect(b).toHaveLength(3),
    );
    expect(added).toMatchObject({ type: 'BLOCK_ADDED', event: { values: [expect.any(String), A, '11'] } });
    const { id: _a, type: _t, ...same } = added!;
    expect(removed).toEqual({ ...same, id: expect.any(Number), type: 'BLOCK_REMOVED' });
    expect(removed!.id).toBeGreaterThan(added!.id);
    expect(again).toMatchObject({ type: 'BLOCK_ADDED', blockNumber: added!.blockNumber, event: { values: [expect.any(String), A, '22'] } });
    expect(again!.blockHash).not.toBe(added!.blockHash);
    await client.removeAllWebhookListeners({});
  });
});

describe('projects and hostile input', () => {
  it("another project's key can neither see nor change a listener", async () => {
    const mine = (await client.addWebhookListener({ url: `${receiver.url}/mine`, filters: { accounts: [someone()] } })).listener;
    expect((await other.getAllWebhookListeners({})).listeners).toEqual([]);
    for (const p of [
      () => other.getWebhookListener({ id: mine.id }),
      () => other.toggleWebhookListener({ id: mine.id }),
      () => other.removeWebhookListener({ id: mine.id }),
      () => other.updateWebhookListener({ listener: { ...mine, projectID: 0, url: `${receiver.url}/stolen` } }),
    ]) {
      expect(await refusal(p())).toMatchObject({ name: 'NotFound', status: 400 });
    }
    await other.pauseAllWebhookListeners({});
    await other.removeAllWebhookListeners({});
    expect((await client.getWebhookListener({ id: mine.id })).listener).toEqual(mine);
    await client.removeAllWebhookListeners({});
  });

  it('private addresses, bad addresses, events the indexer does not read and one listener too many are refused, never a 500', async () => {
    const ok = { accounts: [someone()] };
    const cases: Array<[() => Promise<unknown>, string, RegExp]> = [
      [() => client.addWebhookListener({ url: 'http://10.1.2.3/hook', filters: ok }), 'InvalidArgument', /10\.1\.2\.3 is a private/],
      [() => client.addWebhookListener({ url: 'http://localhost:9/hook', filters: ok }), 'InvalidArgument', /localhost resolves to/],
      [() => client.addWebhookListener({ url: 'http://[::1]:9/hook', filters: ok }), 'InvalidArgument', /private, loopback/],
      [() => client.addWebhookListener({ url: 'https://user:pw@example.com/hook', filters: ok }), 'InvalidArgument', /credentials/],
      [() => client.addWebhookListener({ url: 'ftp://example.com/hook', filters: ok }), 'InvalidArgument', /http or https/],
      [() => client.addWebhookListener({ url: `${receiver.url}/x`, filters: { accounts: ['0x1234'] } }), 'InvalidArgument', /filters\.accounts\.0: not a 20-byte/],
      [() => client.addWebhookListener({ url: `${receiver.url}/x`, filters: { contractAddresses: ['hello'] } }), 'InvalidArgument', /filters\.contractAddresses\.0/],
      [() => client.addWebhookListener({ url: `${receiver.url}/x`, filters: { ...ok, tokenIDs: ['-1'] } }), 'InvalidArgument', /uint256 token id/],
      [() => client.addWebhookListener({ url: `${receiver.url}/x`, filters: { ...ok, events: ['Approval(address,address,uint256'] } }), 'InvalidArgument', /not an event signature/],
      [() => client.addWebhookListener({ url: `${receiver.url}/x`, filters: { ...ok, events: ['Approval(addres,address,uint256)'] } }), 'InvalidArgument', /not an event signature/],
      [() => client.addWebhookListener({ url: `${receiver.url}/x`, filters: { ...ok, events: ['toString'] } }), 'InvalidArgument', /not an event signature/],
      [() => client.addWebhookListener({ url: `${receiver.url}/x`, filters: { tokenIDs: ['1'] } }), 'InvalidArgument', /contractAddresses or accounts/],
      [() => client.addWebhookListener({ url: `${receiver.url}/x`, filters: { ...ok, topicHashes: ['0x'] } as never }), 'InvalidArgument', /topicHashes/],
      [() => client.getWebhookListener({ id: 'x' as never }), 'InvalidArgument', /id/],
      [() => client.toggleWebhookListener({ id: 424_242 }), 'NotFound', /no webhook listener 424242/],
    ];
    for (const [p, name, cause] of cases) {
      const r = await refusal(p());
      expect(r, JSON.stringify(r)).toMatchObject({ name });
      expect(r.status).toBeLessThan(500);
      expect(r.cause).toMatch(cause);
    }
    for (let i = 0; i < MAX; i++) await client.addWebhookListener({ url: `${receiver.url}/n${i}`, filters: ok });
    const full = await refusal(client.addWebhookListener({ url: `${receiver.url}/more`, filters: ok }));
    expect(full).toMatchObject({ name: 'ResourceExhausted', cause: expect.stringContaining(`${MAX} webhook listeners`) });
    // Another project has its own allowance.
    expect((await other.addWebhookListener({ url: `${receiver.url}/theirs`, filters: ok })).status).toBe(true);
    await client.removeAllWebhookListeners({});
    await other.removeAllWebhookListeners({});
  });
});
