// Indexer webhook listeners through the official SequenceIndexer client, against a real service and
// indexer on anvil, with direct (non-relayed) transactions and real local receivers:
// - issue 57 item 3: a listener hears any event a contract emits (a game's own event, an ERC20 Approval),
//   named by signature, by a well-known name or by topic hash, sent as Sequence's decoded EventLog;
// - issue 54 finding 8: one project's flood of deliveries neither queues another project's behind it
//   (the claim takes each project in turn) nor holds every lane (a per-project share), deliveries per
//   project per block are capped and the excess counted, and everyone-addresses are refused in accounts.
import type http from 'node:http';
import { SequenceIndexer, type EventLog } from '@0xsequence/indexer';
import { toEventSelector, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANVIL_DEPLOYER_KEY } from '../src/devchain/index.ts';
import type { ChainIndexer } from '../src/indexer/index.ts';
import { scrape, startTestService, type TestService } from './support/service.ts';
import { eventually, startRawServer, startTokenChain, type RawServer, type TokenChain } from './support/token-chain.ts';
import { catchUp } from './support/catch-up.ts';

const CAP = 1_000;
const someone = () => privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
const DEPLOYER = privateKeyToAccount(ANVIL_DEPLOYER_KEY).address.toLowerCase();
const SCORED = 'Scored(address indexed player, uint256 points, string note)';

let [chain, t, ix, client, attacker, receiver] = [] as unknown as [TokenChain, TestService, ChainIndexer, SequenceIndexer, SequenceIndexer, RawServer];
/** Chain B, indexed on a watchlist. */
let [chainB, ixB, clientB] = [] as unknown as [TokenChain, ChainIndexer, SequenceIndexer];
let [game, erc20, flood] = [] as unknown as Address[];
const got: Array<{ path: string; body: string }> = [];
/** Requests the /hang receiver holds (answered when the test ends), and how many of them ended (the worker gave up). */
const hanging: http.ServerResponse[] = [];
let hangsEnded = 0;

const bodiesAt = (path: string) => got.filter((g) => g.path === path).map((g) => JSON.parse(g.body) as EventLog & { id: number; chainId: number });
const countAt = (prefix: string) => got.filter((g) => g.path.startsWith(prefix)).length;
const call = (address: Address, contract: string, functionName: string, args: unknown[]) => ({ address, contract, functionName, args });
const refusal = (p: Promise<unknown>) =>
  p.then(
    () => Promise.reject(new Error('the call was not refused')),
    (err: { name: string; status: number; cause?: string }) => err,
  );

beforeAll(async () => {
  [chain, chainB] = await Promise.all([startTokenChain(), startTokenChain({ chainId: 31_339 })]);
  const indexer = { fromBlock: 0, confirmations: 0, chunkBlocks: 50, pollMs: 50 };
  t = await startTestService({
    allowPrivateNetworks: false,
    chains: [
      { ...chain.chainConfig, watch: false, indexer: { ...indexer, scope: 'all' } },
      { ...chainB.chainConfig, name: 'anvil-b', watch: false, indexer: { ...indexer, scope: 'watchlist' } },
    ],
    // A deadline far beyond what a delivery to a local receiver takes: the hanging receiver's requests
    // stay open for the whole of the lanes test.
    webhooks: { deadlineMs: 30_000, retryBaseMs: 100, pollMs: 50, retryHorizonSec: 60, allowedPrivateHosts: ['127.0.0.1'], maxListeners: 25, maxListenerDeliveriesPerBlock: CAP },
  });
  ix = t.services.indexers.get(chain.anvil.chainId)!;
  ixB = t.services.indexers.get(chainB.anvil.chainId)!;
  receiver = await startRawServer((req, res, url) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      got.push({ path: url.pathname, body });
      if (url.pathname.startsWith('/hang')) {
        hanging.push(res);
        res.on('close', () => hangsEnded++);
      } else res.writeHead(200).end('{}');
    });
  });
  const base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  client = new SequenceIndexer(`${base}/indexer/anvil`, t.accessKey, t.secretKey);
  clientB = new SequenceIndexer(`${base}/indexer/anvil-b`, t.accessKey, t.secretKey);
  const p2 = await t.services.projects.create('listeners-attacker');
  attacker = new SequenceIndexer(`${base}/indexer/anvil`, undefined, (await t.services.accessKeys.create(p2.id, 'k', { kind: 'secret' })).key);
  [game, erc20, flood] = (await chain.deploy([{ contract: 'TestListenerGame' }, { contract: 'TestIndexERC20' }, { contract: 'TestFloodERC20' }])).map((a) => a.toLowerCase() as Address) as [
    Address,
    Address,
    Address,
  ];
  await catchUp(ix);
  t.services.events.delivery.start();
}, 180_000);

afterAll(async () => {
  for (const res of hanging) res.destroy();
  await receiver?.stop();
  await t?.close();
  await chain?.stop();
  await chainB?.stop();
});

describe('any event (issue 57)', () => {
  it("a game's own event and an Approval reach the receivers decoded, by signature, by name and by topic hash", async () => {
    const [A] = [someone()];
    const add = (path: string, filters: Record<string, unknown>) => client.addWebhookListener({ url: `${receiver.url}${path}`, filters });
    await add('/game', { contractAddresses: [game], events: [SCORED] });
    await add('/game-short', { contractAddresses: [game], events: ['Scored(address indexed,uint256,string)'] });
    await add('/topic', { contractAddresses: [game], topicHashes: [toEventSelector('Scored(address,uint256,string)')] });
    // No contract: every Approval of the chain naming A.
    const approvals = (await add('/approval', { accounts: [A], events: ['Approval'] })).listener;
    expect(approvals.filters).toEqual({ events: ['Approval'], contractAddresses: [], accounts: [A], tokenIDs: [] });
    // A contract alone: all its events, the transfers as TOKEN_TRANSFER, the rest as EVENT.
    await add('/erc20', { contractAddresses: [erc20] });
    await chain.send([
      call(game, 'TestListenerGame', 'score', [A, 42n, 'gg']),
      call(erc20, 'TestIndexERC20', 'mint', [DEPLOYER, 5n]),
      call(erc20, 'TestIndexERC20', 'approve', [A, 7n]),
      call(game, 'TestListenerGame', 'score', [someone(), 1n, 'not for /approval']),
    ]);
    await catchUp(ix);
    await eventually(
      async () => ['/game', '/game-short', '/topic', '/approval', '/erc20'].map((p) => bodiesAt(p).length),
      (n) => expect(n).toEqual([2, 2, 2, 1, 2]),
    );
    const [g] = bodiesAt('/game');
    const receipt = await ix.chain.public.getTransactionReceipt({ hash: g!.txnHash as `0x${string}` });
    // A direct transaction from an EOA: no relayer in the path.
    expect(receipt.from.toLowerCase()).toBe(DEPLOYER);
    expect(g).toMatchObject({
      type: 'BLOCK_ADDED',
      contractAddress: game,
      contractType: 'UNKNOWN',
      logDataType: 'EVENT',
      blockNumber: Number(receipt.blockNumber),
      blockHash: receipt.blockHash,
      txnLogIndex: receipt.logs[0]!.logIndex,
      rawLog: { address: game, topics: receipt.logs[0]!.topics, data: receipt.logs[0]!.data },
      event: {
        topicHash: toEventSelector('Scored(address,uint256,string)'),
        eventSig: 'Scored(address,uint256,string)',
        types: ['address', 'uint256', 'string'],
        names: ['player', 'points', 'note'],
        values: [A, '42', 'gg'],
      },
    });
    expect(g!.uid).toBe(`${g!.txnHash}:${g!.txnLogIndex}`);
    expect(bodiesAt('/game-short')[0]!.event).toMatchObject({ names: ['arg1', 'arg2', 'arg3'], values: [A, '42', 'gg'] });
    // A topic hash says which logs, not how to decode them: the raw log only.
    expect(bodiesAt('/topic')[0]).toMatchObject({ logDataType: 'EVENT', rawLog: g!.rawLog });
    expect(bodiesAt('/topic')[0]!.event).toBeUndefined();
    expect(bodiesAt('/approval')[0]).toMatchObject({
      contractAddress: erc20,
      contractType: 'ERC20',
      logDataType: 'EVENT',
      event: { eventSig: 'Approval(address,address,uint256)', names: ['owner', 'spender', 'value'], values: [DEPLOYER, A, '7'] },
    });
    expect(bodiesAt('/erc20').map((b) => [b.logDataType, b.event?.eventSig])).toEqual([
      ['TOKEN_TRANSFER', 'Transfer(address,address,uint256)'],
      ['EVENT', 'Approval(address,address,uint256)'],
    ]);
    await client.removeAllWebhookListeners({});
  });

  it('on a watchlist chain, a listener naming an event and no contract hears it from watched contracts only', async () => {
    const P = someone();
    const [watched, unwatched] = (await chainB.deploy([{ contract: 'TestListenerGame' }, { contract: 'TestListenerGame' }])).map((a) => a.toLowerCase() as Address) as [Address, Address];
    await ixB.watchlist.add(watched, t.project.id);
    await catchUp(ixB);
    const l = (await clientB.addWebhookListener({ url: `${receiver.url}/watched`, filters: { accounts: [P], events: [SCORED] } })).listener;
    await chainB.send([call(watched, 'TestListenerGame', 'score', [P, 1n, 'on the list']), call(unwatched, 'TestListenerGame', 'score', [P, 2n, 'off the list'])]);
    await catchUp(ixB);
    // Events are written with the step that indexed the block: caught up, every delivery exists.
    const rows = await t.services.db.query<{ n: string }>('SELECT count(*) AS n FROM webhook_deliveries WHERE webhook_id = $1', [l.id]);
    expect(Number(rows.rows[0]!.n)).toBe(1);
    const [b] = await eventually(
      async () => bodiesAt('/watched'),
      (x) => expect(x).toHaveLength(1),
    );
    expect(b).toMatchObject({ chainId: chainB.anvil.chainId, contractAddress: watched, event: { values: [P, '1', 'on the list'] } });
    await clientB.removeAllWebhookListeners({});
  });

  it('everyone-addresses are refused in accounts, with a reason', async () => {
    for (const a of ['0x0000000000000000000000000000000000000000', '0x000000000000000000000000000000000000dEaD']) {
      const r = await refusal(client.addWebhookListener({ url: `${receiver.url}/x`, filters: { accounts: [a] } }));
      expect(r).toMatchObject({ name: 'InvalidArgument', cause: expect.stringMatching(/filters\.accounts: .* (zero address|burn address)/) });
    }
    expect((await client.getAllWebhookListeners({})).listeners.filter((l) => l.url.endsWith('/x'))).toEqual([]);
  });
});

describe('fair shares (issue 54)', () => {
  it("one transaction's flood is capped per project and block, counted, and another project's delivery does not wait behind it", async () => {
    const V = someone();
    for (let i = 0; i < 10; i++) await attacker.addWebhookListener({ url: `${receiver.url}/flood/${i}`, filters: { contractAddresses: [flood] } });
    await client.addWebhookListener({ url: `${receiver.url}/victim`, filters: { contractAddresses: [erc20], accounts: [V] } });
    // The worker waits while both are indexed: the attacker's whole backlog is queued before the victim's delivery.
    await t.services.events.delivery.stop();
    await chain.send([call(flood, 'TestFloodERC20', 'flood', [someone(), 150n]), call(erc20, 'TestIndexERC20', 'mint', [V, 1n])]);
    await catchUp(ix);
    const rows = await t.services.db.query<{ n: string }>('SELECT count(*) AS n FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE w.project_id <> $1', [t.project.id]);
    // 150 logs × 10 listeners, of which the cap lets 1 000 through: the rest are counted on the listeners.
    expect(Number(rows.rows[0]!.n)).toBe(CAP);
    const listeners = (await attacker.getAllWebhookListeners({})).listeners as Array<{ droppedLogs?: number }>;
    expect(listeners.map((l) => l.droppedLogs)).toEqual(Array(10).fill(50));
    expect(await scrape(t.app)).toMatch(/metarelay_webhook_listener_logs_dropped_total\{chain="anvil"\} 500/);

    t.services.events.delivery.start();
    await eventually(
      async () => countAt('/victim'),
      (n) => expect(n).toBe(1),
      30_000,
    );
    // The victim's one delivery came while most of the attacker's backlog was still waiting.
    expect(countAt('/flood/')).toBeLessThan(CAP / 2);
    await attacker.removeAllWebhookListeners({});
    await client.removeAllWebhookListeners({});
  });

  it("a project whose receivers hang holds at most its share of the lanes: another project's delivery goes meanwhile", async () => {
    const V = someone();
    for (let i = 0; i < 20; i++) await attacker.addWebhookListener({ url: `${receiver.url}/hang/${i}`, filters: { contractAddresses: [flood] } });
    await client.addWebhookListener({ url: `${receiver.url}/victim2`, filters: { contractAddresses: [erc20], accounts: [V] } });
    await chain.send([call(flood, 'TestFloodERC20', 'flood', [someone(), 1n])]);
    await catchUp(ix);
    // The attacker's receivers hold every lane they are given (12 of 16: webhooks.maxInFlightPerProject's default).
    await eventually(
      async () => hanging.length,
      (n) => expect(n).toBe(12),
    );
    await chain.send([call(erc20, 'TestIndexERC20', 'mint', [V, 1n])]);
    await catchUp(ix);
    await eventually(
      async () => countAt('/victim2'),
      (n) => expect(n).toBe(1),
      20_000,
    );
    // Delivered while every request the attacker's receivers took was still open.
    expect(hangsEnded).toBe(0);
    expect(hanging.length).toBe(12);
  });
});
