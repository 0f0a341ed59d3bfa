// The indexer's webrpc streams (SubscribeReceipts, SubscribeEvents, SubscribeBalanceUpdates) through the
// official SequenceIndexer client, fed by what the indexer reads from two real anvils: chain A indexed
// whole (`scope: all`, the default), chain B on a watchlist. Direct transactions (no relayer): an ERC20
// and an ERC721 transfer and a game's own event. Judged against the chain's own receipts and balances.
import { SequenceIndexer, type SubscribeBalanceUpdatesResponse, type SubscribeEventsResponse, type SubscribeReceiptsResponse, type WebrpcError } from '@0xsequence/indexer';
import { pad, parseAbi, toEventSelector, type Address, type Hash } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { devPublicClient } from '../src/devchain/index.ts';
import type { ChainIndexer } from '../src/indexer/index.ts';
import { revert, snapshot } from './support/anvil-control.ts';
import { startTestService, type TestService } from './support/service.ts';
import { startTokenChain, type ContractCall, type TokenChain } from './support/token-chain.ts';
import { catchUp } from './support/catch-up.ts';

/** The cap test fills the key's share of streams. */
const PER_KEY = 8;
const CHAIN_B = 31_339;
const E18 = 10n ** 18n;
const SCORED = toEventSelector('Scored(address,uint256,uint256)');
const TRANSFER = toEventSelector('Transfer(address,address,uint256)');
const someone = () => privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
const call = (address: Address, contract: string, functionName: string, args: unknown[]): ContractCall => ({ address, contract, functionName, args });
const balanceOf = parseAbi(['function balanceOf(address) view returns (uint256)']);

let a: TokenChain;
let b: TokenChain;
let t: TestService;
let ixA: SequenceIndexer;
let ixB: SequenceIndexer;
let base: string;
/** Chain A: X (ERC20, priced $2), N (ERC721), G (game events). Chain B: Y (ERC20, watched, priced $3), Z (ERC20, not watched). */
let X: Address, N: Address, G: Address, Y: Address, Z: Address;

const indexerOf = (chainId: number): ChainIndexer => t.services.indexers.get(chainId)!;

/** Resolves once the predicate holds, stepping the indexers meanwhile (the test's timeout bounds it). */
async function until(ok: () => boolean) {
  while (!ok()) {
    await Promise.all([catchUp(indexerOf(a.anvil.chainId)), catchUp(indexerOf(CHAIN_B))]);
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface Sub<T> {
  frames: T[];
  errors: WebrpcError[];
  opened: boolean;
  abort: () => void;
  closed: Promise<void>;
}

/** A subscription through the official client: its frames, its errors, and whether it opened. */
function subscribe<T>(start: (o: { onMessage: (m: T) => void; onError: (e: WebrpcError) => void; onOpen: () => void }) => { abort: () => void; closed: Promise<void> }): Sub<T> {
  const s = { frames: [] as T[], errors: [] as WebrpcError[], opened: false, abort: () => {}, closed: Promise.resolve() };
  const c = start({ onMessage: (m) => s.frames.push(m), onError: (e) => s.errors.push(e), onOpen: () => (s.opened = true) });
  s.abort = c.abort;
  s.closed = c.closed;
  return s;
}

/** Every receipt the chain has in blocks (from, to]: the ground truth the streams are judged by. */
async function receiptsOn(chain: TokenChain, from: bigint, to: bigint) {
  const pub = devPublicClient(chain.anvil.rpcUrl, chain.anvil.chainId);
  const out = [];
  for (let n = from + 1n; n <= to; n++) {
    const block = await pub.getBlock({ blockNumber: n });
    for (const hash of block.transactions) out.push(await pub.getTransactionReceipt({ hash: hash as Hash }));
  }
  return out;
}

const accountTopic = (x: Address) => pad(x, { size: 32 }).toLowerCase();

beforeAll(async () => {
  [a, b] = await Promise.all([startTokenChain(), startTokenChain({ chainId: CHAIN_B })]);
  [[X, N, G], [Y, Z]] = await Promise.all([
    a.deploy([{ contract: 'TestIndexERC20' }, { contract: 'TestIndexERC721' }, { contract: 'TestGameEvents' }]),
    b.deploy([{ contract: 'TestIndexERC20' }, { contract: 'TestIndexERC20' }]),
  ]);
  [X, N, G, Y, Z] = [X, N, G, Y, Z].map((x) => x!.toLowerCase() as Address);
  const indexer = { fromBlock: 0, confirmations: 0, chunkBlocks: 50, pollMs: 50 } as const;
  t = await startTestService({
    chains: [
      { ...a.chainConfig, name: 'anvil-a', watch: false, indexer: { ...indexer, scope: 'all' }, prices: { tokens: [{ address: X, symbol: 'X', decimals: 18, usdPrice: '2' }] } },
      {
        ...b.chainConfig,
        name: 'anvil-b',
        watch: false,
        indexer: { ...indexer, scope: 'watchlist', contracts: [Y] },
        prices: { tokens: [{ address: Y, symbol: 'Y', decimals: 18, usdPrice: '3' }] },
      },
    ],
    // Every stream here comes from one address: its client network may hold the whole key's cap.
    webhooks: { maxStreamsPerKey: PER_KEY, streamShares: { perKeyClientPercent: 100 } },
    media: { enabled: false },
  });
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  ixA = new SequenceIndexer(`${base}/indexer/anvil-a`, t.accessKey);
  ixB = new SequenceIndexer(`${base}/indexer/anvil-b`, t.accessKey);
  await Promise.all([catchUp(indexerOf(a.anvil.chainId)), catchUp(indexerOf(CHAIN_B))]);
}, 180_000);

afterAll(async () => {
  // Keep-alive sockets of the client's streams would hold the server's close until their timeout.
  t?.app.server.closeAllConnections();
  await t?.close();
  await Promise.all([a?.stop(), b?.stop()]);
});

describe('indexer subscriptions on a chain indexed whole (scope: all)', () => {
  it('direct ERC20 and ERC721 transfers and a custom event reach the three streams; accounts and tokenIDs filters hold; balances carry USD', async () => {
    const [alice, bob, carol] = [someone(), someone(), someone()];
    const receipts = subscribe<SubscribeReceiptsResponse>((o) => ixA.subscribeReceipts({ filter: { contractAddress: X } }, o));
    const scored = subscribe<SubscribeReceiptsResponse>((o) => ixA.subscribeReceipts({ filter: { event: 'Scored(address,uint256,uint256)' } }, o));
    const bobs = subscribe<SubscribeEventsResponse>((o) => ixA.subscribeEvents({ filter: { accounts: [bob] } }, o));
    const token7 = subscribe<SubscribeEventsResponse>((o) => ixA.subscribeEvents({ filter: { contractAddresses: [N], tokenIDs: ['7'] } }, o));
    const carols = subscribe<SubscribeEventsResponse>((o) => ixA.subscribeEvents({ filter: { accounts: [carol] } }, o));
    const balances = subscribe<SubscribeBalanceUpdatesResponse>((o) => ixA.subscribeBalanceUpdates({ contractAddress: X }, o));
    const all = [receipts, scored, bobs, token7, carols, balances];
    await until(() => all.every((s) => s.opened || s.errors.length > 0));
    expect(all.flatMap((s) => s.errors)).toEqual([]);
    // Streams start where the indexer is when they open.
    const from = (await indexerOf(a.anvil.chainId).cursor())!.block;

    await a.send([call(X, 'TestIndexERC20', 'mint', [alice, 10n * E18]), call(N, 'TestIndexERC721', 'mint', [alice, 7n]), call(N, 'TestIndexERC721', 'mint', [alice, 8n])]);
    await a.send([call(X, 'TestIndexERC20', 'move', [alice, bob, 3n * E18]), call(N, 'TestIndexERC721', 'move', [alice, bob, 7n]), call(N, 'TestIndexERC721', 'move', [alice, bob, 8n])]);
    await a.send([call(G, 'TestGameEvents', 'score', [bob, 1n, 42n])]);
    const to = await devPublicClient(a.anvil.rpcUrl, a.anvil.chainId).getBlockNumber();
    const chain = await receiptsOn(a, from, to);
    const logs = chain.flatMap((r) => r.logs);
    const toX = chain.filter((r) => r.to?.toLowerCase() === X).map((r) => r.transactionHash);
    const gameTxs = chain.filter((r) => r.logs.some((l) => l.topics[0] === SCORED)).map((r) => r.transactionHash);
    const bobLogs = logs.filter((l) => l.topics.slice(1).includes(accountTopic(bob) as `0x${string}`)).map((l) => `${l.transactionHash}:${l.logIndex}`);
    const token7Logs = logs.filter((l) => l.address === N && l.topics[0] === TRANSFER && BigInt(l.topics[3] ?? 0) === 7n).map((l) => `${l.transactionHash}:${l.logIndex}`);
    expect([toX.length, gameTxs.length, bobLogs.length, token7Logs.length]).toEqual([2, 1, 4, 2]);

    await until(
      () => receipts.frames.length >= 2 && scored.frames.length >= 1 && bobs.frames.length >= 4 && token7.frames.length >= 2 && balances.frames.some((f) => f.balance.accountAddress === bob),
    );

    expect(receipts.frames.map((f) => f.receipt.txnHash)).toEqual(toX);
    expect(receipts.frames[1]!.receipt).toMatchObject({
      txnStatus: 'SUCCESSFUL',
      final: true,
      to: X,
      logs: [expect.objectContaining({ contractAddress: X, topics: expect.arrayContaining([TRANSFER]) })],
    });
    expect(scored.frames.map((f) => f.receipt.txnHash)).toEqual(gameTxs);
    expect(bobs.frames.map((f) => f.log.uid)).toEqual(bobLogs);
    expect(token7.frames.map((f) => f.log.uid)).toEqual(token7Logs);
    // The custom event: undecoded (no ABI here), its raw log as on the chain.
    const game = bobs.frames.find((f) => f.log.contractAddress === G)!.log;
    expect(game).toMatchObject({ logDataType: 'EVENT', contractType: 'UNKNOWN', type: 'BLOCK_ADDED', txnHash: gameTxs[0], rawLog: { topics: [SCORED, accountTopic(bob), pad('0x1', { size: 32 })] } });
    // A token transfer: decoded as Sequence sends it.
    const nft = token7.frames[1]!.log;
    expect(nft).toMatchObject({
      logDataType: 'TOKEN_TRANSFER',
      contractType: 'ERC721',
      contractAddress: N,
      event: { eventSig: 'Transfer(address,address,uint256)', names: ['from', 'to', 'tokenId'], values: [alice, bob, '7'] },
    });

    // Balances: as the chain holds them after the transfers, valued at the configured $2.
    const pub = devPublicClient(a.anvil.rpcUrl, a.anvil.chainId);
    const onChain = async (who: Address) => (await pub.readContract({ address: X, abi: balanceOf, functionName: 'balanceOf', args: [who] })).toString();
    const last = (who: Address) => balances.frames.filter((f) => f.balance.accountAddress === who).at(-1)?.balance;
    await until(() => last(alice)?.balance === '7000000000000000000');
    expect(last(bob)).toMatchObject({ contractAddress: X, contractType: 'ERC20', chainId: a.anvil.chainId, balance: await onChain(bob), priceUSD: '2', balanceUSD: '6' });
    expect(last(alice)).toMatchObject({ balance: await onChain(alice), priceUSD: '2', balanceUSD: '14' });

    // Nothing on the chain names carol: her stream stayed silent (frames go out block by block, and later blocks' have arrived).
    expect(carols.frames).toEqual([]);
    expect(all.flatMap((s) => s.errors)).toEqual([]);

    for (const s of all) s.abort();
    await Promise.all(all.map((s) => s.closed));
    expect(all.every((s) => s.errors.every((e) => e.name === 'WebrpcClientAborted'))).toBe(true);
    // The server sees the connections go: the tail has no stream left.
    await until(() => indexerOf(a.anvil.chainId).tail.streams === 0);
  }, 120_000);

  it('refuses what it cannot serve, saying why', async () => {
    const cases: Array<[Sub<unknown>, RegExp]> = [
      [subscribe((o) => ixA.subscribeEvents({ filter: {} }, o)), /name contractAddresses or accounts/],
      [subscribe((o) => ixA.subscribeEvents({ filter: { contractAddresses: [X], events: ['not an event'] } }, o)), /must be a 32-byte topic/],
      [subscribe((o) => ixA.subscribeReceipts({ filter: { event: 'not an event' } }, o)), /event/],
      // Chain B follows a watchlist: a contract off it has no index, so no stream.
      [subscribe((o) => ixB.subscribeBalanceUpdates({ contractAddress: Z }, o)), /not on anvil-b's watchlist/],
      [subscribe((o) => ixB.subscribeEvents({ filter: { contractAddresses: [Z] } }, o)), /not on anvil-b's watchlist/],
    ];
    await Promise.all(cases.map(([s]) => s.closed));
    for (const [s, why] of cases) {
      expect(s.opened).toBe(false);
      expect(s.errors[0]).toMatchObject({ name: 'InvalidArgument', status: 400 });
      expect(s.errors[0]!.cause).toMatch(why);
    }
  });

  it('refuses a stream past the per-key cap (shared with GET /events) with RateLimited; a closed one frees its slot', async () => {
    const open = Array.from({ length: PER_KEY }, () => subscribe<SubscribeBalanceUpdatesResponse>((o) => ixA.subscribeBalanceUpdates({ contractAddress: X }, o)));
    await until(() => open.every((s) => s.opened));
    const refused = subscribe<SubscribeReceiptsResponse>((o) => ixA.subscribeReceipts({ filter: { contractAddress: X } }, o));
    await refused.closed;
    expect(refused.errors[0]).toMatchObject({ name: 'RateLimited', status: 429 });
    expect(refused.errors[0]!.cause).toMatch(new RegExp(`this access key already has ${PER_KEY} event streams open`));
    const sse = await fetch(`${base}/events`, { headers: { 'x-access-key': t.accessKey } });
    expect(sse.status).toBe(429);

    open[0]!.abort();
    await open[0]!.closed;
    await until(() => indexerOf(a.anvil.chainId).tail.streams === PER_KEY - 1);
    const again = subscribe<SubscribeBalanceUpdatesResponse>((o) => ixA.subscribeBalanceUpdates({ contractAddress: X }, o));
    await until(() => again.opened || again.errors.length > 0);
    expect(again.errors).toEqual([]);
    for (const s of [...open, again]) s.abort();
    await Promise.all([...open, again].map((s) => s.closed));
    // Their slots are free once the server has seen them go.
    await until(() => indexerOf(a.anvil.chainId).tail.streams === 0);
  }, 60_000);
  it("a reorg: the new fork's log and balances reach the streams (the replaced block's log told as BLOCK_REMOVED, not as added again)", async () => {
    const dave = someone();
    const events = subscribe<SubscribeEventsResponse>((o) => ixA.subscribeEvents({ filter: { accounts: [dave] } }, o));
    const balances = subscribe<SubscribeBalanceUpdatesResponse>((o) => ixA.subscribeBalanceUpdates({ contractAddress: X }, o));
    const all = [events, balances];
    await until(() => all.every((s) => s.opened || s.errors.length > 0));
    expect(all.flatMap((s) => s.errors)).toEqual([]);
    const daves = () => balances.frames.filter((f) => f.balance.accountAddress === dave).map((f) => f.balance.balance);

    const snap = await snapshot(a.anvil.rpcUrl);
    await a.send([call(X, 'TestIndexERC20', 'mint', [dave, 5n])]);
    await until(() => events.frames.length === 1 && daves().at(-1) === '5');
    const replaced = events.frames[0]!.log;

    // The block is replaced by one minting another amount at the same height.
    await revert(a.anvil.rpcUrl, snap);
    await a.resyncNonce();
    await a.send([call(X, 'TestIndexERC20', 'mint', [dave, 9n])]);
    const added = () => events.frames.filter((f) => f.log.type === 'BLOCK_ADDED');
    await until(() => added().length === 2 && daves().at(-1) === '9');
    expect(events.frames.map((f) => f.log.type)).toEqual(['BLOCK_ADDED', 'BLOCK_REMOVED', 'BLOCK_ADDED']);
    expect(events.frames[1]!.log).toEqual({ ...replaced, type: 'BLOCK_REMOVED' });

    const pub = devPublicClient(a.anvil.rpcUrl, a.anvil.chainId);
    const head = await pub.getBlock();
    expect(head.number).toBe(BigInt(replaced.blockNumber));
    expect(events.frames[2]!.log).toMatchObject({ blockNumber: replaced.blockNumber, blockHash: head.hash, txnHash: head.transactions[0] });
    expect(events.frames[2]!.log.blockHash).not.toBe(replaced.blockHash);
    expect((await pub.readContract({ address: X, abi: balanceOf, functionName: 'balanceOf', args: [dave] })).toString()).toBe('9');
    for (const s of all) s.abort();
    await Promise.all(all.map((s) => s.closed));
    await until(() => indexerOf(a.anvil.chainId).tail.streams === 0);
  }, 60_000);

  it('a reorg two blocks deep: each receipt and log sent from a block that left the chain is sent again as removed (reorged, BLOCK_REMOVED), newest block first, before the new fork', async () => {
    const erin = someone();
    const receipts = subscribe<SubscribeReceiptsResponse>((o) => ixA.subscribeReceipts({ filter: { contractAddress: X } }, o));
    const events = subscribe<SubscribeEventsResponse>((o) => ixA.subscribeEvents({ filter: { accounts: [erin] } }, o));
    const all = [receipts, events];
    await until(() => all.every((s) => s.opened || s.errors.length > 0));
    expect(all.flatMap((s) => s.errors)).toEqual([]);
    const pub = devPublicClient(a.anvil.rpcUrl, a.anvil.chainId);
    // Streams start where the indexer is when they open: the fork point's block is on both forks.
    await catchUp(indexerOf(a.anvil.chainId));
    const base = await pub.getBlockNumber();

    const snap = await snapshot(a.anvil.rpcUrl);
    await a.send([call(X, 'TestIndexERC20', 'mint', [erin, 1n])]);
    await a.send([call(X, 'TestIndexERC20', 'mint', [erin, 2n])]);
    const old = await receiptsOn(a, base, await pub.getBlockNumber());
    expect(old.map((r) => r.blockNumber)).toEqual([base + 1n, base + 2n]);
    await until(() => receipts.frames.length === 2 && events.frames.length === 2);

    // Another fork from the same parent, one block longer: both blocks above `base` leave the chain.
    await revert(a.anvil.rpcUrl, snap);
    await a.resyncNonce();
    for (const amount of [3n, 4n, 5n]) await a.send([call(X, 'TestIndexERC20', 'mint', [erin, amount])]);
    const fork = await receiptsOn(a, base, await pub.getBlockNumber());
    expect(fork.map((r) => r.blockNumber)).toEqual([base + 1n, base + 2n, base + 3n]);
    const onFork = new Set<string>(fork.map((r) => r.blockHash));
    await until(() => receipts.frames.filter((f) => onFork.has(f.receipt.blockHash)).length === 3 && events.frames.filter((f) => onFork.has(f.log.blockHash)).length === 3);

    // The streams, judged by the receipts of both forks: the old fork's added, then removed newest first, then the new fork's.
    const told = [...old, ...[...old].reverse(), ...fork];
    const removed = told.map((_, i) => i >= old.length && i < 2 * old.length);
    expect(receipts.frames.map((f) => [f.receipt.txnHash, f.receipt.blockHash, f.receipt.reorged, f.receipt.final])).toEqual(
      told.map((r, i) => [r.transactionHash, r.blockHash, removed[i], !removed[i]]),
    );
    expect(events.frames.map((f) => [f.log.uid, f.log.blockHash, f.log.type])).toEqual(
      told.map((r, i) => [`${r.transactionHash}:${r.logs[0]!.logIndex}`, r.blockHash, removed[i] ? 'BLOCK_REMOVED' : 'BLOCK_ADDED']),
    );
    // A removed frame is the frame that was sent, but for its flag.
    expect(receipts.frames[2]!.receipt).toEqual({ ...receipts.frames[1]!.receipt, reorged: true, final: false });
    expect(events.frames[3]!.log).toEqual({ ...events.frames[0]!.log, type: 'BLOCK_REMOVED' });
    expect(all.flatMap((s) => s.errors)).toEqual([]);
    for (const s of all) s.abort();
    await Promise.all(all.map((s) => s.closed));
    await until(() => indexerOf(a.anvil.chainId).tail.streams === 0);
  }, 60_000);
});

describe('indexer subscriptions on a watchlist chain', () => {
  it("a watched contract's direct transfer reaches the streams (USD valued); an unwatched one's does not", async () => {
    const [alice, bob] = [someone(), someone()];
    const events = subscribe<SubscribeEventsResponse>((o) => ixB.subscribeEvents({ filter: { accounts: [bob] } }, o));
    const receipts = subscribe<SubscribeReceiptsResponse>((o) => ixB.subscribeReceipts({ filter: { to: Z } }, o));
    const balances = subscribe<SubscribeBalanceUpdatesResponse>((o) => ixB.subscribeBalanceUpdates({ contractAddress: Y }, o));
    const all = [events, receipts, balances];
    await until(() => all.every((s) => s.opened || s.errors.length > 0));
    expect(all.flatMap((s) => s.errors)).toEqual([]);

    // Z moves tokens to bob first: off the watchlist, so no stream carries it.
    await b.send([call(Z, 'TestIndexERC20', 'mint', [bob, 5n]), call(Y, 'TestIndexERC20', 'mint', [alice, 4n * E18])]);
    await b.send([call(Y, 'TestIndexERC20', 'move', [alice, bob, E18])]);
    await until(() => events.frames.length >= 1 && balances.frames.some((f) => f.balance.accountAddress === bob));

    expect(events.frames.map((f) => f.log.contractAddress)).toEqual([Y]);
    expect(events.frames[0]!.log).toMatchObject({ contractType: 'ERC20', event: { values: [alice, bob, E18.toString()] } });
    expect(balances.frames.find((f) => f.balance.accountAddress === bob)!.balance).toMatchObject({ balance: E18.toString(), priceUSD: '3', balanceUSD: '3' });
    expect(receipts.frames).toEqual([]);
    expect(all.flatMap((s) => s.errors)).toEqual([]);
    for (const s of all) s.abort();
    await Promise.all(all.map((s) => s.closed));
  }, 60_000);
});
