// A contract added to a watchlist after the follower passed its blocks gets its history: the
// addition schedules a backfill of that contract alone, from its deployment block, worked in the
// background through the leased ranges. Balances are checked against balanceOf/ownerOf on anvil.
import { SequenceIndexer } from '@0xsequence/indexer';
import { parseAbi, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { devPublicClient } from '../src/devchain/index.ts';
import { rpc, startTestService, type TestService } from './support/service.ts';
import { eventually, startRawServer, startTokenChain, type ContractCall, type TokenChain } from './support/token-chain.ts';
import { catchUp } from './support/catch-up.ts';

const abi = parseAbi(['function balanceOf(address) view returns (uint256)', 'function ownerOf(uint256) view returns (address)']);
const ADMIN = 'indexer-watch-test-admin-token-01';
const someone = () => privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
const call = (address: Address, contract: string, functionName: string, args: unknown[]): ContractCall => ({ address, contract, functionName, args });

let chain: TokenChain;
let pub: ReturnType<typeof devPublicClient>;
let t: TestService;
let client: SequenceIndexer;

beforeAll(async () => {
  chain = await startTokenChain();
  pub = devPublicClient(chain.anvil.rpcUrl, chain.anvil.chainId);
  t = await startTestService({
    chains: [{ ...chain.chainConfig, watch: false, indexer: { scope: 'watchlist', contracts: [], fromBlock: 0, confirmations: 0, chunkBlocks: 8, pollMs: 50 } }],
    // Small ranges: the contract's history is several leased ranges.
    indexer: { backfillRangeBlocks: 4 },
    admin: { tokens: [ADMIN] },
    webhooks: { deadlineMs: 2_000, retryBaseMs: 100, pollMs: 50, retryHorizonSec: 60 },
  });
  const base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  client = new SequenceIndexer(`${base}/indexer/anvil`, t.accessKey);
});

afterAll(async () => {
  await t?.close();
  await chain?.stop();
});

describe('watchlist additions', () => {
  it('a contract added after the follower passed its deployment gets its history and balances through a backfill', async () => {
    const ix = t.services.indexers.get(chain.anvil.chainId)!;
    // Blocks before the contract exists, then its life before anyone watches it.
    await chain.send([]);
    const [erc20, nft] = (await chain.deploy([{ contract: 'TestIndexERC20' }, { contract: 'TestIndexERC721' }])).map((a) => a.toLowerCase() as Address);
    const [A, B, C] = [someone(), someone(), someone()];
    await chain.send([
      call(erc20!, 'TestIndexERC20', 'mint', [A, 1000n]),
      call(erc20!, 'TestIndexERC20', 'move', [A, B, 250n]),
      call(nft!, 'TestIndexERC721', 'mint', [A, 1n]),
      call(nft!, 'TestIndexERC721', 'mint', [A, 2n]),
      call(erc20!, 'TestIndexERC20', 'move', [B, C, 50n]),
      call(nft!, 'TestIndexERC721', 'move', [A, C, 2n]),
      call(erc20!, 'TestIndexERC20', 'burn', [A, 100n]),
    ]);
    await catchUp(ix);
    expect((await client.getTokenBalances({ contractAddress: erc20! })).balances).toEqual([]);

    const added = await rpc(t.app, '/rpc/Console/IndexerWatch', { chainID: 'anvil', contractAddress: erc20 }, { authorization: `Bearer ${ADMIN}` });
    expect(added.status).toBe(200);
    const { backfill } = added.body as { backfill: { id: number; fromBlock: number; toBlock: number } };
    // From the block the contract was deployed in: code there, none in the block before.
    expect(await pub.getCode({ address: erc20!, blockNumber: BigInt(backfill.fromBlock) })).not.toBe(undefined);
    expect(await pub.getCode({ address: erc20!, blockNumber: BigInt(backfill.fromBlock - 1) })).toBe(undefined);
    expect(backfill.toBlock).toBe(Number(await pub.getBlockNumber()));
    // Adding it again schedules nothing more.
    const again = await rpc(t.app, '/rpc/Console/IndexerWatch', { chainID: 'anvil', contractAddress: erc20 }, { authorization: `Bearer ${ADMIN}` });
    expect(again.body).toMatchObject({ added: false, backfill: null });

    // Transfers after the addition: the follower reads them while the backfill reads the past.
    await chain.send([call(erc20!, 'TestIndexERC20', 'move', [C, A, 20n]), call(erc20!, 'TestIndexERC20', 'mint', [C, 7n])]);
    t.services.indexerBackfills!.start();
    await catchUp(ix);
    const status = async () => ((await rpc(t.app, '/rpc/Console/IndexerStatus', {}, { authorization: `Bearer ${ADMIN}` })).body as { backfills: Array<Record<string, unknown>> }).backfills;
    await expect.poll(async () => (await status()).find((b) => b.id === backfill.id)?.status, { message: 'the backfill to be DONE' }).toBe('DONE');
    const done = (await status()).find((b) => b.id === backfill.id)!;
    expect(done).toMatchObject({ status: 'DONE', contracts: [erc20], done: done.blocks, malformed: 0 });
    expect((done.ranges as { total: number }).total).toBeGreaterThan(1);

    // Balances equal the chain's; the other contract, never watched, is not indexed.
    const rows = (await client.getTokenBalances({ contractAddress: erc20! })).balances;
    const got = Object.fromEntries(rows.map((r) => [r.accountAddress, r.balance]));
    const want: Record<string, string> = {};
    for (const acc of [A, B, C]) {
      const bal = await pub.readContract({ address: erc20!, abi, functionName: 'balanceOf', args: [acc] });
      if (bal > 0n) want[acc] = String(bal);
    }
    expect(got).toEqual(want);
    expect(want).toEqual({ [A]: '670', [B]: '200', [C]: '37' });
    expect((await client.getTokenBalances({ contractAddress: nft! })).balances).toEqual([]);
    // The history from before the addition is there, newest first.
    const hist = await client.getTransactionHistory({ filter: { accountAddress: B } });
    expect(hist.transactions.map((x) => x.transfers!.map((tr) => `${tr.transferType}:${tr.amounts[0]}`))).toEqual([['SEND:50'], ['RECEIVE:250']]);
  });

  it('a start block given with the addition is where the backfill begins; a contract without code schedules none', async () => {
    const ix = t.services.indexers.get(chain.anvil.chainId)!;
    const [nft] = (await chain.deploy([{ contract: 'TestIndexERC721' }])).map((a) => a.toLowerCase() as Address);
    const D = someone();
    await chain.send([call(nft!, 'TestIndexERC721', 'mint', [D, 5n]), call(nft!, 'TestIndexERC721', 'mint', [D, 6n])]);
    await catchUp(ix);
    const none = await rpc(t.app, '/rpc/Console/IndexerWatch', { chainID: 'anvil', contractAddress: someone() }, { authorization: `Bearer ${ADMIN}` });
    expect(none.body).toMatchObject({ added: true, backfill: null, note: expect.stringContaining('no code') });
    const added = await rpc(t.app, '/rpc/Console/IndexerWatch', { chainID: 'anvil', contractAddress: nft, fromBlock: 1 }, { authorization: `Bearer ${ADMIN}` });
    expect(added.body.backfill).toMatchObject({ fromBlock: 1 });
    for (let i = 0; i < 400; i++) {
      const rows = (await client.getTokenBalances({ contractAddress: nft! })).balances;
      if (rows.length === 2) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const rows = (await client.getTokenBalances({ contractAddress: nft! })).balances;
    for (const r of rows) {
      expect((await pub.readContract({ address: nft!, abi, functionName: 'ownerOf', args: [BigInt(r.tokenID!)] })).toLowerCase()).toBe(r.accountAddress);
    }
    expect(rows.map((r) => r.tokenID)).toEqual(['5', '6']);
  });

  it('balance changes of watched contracts reach a subscribed webhook as balance.updated, one event per contract and step', async () => {
    const ix = t.services.indexers.get(chain.anvil.chainId)!;
    const got: Array<{ type: string; chainId: number; data: { contractAddress: string; blockNumber: number; balances: Array<{ accountAddress: string; tokenID: string; balance: string }> } }> = [];
    const server = await startRawServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        got.push(JSON.parse(body));
        res.writeHead(200).end('{}');
      });
    });
    try {
      const hook = await rpc(t.app, '/rpc/Console/CreateWebhook', { projectId: t.project.id, url: `${server.url}/balances`, events: ['balance.updated'] }, { authorization: `Bearer ${ADMIN}` });
      expect(hook.status, JSON.stringify(hook.body)).toBe(200);
      t.services.events.delivery.start();
      const [erc20] = (await chain.deploy([{ contract: 'TestIndexERC20' }])).map((a) => a.toLowerCase() as Address);
      await catchUp(ix);
      await rpc(t.app, '/rpc/Console/IndexerWatch', { chainID: 'anvil', contractAddress: erc20 }, { authorization: `Bearer ${ADMIN}` });
      const [E, F] = [someone(), someone()];
      // One block each (automine); the follower reads them in one step, so one event with the balances after both.
      await chain.send([call(erc20!, 'TestIndexERC20', 'mint', [E, 90n]), call(erc20!, 'TestIndexERC20', 'move', [E, F, 90n])]);
      await catchUp(ix);
      const events = await eventually(
        async () => got.filter((e) => e.data.contractAddress === erc20),
        (list) => expect(list.length).toBeGreaterThan(0),
      );
      expect(events.every((e) => e.type === 'balance.updated' && e.chainId === chain.anvil.chainId)).toBe(true);
      // The last word on each holder is the chain's balance (E sold out: "0").
      const last = new Map<string, string>();
      for (const e of [...events].sort((a, b) => a.data.blockNumber - b.data.blockNumber)) for (const b of e.data.balances) last.set(b.accountAddress, b.balance);
      for (const acc of [E, F]) expect(last.get(acc)).toBe(String(await pub.readContract({ address: erc20!, abi, functionName: 'balanceOf', args: [acc] })));
      expect(Object.fromEntries(last)).toEqual({ [E]: '0', [F]: '90' });
    } finally {
      await server.stop();
    }
  });

  it('a SyncBalance that changes a balance is told as balance.updated with the synced balance; one that changes nothing is not told', async () => {
    const ix = t.services.indexers.get(chain.anvil.chainId)!;
    const [erc20] = (await chain.deploy([{ contract: 'TestIndexERC20' }])).map((a) => a.toLowerCase() as Address);
    const [G, H] = [someone(), someone()];
    // Minted before anyone watches it; the watchlist takes it without its history (no backfill), so the
    // indexer holds nothing of G until a sync.
    await chain.send([call(erc20!, 'TestIndexERC20', 'mint', [G, 70n])]);
    await catchUp(ix);
    await ix.watchlist.add(erc20!, t.project.id);
    await chain.send([call(erc20!, 'TestIndexERC20', 'mint', [H, 5n])]);
    await catchUp(ix);
    const told = async () =>
      (
        await t.testDb.db.query<{ payload: { balances: Array<{ accountAddress: string; balance: string }> } }>(
          `SELECT payload FROM events WHERE type = 'balance.updated' AND subject = $1 ORDER BY id`,
          [`balances:${chain.anvil.chainId}:${erc20}`],
        )
      ).rows.flatMap((r) => r.payload.balances);
    expect(await told()).toEqual([expect.objectContaining({ accountAddress: H, balance: '5' })]);

    await client.syncBalance({ accountAddress: G, contractAddress: erc20! });
    const onChain = String(await pub.readContract({ address: erc20!, abi, functionName: 'balanceOf', args: [G] }));
    expect(onChain).toBe('70');
    expect((await told()).slice(1)).toEqual([expect.objectContaining({ accountAddress: G, balance: onChain })]);
    // Synced again: the balance is what it was, and nobody is told of it twice.
    await client.syncBalance({ accountAddress: G, contractAddress: erc20! });
    expect(await told()).toHaveLength(2);
  });
});
