// Issue 29, finding 6: a block with more Transfer logs than the node answers at once must not halt
// the indexer or the metadata watcher. A real anvil behind an rpc-proxy that refuses any answer
// holding over LIMIT logs (eth_getLogs, a block's receipts, a receipt: as nodes cap results or
// bytes): the big block is read split, and a block no read can get is passed over, flagged (row,
// metric) and read on a later retry. Ground truth: the chain's own logs and balanceOf, read from
// anvil directly.
import { parseAbi, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { devPublicClient } from '../src/devchain/index.ts';
import { LogReader } from '../src/chain/logs.ts';
import { backfillStore, backfillWorkerFor } from '../src/indexer/index.ts';
import { TRANSFER_TOPICS } from '../src/indexer/decode.ts';
import { IndexFollower, readCursor } from '../src/indexer/follower.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { mine, setAutomine, txpoolContent, txpoolHashes } from './support/anvil-control.ts';
import { startRpcProxy, type RpcProxy } from './support/rpc-proxy.ts';
import { rpc, startTestService, type TestService } from './support/service.ts';
import { startTokenChain, type ContractCall, type TokenChain } from './support/token-chain.ts';

/** Most logs the proxied node puts in one eth_getLogs answer. */
const LIMIT = 200;
const ADMIN = 'log-reads-test-admin-token-01';
const abi = parseAbi(['function balanceOf(address) view returns (uint256)']);
const someone = () => privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
const A = someone();
const B = someone();

let chain: TokenChain;
let pub: ReturnType<typeof devPublicClient>;
let proxy: RpcProxy;
let t: TestService;
let c: { coinA: Address; coinB: Address; nftA: Address; nftB: Address };
/** The block with more logs than one answer holds, and the one no read can get (until the test allows it). */
let big: bigint;
let unreadable: bigint;
let unreadableTxs: Set<string>;
let bigTxs: Set<string>;
/** Whether the node's cap covers receipts too, or only eth_getLogs (as hosted nodes cap its result count). */
let capReceipts = true;
/** The first and last block of the test's transactions. */
let first: bigint;
let last: bigint;

const call = (address: Address, contract: string, functionName: string, args: unknown[]): ContractCall => ({ address, contract, functionName, args });

/** Sends the calls with automine off and mines them in one block; returns its number. */
async function inOneBlock(calls: ContractCall[]): Promise<bigint> {
  const url = chain.anvil.rpcUrl;
  await setAutomine(url, false);
  try {
    const sent = chain.send(calls);
    for (let i = 0; txpoolHashes(await txpoolContent(url)).length < calls.length; i++) {
      if (i > 200) throw new Error('transactions never reached the pool');
      await new Promise((r) => setTimeout(r, 10));
    }
    await mine(url, 1);
    await sent;
  } finally {
    await setAutomine(url, true);
  }
  const n = await pub.getBlockNumber();
  expect((await pub.getBlock({ blockNumber: n })).transactions).toHaveLength(calls.length);
  return n;
}

const chainLogs = async (block: bigint) => pub.getLogs({ fromBlock: block, toBlock: block });

async function indexedRows(block: bigint): Promise<number> {
  const res = await t.services.db.query<{ n: string }>('SELECT count(*)::text AS n FROM indexer_transfers WHERE chain_id = $1 AND block_number = $2', [chain.anvil.chainId, block.toString()]);
  return Number(res.rows[0]!.n);
}

async function indexedBalance(contract: Address, account: Address): Promise<bigint> {
  const res = await t.services.db.query<{ b: string }>('SELECT balance::text AS b FROM indexer_balances WHERE chain_id = $1 AND contract = $2 AND account = $3', [
    chain.anvil.chainId,
    contract,
    account,
  ]);
  return BigInt(res.rows[0]?.b ?? '0');
}

const onChain = (contract: Address, account: Address) => pub.readContract({ address: contract, abi, functionName: 'balanceOf', args: [account] });

async function unreadRows(reader: string) {
  const res = await t.services.db.query<{ b: string; resolved: boolean; error: string }>(
    'SELECT block_number::text AS b, resolved_at IS NOT NULL AS resolved, error FROM unread_blocks WHERE chain_id = $1 AND reader = $2 ORDER BY block_number',
    [chain.anvil.chainId, reader],
  );
  return res.rows.map((r) => ({ block: BigInt(r.b), resolved: r.resolved, error: r.error }));
}

/** The metric's value for a reader, from the service's own registry (what /metrics serves). */
async function metric(name: string, reader: string): Promise<number> {
  const m = await t.services.metrics.registry.getSingleMetric(name)!.get();
  return m.values.find((v) => v.labels.reader === reader)?.value ?? 0;
}

/** Every token id the watcher queued a refresh for, per contract. */
async function watcherItems(): Promise<Map<string, Set<string>>> {
  const out = new Map<string, Set<string>>();
  for (const task of await t.services.tasks.list(null)) {
    if (task.source !== 'watcher' || !task.contract_address) continue;
    const set = out.get(task.contract_address) ?? new Set<string>();
    for (const i of await t.services.tasks.items(task.id)) set.add(i.item);
    out.set(task.contract_address, set);
  }
  return out;
}

const ids = (first: number, n: number) => Array.from({ length: n }, (_, k) => String(first + k));

/** Polls until the cursor reaches the head; throws (with the last error) if it never does. */
async function follow(poll: () => Promise<unknown>, at: () => Promise<bigint | null | undefined>, maxPolls = 30): Promise<number> {
  let lastErr: unknown;
  for (let i = 1; i <= maxPolls; i++) {
    try {
      await poll();
    } catch (err) {
      lastErr = err;
    }
    if ((await at()) === last) return i;
  }
  throw new Error(`stuck at block ${await at()} of ${last}: ${(lastErr as Error)?.message?.split('\n')[0]}`);
}

beforeAll(async () => {
  chain = await startTokenChain();
  pub = devPublicClient(chain.anvil.rpcUrl, chain.anvil.chainId);
  const [coinA, coinB, nftA, nftB] = await chain.deploy([{ contract: 'TestFloodERC20' }, { contract: 'TestFloodERC20' }, { contract: 'TestFloodERC721' }, { contract: 'TestFloodERC721' }]);
  c = { coinA: coinA!.toLowerCase() as Address, coinB: coinB!.toLowerCase() as Address, nftA: nftA!.toLowerCase() as Address, nftB: nftB!.toLowerCase() as Address };
  first = (await pub.getBlockNumber()) + 1n;
  // 900 logs in one block, 150 per transaction: the block's logs, a coin's logs and its receipts do
  // not fit one answer; an NFT's logs and one transaction's receipt do.
  big = await inOneBlock([
    call(c.coinA, 'TestFloodERC20', 'flood', [A, 150n]),
    call(c.coinA, 'TestFloodERC20', 'flood', [A, 150n]),
    call(c.coinB, 'TestFloodERC20', 'flood', [B, 150n]),
    call(c.coinB, 'TestFloodERC20', 'flood', [B, 150n]),
    call(c.nftA, 'TestFloodERC721', 'floodMint', [A, 1n, 150n]),
    call(c.nftB, 'TestFloodERC721', 'floodMint', [B, 1n, 150n]),
  ]);
  bigTxs = new Set((await pub.getBlock({ blockNumber: big })).transactions.map((h) => h.toLowerCase()));
  unreadable = await inOneBlock([call(c.coinA, 'TestFloodERC20', 'flood', [A, 5n]), call(c.nftA, 'TestFloodERC721', 'floodMint', [A, 1000n, 3n])]);
  unreadableTxs = new Set((await pub.getBlock({ blockNumber: unreadable })).transactions.map((h) => h.toLowerCase()));
  await chain.send([call(c.coinB, 'TestFloodERC20', 'flood', [A, 7n]), call(c.nftB, 'TestFloodERC721', 'floodMint', [A, 2000n, 2n])]);
  last = await pub.getBlockNumber();
  expect((await chainLogs(big)).length).toBe(900);

  proxy = await startRpcProxy(chain.anvil.rpcUrl);
  proxy.addAnswerRule((q, result) => {
    const logs =
      q.method === 'eth_getLogs'
        ? (result as unknown[]).length
        : !capReceipts
          ? 0
          : q.method === 'eth_getBlockReceipts'
            ? (result as Array<{ logs: unknown[] }>).reduce((n, r) => n + r.logs.length, 0)
            : q.method === 'eth_getTransactionReceipt'
              ? ((result as { logs?: unknown[] } | null)?.logs?.length ?? 0)
              : 0;
    return logs > LIMIT ? `response size exceeded: more than ${LIMIT} logs` : undefined;
  });
  t = await startTestService({
    chains: [
      {
        chainId: chain.anvil.chainId,
        name: 'anvil',
        rpcUrls: [proxy.url],
        watch: true,
        watchFromBlock: Number(first),
        indexer: { scope: 'all', fromBlock: Number(first), confirmations: 0, chunkBlocks: 50 },
      },
    ],
    watcher: { confirmations: 0, maxBlocksPerPoll: 50 },
    logReads: { blockAttempts: 3, retrySec: 0 },
    admin: { tokens: [ADMIN] },
  });
  // The watcher reads the contracts the service knows.
  for (const nft of [c.nftA, c.nftB]) {
    await t.services.db.query(`INSERT INTO contracts (chain_id, address, type, type_checked_at) VALUES ($1, $2, 'ERC721', now())`, [chain.anvil.chainId, nft]);
  }
}, 120_000);

afterAll(async () => {
  await t?.close();
  await proxy?.close();
  await chain?.stop();
});

let allowUnreadable: (() => void) | undefined;
// A test that failed before allowing it again leaves no refusal to the next.
afterEach(() => allowUnreadable?.());

/** Makes `unreadable` unreadable in every way the reader could try: its logs and its receipts. */
function refuseUnreadable(): () => void {
  return (allowUnreadable = proxy.addRule((q) => {
    if (q.method === 'eth_getLogs') {
      const f = q.params[0] as { fromBlock: Hex; toBlock: Hex };
      return BigInt(f.fromBlock) <= unreadable && unreadable <= BigInt(f.toBlock) ? { kind: 'fail', message: 'response size exceeded' } : undefined;
    }
    if (q.method === 'eth_getTransactionReceipt') return unreadableTxs.has(String(q.params[0]).toLowerCase()) ? { kind: 'fail', message: 'response size exceeded' } : undefined;
    if (q.method === 'eth_getBlockReceipts') return BigInt(q.params[0] as Hex) === unreadable ? { kind: 'fail', message: 'response size exceeded' } : undefined;
    return undefined;
  }));
}

describe('log reads of blocks too big for one answer', () => {
  it('the shared reader gives every log of a range holding the big block, in order, and its span grows back past it', async () => {
    const reader = new LogReader(t.services.chains.get(chain.anvil.chainId)!, 50, TRANSFER_TOPICS);
    const got: Array<{ block: bigint; index: number; tx: string }> = [];
    let spanAfterBig = 0;
    for (let from = first; from <= last; ) {
      const { to, logs } = await reader.read(from, last);
      got.push(...logs.map((l) => ({ block: l.blockNumber, index: l.logIndex, tx: l.transactionHash.toLowerCase() })));
      if (from <= big && big <= to) spanAfterBig = reader.currentSpan;
      from = to + 1n;
    }
    const truth = (await pub.getLogs({ fromBlock: first, toBlock: last })).map((l) => ({ block: l.blockNumber, index: l.logIndex, tx: l.transactionHash.toLowerCase() }));
    expect(got).toEqual(truth);
    // Cut to the one block, then doubled by each later read answered: not stuck at a block a request.
    expect(spanAfterBig).toBe(1);
    expect(reader.currentSpan).toBeGreaterThan(2);
  });

  it('the indexer reads a big block split, passes over one it cannot read (flagged, counted, retried later) and goes on', async () => {
    const ix = t.services.indexers.get(chain.anvil.chainId)!;
    const allow = refuseUnreadable();
    await follow(
      () => ix.follower.poll(),
      async () => (await ix.cursor())?.block,
    );

    // The big block is indexed whole: a row per log, as the chain has them, and balanceOf agrees.
    expect(await indexedRows(big)).toBe((await chainLogs(big)).length);
    expect(await indexedBalance(c.coinB, B)).toBe(await onChain(c.coinB, B));
    // The block no read could get is flagged, not retried in silence; later blocks are indexed.
    expect(await unreadRows('indexer:all')).toEqual([{ block: unreadable, resolved: false, error: expect.stringMatching(/response size exceeded/) }]);
    expect(await metric('metarelay_log_blocks_skipped_total', 'indexer:all')).toBe(1);
    expect(await metric('metarelay_log_blocks_unread', 'indexer:all')).toBe(1);
    expect(await indexedRows(unreadable)).toBe(0);
    expect(await indexedRows(last)).toBe((await chainLogs(last)).length);
    expect(await indexedBalance(c.coinA, A)).toBe((await onChain(c.coinA, A)) - 5n);
    expect(await indexedBalance(c.coinB, A)).toBe(await onChain(c.coinB, A));
    const status = await rpc(t.app, '/rpc/Console/IndexerStatus', {}, { authorization: `Bearer ${ADMIN}` });
    expect(status.body.unreadBlocks).toEqual([expect.objectContaining({ reader: 'indexer:all', block: Number(unreadable), retries: expect.any(Number) })]);

    // Still refused: a retry fails and the row stays. Once the node answers, a retry reads it.
    await ix.follower.poll();
    expect((await unreadRows('indexer:all'))[0]).toMatchObject({ resolved: false });
    allow();
    await ix.follower.poll();
    expect(await unreadRows('indexer:all')).toEqual([expect.objectContaining({ block: unreadable, resolved: true })]);
    expect(await metric('metarelay_log_blocks_unread', 'indexer:all')).toBe(0);
    expect(await indexedRows(unreadable)).toBe((await chainLogs(unreadable)).length);
    expect(await indexedBalance(c.coinA, A)).toBe(await onChain(c.coinA, A));
  });

  it('the metadata watcher reads a big block split, passes over one it cannot read and queues its refreshes on a retry', async () => {
    const [watcher] = t.services.watchers;
    const allow = refuseUnreadable();
    proxy.calls.length = 0;
    await follow(
      () => watcher!.poll(),
      async () => watcher!.lastProcessed,
    );
    // Asked contract by contract (each NFT's 150 logs fit an answer), never through the block's receipts.
    const receiptsOfBig = (x: { method: string; params: unknown[] }) =>
      (x.method === 'eth_getBlockReceipts' && BigInt(x.params[0] as Hex) === big) || (x.method === 'eth_getTransactionReceipt' && bigTxs.has(String(x.params[0]).toLowerCase()));
    expect(proxy.calls.filter(receiptsOfBig)).toEqual([]);

    // Every mint of the big block and of the later one is queued; the unreadable block's are not yet.
    expect(await watcherItems()).toEqual(
      new Map([
        [c.nftA, new Set(ids(1, 150))],
        [c.nftB, new Set([...ids(1, 150), ...ids(2000, 2)])],
      ]),
    );
    expect(await unreadRows('watcher')).toEqual([{ block: unreadable, resolved: false, error: expect.stringMatching(/response size exceeded/) }]);
    expect(await metric('metarelay_log_blocks_skipped_total', 'watcher')).toBe(1);

    allow();
    await watcher!.poll();
    expect(await unreadRows('watcher')).toEqual([expect.objectContaining({ block: unreadable, resolved: true })]);
    expect((await watcherItems()).get(c.nftA)).toEqual(new Set([...ids(1, 150), ...ids(1000, 3)]));
  });

  it('a backfill reads the big block from its receipts in one answer and passes over the unreadable one (flagged for the follower to retry) instead of failing its range', async () => {
    const s = t.services;
    const skippedBefore = await metric('metarelay_log_blocks_skipped_total', 'indexer:all');
    const allow = refuseUnreadable();
    // The node caps eth_getLogs only: the big block's receipts come in one eth_getBlockReceipts.
    capReceipts = false;
    proxy.calls.length = 0;
    const id = await backfillStore(s.db).create(chain.anvil.chainId, 'all', first, last, { rangeBlocks: 100 });
    try {
      await backfillWorkerFor(s.db, s.indexers, 60).runUntilIdle(id);
    } finally {
      capReceipts = true;
    }
    expect(proxy.calls.filter((x) => x.method === 'eth_getBlockReceipts' && BigInt(x.params[0] as Hex) === big)).toHaveLength(1);
    expect(proxy.calls.filter((x) => x.method === 'eth_getTransactionReceipt' && bigTxs.has(String(x.params[0]).toLowerCase()))).toEqual([]);
    const done = (await backfillStore(s.db).progress(id))!;
    expect(done).toMatchObject({ status: 'DONE', done: done.blocks });
    // Every log but the unreadable block's was read: the big block's 900 too.
    const logs = async (from: bigint, to: bigint) => (await pub.getLogs({ fromBlock: from, toBlock: to })).length;
    expect(done.logs).toBe((await logs(first, last)) - (await logs(unreadable, unreadable)));
    expect(await unreadRows('indexer:all')).toEqual([expect.objectContaining({ block: unreadable, resolved: false })]);
    expect(await metric('metarelay_log_blocks_skipped_total', 'indexer:all')).toBe(skippedBefore + 1);
    allow();
    await s.indexers.get(chain.anvil.chainId)!.follower.poll();
    expect(await unreadRows('indexer:all')).toEqual([expect.objectContaining({ block: unreadable, resolved: true })]);
  });

  it('a rate limit (HTTP 429) on log reads is waited out, never counted towards passing a block over', async () => {
    const ix = t.services.indexers.get(chain.anvil.chainId)!;
    await follow(
      () => ix.follower.poll(),
      async () => (await ix.cursor())?.block,
    );
    await chain.send([call(c.coinB, 'TestFloodERC20', 'flood', [B, 2n])]);
    const head = await pub.getBlockNumber();
    const limited = proxy.addRule((q) => (q.method === 'eth_getLogs' ? { kind: 'http', status: 429 } : undefined));
    try {
      for (let i = 0; i < 5; i++) await expect(ix.follower.poll()).rejects.toThrow();
      expect((await ix.cursor())!.block).toBe(head - 1n);
      expect((await unreadRows('indexer:all')).filter((r) => r.block === head)).toEqual([]);
    } finally {
      limited();
    }
    await ix.follower.poll();
    expect((await ix.cursor())!.block).toBe(head);
    expect(await indexedBalance(c.coinB, B)).toBe(await onChain(c.coinB, B));
  });

  it('a follower on a node that caps eth_getLogs at 2 blocks reaches the head (a cut span is asked again as cut, then grows)', async () => {
    // Enough blocks past the big one for the span to grow past the cap again.
    await mine(chain.anvil.rpcUrl, 8);
    // A scope of its own (watchlist: its own cursor), over the same blocks as the others.
    const follower = new IndexFollower(
      t.services.chains.get(chain.anvil.chainId)!,
      { scope: 'watchlist', fromBlock: Number(first), confirmations: 0, chunkBlocks: 8, pollMs: 50, reorgWindow: 128, logReads: { blockAttempts: 3, retrySec: 0 } },
      { db: t.services.db, log: createLogger('silent'), addresses: async () => [c.coinA, c.coinB] },
    );
    let budget = 300;
    const capped = proxy.addRule((q) => {
      if (q.method !== 'eth_getLogs') return undefined;
      // A follower asking the same refused range again and again runs out of calls instead of hanging the test.
      if (--budget < 0) return { kind: 'fail', message: 'call budget spent' };
      const f = q.params[0] as { fromBlock: Hex; toBlock: Hex };
      return BigInt(f.toBlock) - BigInt(f.fromBlock) + 1n > 2n ? { kind: 'fail', message: 'block range is too wide: at most 2' } : undefined;
    });
    try {
      const head = await pub.getBlockNumber();
      for (let i = 0; (await readCursor(t.services.db, chain.anvil.chainId, 'watchlist'))?.block !== head; i++) {
        if (i > 20) throw new Error(`stuck at ${(await readCursor(t.services.db, chain.anvil.chainId, 'watchlist'))?.block} of ${head}`);
        await follower.poll();
      }
    } finally {
      capped();
    }
    expect(budget).toBeGreaterThan(0);
  });
});
