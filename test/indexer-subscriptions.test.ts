// The indexer's webrpc streams (SubscribeReceipts, SubscribeEvents, SubscribeBalanceUpdates), called through
// the official SequenceIndexer client against a real relayer and indexer on one anvil: fed by the outbox,
// ended by the client's abort, capped per access key with GET /events.
import { SequenceIndexer, type SubscribeBalanceUpdatesResponse, type SubscribeEventsResponse, type SubscribeReceiptsResponse, type WebrpcError } from '@0xsequence/indexer';
import { encodeFunctionData, toEventSelector } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChainIndexer } from '../src/indexer/index.ts';
import { erc20, sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { newSigner, officialWallet } from './support/sequence-wallet.ts';

/** The first test holds four streams at once; the cap test fills the key's share. */
const PER_KEY = 4;
const TRANSFER = toEventSelector('Transfer(address,address,uint256)');

let env: RelayerEnv;
let indexer: SequenceIndexer;
let ix: ChainIndexer;

async function catchUp() {
  for (let i = 0; i < 200; i++) {
    const more = await ix.follower.poll();
    const [cur, head] = await Promise.all([ix.cursor(), env.public.getBlockNumber()]);
    if (!more && cur && cur.block === head) return;
  }
  throw new Error('indexer did not catch up');
}

/** Resolves once the predicate holds, polling (no wall-clock assertion: the test's timeout bounds it). */
async function until(ok: () => boolean | Promise<boolean>, step?: () => Promise<unknown>) {
  for (;;) {
    if (await ok()) return;
    await step?.();
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A subscription through the official client: its frames, its errors, and when it opened. */
function subscribe<T>(start: (o: { onMessage: (m: T) => void; onError: (e: WebrpcError) => void; onOpen: () => void }) => { abort: () => void; closed: Promise<void> }) {
  const s = { frames: [] as T[], errors: [] as WebrpcError[], opened: false, abort: () => {}, closed: Promise.resolve() };
  const c = start({ onMessage: (m) => s.frames.push(m), onError: (e) => s.errors.push(e), onOpen: () => (s.opened = true) });
  s.abort = c.abort;
  s.closed = c.closed;
  return s;
}

beforeAll(async () => {
  env = await startRelayerEnv({
    indexer: { scope: 'watchlist', fromBlock: 0, confirmations: 0, chunkBlocks: 50, pollMs: 50 },
    // Every stream here comes from one address: its client network may hold the whole key's cap.
    webhooks: { maxStreamsPerKey: PER_KEY, streamShares: { perKeyClientPercent: 100 } },
  });
  ix = env.services.indexers.get(env.chainId)!;
  indexer = new SequenceIndexer(`${env.baseUrl}/indexer/${env.chain.chainConfig.name}`, env.accessKey);
  const watched = await fetch(`${env.baseUrl}/rpc/Console/IndexerWatch`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${env.adminToken}` },
    body: JSON.stringify({ chainID: String(env.chainId), contractAddress: env.token }),
  });
  expect(watched.status, await watched.text()).toBe(200);
  await catchUp();
}, 120_000);
afterAll(async () => {
  await env?.close();
});

describe('indexer subscriptions', () => {
  it('a relayed transfer reaches SubscribeReceipts, SubscribeEvents and SubscribeBalanceUpdates; filters hold; an abort ends the stream and frees its slot', async () => {
    await sponsor(env, 'CONTRACT', env.token);
    const w = officialWallet({ signerKey: newSigner().privateKey, rpcUrl: env.rpcUrl, chainId: env.chainId, relayerUrl: env.relayerUrl, projectAccessKey: env.accessKey });
    const to = newSigner().address.toLowerCase();
    await env.chain.send([{ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [w.address, 100n] }]);
    await catchUp();

    const receipts = subscribe<SubscribeReceiptsResponse>((o) => indexer.subscribeReceipts({ filter: { contractAddress: env.token, event: 'Transfer(address,address,uint256)' } }, o));
    // A filter nothing relayed here matches: it must stay silent.
    const other = subscribe<SubscribeReceiptsResponse>((o) => indexer.subscribeReceipts({ filter: { from: newSigner().address } }, o));
    const logs = subscribe<SubscribeEventsResponse>((o) => indexer.subscribeEvents({ filter: { contractAddresses: [env.token], events: [TRANSFER] } }, o));
    await until(() => receipts.opened && other.opened && logs.opened);
    const balances = subscribe<SubscribeBalanceUpdatesResponse>((o) => indexer.subscribeBalanceUpdates({ contractAddress: env.token }, o));
    await until(() => balances.opened);
    const before = env.services.events.streams.streams;

    const sent = await w.sendTransaction([{ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [to as `0x${string}`, 40n] }) }]);
    await until(() => receipts.frames.length > 0 && logs.frames.length > 0);
    await until(
      () => balances.frames.some((f) => f.balance.accountAddress === to),
      () => catchUp(),
    );

    const chainReceipt = await env.public.getTransactionReceipt({ hash: sent.hash as `0x${string}` });
    expect(receipts.frames).toHaveLength(1);
    expect(receipts.frames[0]!.receipt).toMatchObject({ txnHash: sent.hash, txnStatus: 'SUCCESSFUL', blockNumber: Number(chainReceipt.blockNumber), from: chainReceipt.from.toLowerCase() });
    expect(receipts.frames[0]!.receipt.logs.some((l) => l.contractAddress === env.token.toLowerCase() && l.topics[0] === TRANSFER)).toBe(true);
    expect(logs.frames.every((f) => f.log.txnHash === sent.hash && f.log.contractAddress === env.token.toLowerCase() && f.log.rawLog?.topics[0] === TRANSFER)).toBe(true);
    expect(balances.frames.find((f) => f.balance.accountAddress === to)!.balance).toMatchObject({
      contractAddress: env.token.toLowerCase(),
      balance: '40',
      chainId: env.chainId,
      contractType: 'ERC20',
    });
    expect(other.frames).toEqual([]);
    expect([receipts, other, logs, balances].flatMap((s) => s.errors)).toEqual([]);

    // The client aborts: its promise settles, the server detaches the stream from the reader.
    for (const s of [receipts, other, logs, balances]) s.abort();
    await Promise.all([receipts, other, logs, balances].map((s) => s.closed));
    expect([receipts, other, logs, balances].every((s) => s.errors.every((e) => e.name === 'WebrpcClientAborted'))).toBe(true);
    await until(() => env.services.events.streams.streams === before - 4);
  }, 120_000);

  it('refuses the stream past the per-key cap (shared with GET /events) with RateLimited; a closed one frees its slot', async () => {
    const open = Array.from({ length: PER_KEY }, () => subscribe<SubscribeBalanceUpdatesResponse>((o) => indexer.subscribeBalanceUpdates({ contractAddress: env.token }, o)));
    await until(() => open.every((s) => s.opened));
    const refused = subscribe<SubscribeReceiptsResponse>((o) => indexer.subscribeReceipts({ filter: { contractAddress: env.token } }, o));
    await refused.closed;
    expect(refused.opened).toBe(false);
    expect(refused.errors).toHaveLength(1);
    expect(refused.errors[0]).toMatchObject({ name: 'RateLimited', status: 429 });
    expect(refused.errors[0]!.cause).toMatch(/this access key already has 4 event streams open/);
    // GET /events counts against the same cap.
    const sse = await fetch(`${env.baseUrl}/events`, { headers: { 'x-access-key': env.accessKey } });
    expect(sse.status).toBe(429);

    open[0]!.abort();
    await open[0]!.closed;
    // The server sees the connection go a moment after the client's promise settles.
    await until(() => env.services.events.streams.streams === PER_KEY - 1);
    const again = subscribe<SubscribeBalanceUpdatesResponse>((o) => indexer.subscribeBalanceUpdates({ contractAddress: env.token }, o));
    await until(() => again.opened || again.errors.length > 0);
    expect(again.errors).toEqual([]);
    for (const s of [...open, again]) s.abort();
    await Promise.all([...open, again].map((s) => s.closed));
  }, 60_000);

  it('refuses filters it cannot honour, saying why', async () => {
    const s = subscribe<SubscribeEventsResponse>((o) => indexer.subscribeEvents({ filter: { accounts: [newSigner().address] } }, o));
    await s.closed;
    expect(s.errors[0]).toMatchObject({ name: 'InvalidArgument', status: 400 });
    expect(s.errors[0]!.cause).toMatch(/filter.accounts and filter.tokenIDs cannot be honoured/);
    const r = subscribe<SubscribeReceiptsResponse>((o) => indexer.subscribeReceipts({ filter: { event: 'not an event' } }, o));
    await r.closed;
    expect(r.errors[0]).toMatchObject({ name: 'InvalidArgument' });
  });
});
