// The indexer (#17) end to end on a real anvil, read through the official @0xsequence/indexer client:
// every balance it reports is checked against balanceOf/ownerOf read from the chain.
import { SequenceIndexer, webrpcErrorByCode } from '@0xsequence/indexer';
import { IndexerErrors } from '../src/http/core/errors.ts';
import { parseAbi, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackfillWorker, addressFilter, backfillStore } from '../src/indexer/index.ts';
import { ANVIL_DEPLOYER_KEY, devPublicClient } from '../src/devchain/index.ts';
import { mine, revert, snapshot } from './support/anvil-control.ts';
import { startRpcProxy, type RpcProxy } from './support/rpc-proxy.ts';
import { rpc, startTestService, type TestService } from './support/service.ts';
import { createTestDb } from './support/db.ts';
import { runCli, runMain } from './support/cli.ts';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { secondProcess, startTokenChain, type ContractCall, type TokenChain } from './support/token-chain.ts';
import { catchUp } from './support/catch-up.ts';

type Kind = 'ERC20' | 'ERC721' | 'ERC1155';
const abi = parseAbi([
  'function balanceOf(address) view returns (uint256)',
  'function balanceOf(address, uint256) view returns (uint256)',
  'function ownerOf(uint256) view returns (address)',
  'function totalSupply() view returns (uint256)',
]);
const ADMIN = 'indexer-test-admin-token-0001';
const someone = () => privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;

let chain: TokenChain;
let pub: ReturnType<typeof devPublicClient>;
let t: TestService;
let client: SequenceIndexer;
let c: { erc20: Address; fee: Address; nft: Address; multi: Address; bad: Address };
const kinds = new Map<string, Kind>();
/** Every (contract, account, token id) some transaction touched. */
const touched = new Set<string>();
const A = someone();
const B = someone();
const C = someone();
const F = someone();

const touch = (contract: Address, account: Address, id: number | bigint = 0) => touched.add(`${contract}:${account}:${BigInt(id)}`);

async function onChain(key: string): Promise<bigint> {
  const [contract, account, id] = key.split(':') as [Address, Address, string];

  switch (kinds.get(contract)) {
    case 'ERC20':
      return pub.readContract({ address: contract, abi, functionName: 'balanceOf', args: [account] });
    case 'ERC721': {
      const owner = await pub.readContract({ address: contract, abi, functionName: 'ownerOf', args: [BigInt(id)] }).catch(() => null);
      return owner?.toLowerCase() === account ? 1n : 0n;
    }
    default:
      return pub.readContract({ address: contract, abi, functionName: 'balanceOf', args: [account, BigInt(id)] });
  }
}

/** Every positive balance the indexer holds for the test contracts, read page by page with the client. */
async function indexed(ix: SequenceIndexer): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  let page: Record<string, unknown> | undefined = { pageSize: 7 };
  for (let guard = 0; page && guard < 100; guard++) {
    const res = await ix.getTokenBalancesByContract({ filter: { contractAddresses: Object.values(c) }, omitMetadata: true, page });
    for (const b of res.balances) out.set(`${b.contractAddress}:${b.accountAddress}:${b.tokenID}`, b.balance);
    page = res.page.more ? (res.page as Record<string, unknown>) : undefined;
  }
  return out;
}

/** Indexed balances equal the chain's for every touched key, and the indexer has no others. */
async function expectGroundTruth(ix: SequenceIndexer) {
  const got = await indexed(ix);
  const keys = [...touched];
  const truth = await Promise.all(keys.map(onChain));
  const want = new Map<string, string>();
  keys.forEach((k, i) => {
    if (truth[i]! > 0n) want.set(k, truth[i]!.toString());
  });
  expect(Object.fromEntries([...got].sort())).toEqual(Object.fromEntries([...want].sort()));
}

const call = (address: Address, contract: string, functionName: string, args: unknown[]): ContractCall => ({ address, contract, functionName, args });

beforeAll(async () => {
  chain = await startTokenChain();
  pub = devPublicClient(chain.anvil.rpcUrl, chain.anvil.chainId);
  const [erc20, fee, nft, multi, bad] = await chain.deploy([
    { contract: 'TestIndexERC20' },
    { contract: 'TestFeeToken', args: [F] },
    { contract: 'TestIndexERC721' },
    { contract: 'TestIndexERC1155', args: ['http://127.0.0.1/{id}.json'] },
    { contract: 'TestMalformedTransfers' },
  ]);
  c = { erc20: erc20!, fee: fee!, nft: nft!, multi: multi!, bad: bad! };
  for (const [k, v] of Object.entries(c)) c[k as keyof typeof c] = v.toLowerCase() as Address;
  kinds.set(c.erc20, 'ERC20').set(c.fee, 'ERC20').set(c.nft, 'ERC721').set(c.multi, 'ERC1155').set(c.bad, 'ERC20');
  t = await startTestService({
    chains: [{ ...chain.chainConfig, watch: false, indexer: { scope: 'all', fromBlock: 0, confirmations: 0, chunkBlocks: 50, pollMs: 50 } }],
  });
  const base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  client = new SequenceIndexer(`${base}/indexer/anvil`, t.accessKey);
});

afterAll(async () => {
  await t?.close();
  await chain?.stop();
});

describe('indexer', () => {
  it('mints, transfers, batches, burns, self-transfers, a fee-on-transfer token and malformed logs: balances equal the chain', async () => {
    const { erc20, fee, nft, multi, bad } = c;
    await chain.send([
      call(erc20, 'TestIndexERC20', 'mint', [A, 1000n]),
      call(erc20, 'TestIndexERC20', 'move', [A, B, 300n]),
      call(erc20, 'TestIndexERC20', 'move', [B, B, 50n]),
      call(erc20, 'TestIndexERC20', 'burn', [A, 100n]),
      call(erc20, 'TestIndexERC20', 'mint', [C, 5n]),
      call(fee, 'TestFeeToken', 'mint', [A, 1000n]),
      call(fee, 'TestFeeToken', 'move', [A, B, 500n]),
      call(fee, 'TestFeeToken', 'move', [B, C, 100n]),
      call(nft, 'TestIndexERC721', 'mint', [A, 1n]),
      call(nft, 'TestIndexERC721', 'mint', [A, 2n]),
      call(nft, 'TestIndexERC721', 'mint', [A, 3n]),
      call(nft, 'TestIndexERC721', 'move', [A, B, 2n]),
      call(nft, 'TestIndexERC721', 'move', [B, B, 2n]),
      call(nft, 'TestIndexERC721', 'burn', [3n]),
      call(nft, 'TestIndexERC721', 'mint', [C, 4n]),
      call(multi, 'TestIndexERC1155', 'mint', [A, 1n, 10n]),
      call(multi, 'TestIndexERC1155', 'mintBatch', [B, [2n, 3n], [5n, 6n]]),
      call(multi, 'TestIndexERC1155', 'moveBatch', [B, C, [2n, 3n], [1n, 6n]]),
      call(multi, 'TestIndexERC1155', 'move', [A, A, 1n, 3n]),
      call(multi, 'TestIndexERC1155', 'burnBatch', [C, [2n], [1n]]),
      call(multi, 'TestIndexERC1155', 'move', [A, B, 1n, 4n]),
      call(bad, 'TestMalformedTransfers', 'emitMalformed', [A]),
    ]);
    for (const acc of [A, B, C]) touch(erc20, acc);
    for (const acc of [A, B, C, F]) touch(fee, acc);
    for (const id of [1, 2, 3, 4]) for (const acc of [A, B, C]) touch(nft, acc, id);
    for (const id of [1, 2, 3]) for (const acc of [A, B, C]) touch(multi, acc, id);

    const ix = t.services.indexers.get(chain.anvil.chainId)!;
    await catchUp(ix);
    await expectGroundTruth(client);
    // Spot values, so a ground truth read wrongly on both sides would still show.
    const all = await indexed(client);
    expect(all.get(`${fee}:${F}:0`)).toBe('60');
    expect(all.get(`${multi}:${B}:2`)).toBe('4');
    expect(all.has(`${nft}:${A}:3`)).toBe(false);

    const status = (await client.runtimeStatus()).status;
    expect(status.chainID).toBe(chain.anvil.chainId);
    expect((status.checks as unknown as { malformedLogs: number }).malformedLogs).toBe(6);
    expect(status.checks.lastBlockNum).toBe(Number(await pub.getBlockNumber()));
    const logs = (await t.services.metrics.indexerLogs.get()).values;
    expect(logs.find((v) => v.labels.outcome === 'malformed')?.value).toBe(6);

    // B's tokens with their metadata, two per page, sending each answer's page back.
    const rows: Array<Awaited<ReturnType<SequenceIndexer['getTokenBalances']>>['balances'][number]> = [];
    let page: Record<string, unknown> | undefined = { pageSize: 2 };
    for (let pages = 0; page; pages++) {
      expect(pages).toBeLessThan(3);
      const res = await client.getTokenBalances({ accountAddress: B, includeMetadata: true, page });
      rows.push(...res.balances);
      page = res.page.more ? (res.page as Record<string, unknown>) : undefined;
    }
    expect(rows.map((r) => `${r.contractAddress}:${r.tokenID}:${r.balance}`).sort()).toEqual([`${erc20}:0:300`, `${fee}:0:350`, `${nft}:2:1`, `${multi}:1:4`, `${multi}:2:4`].sort());
    for (const r of rows) {
      expect(r.accountAddress).toBe(B);
      expect(r.contractInfo?.address).toBe(r.contractAddress);
      if (r.contractType === 'ERC20') expect(r.tokenMetadata).toBeUndefined();
      else expect(r.tokenMetadata?.tokenId).toBe(r.tokenID);
    }

    // C's history: newest first, the batch as one transfer with its ids, the burn as a SEND.
    const hist = await client.getTransactionHistory({ filter: { accountAddress: C } });
    expect(hist.transactions).toHaveLength(5);
    const numbers = hist.transactions.map((x) => x.blockNumber);
    expect([...numbers].sort((x, y) => y - x)).toEqual(numbers);
    const batch = hist.transactions.flatMap((x) => x.transfers ?? []).find((tr) => tr.contractAddress === multi && tr.from === B)!;
    expect(batch).toMatchObject({ transferType: 'RECEIVE', contractType: 'ERC1155', tokenIds: ['2', '3'], amounts: ['1', '6'] });
    const burn = hist.transactions.flatMap((x) => x.transfers ?? []).find((tr) => tr.contractAddress === multi && tr.from === C)!;
    expect(burn).toMatchObject({ transferType: 'SEND', to: '0x0000000000000000000000000000000000000000', tokenIds: ['2'], amounts: ['1'] });
    const withMeta = await client.getTransactionHistory({ filter: { accountAddress: C, contractAddress: multi }, includeMetadata: true });
    const batchWithMeta = withMeta.transactions.flatMap((x) => x.transfers ?? []).find((tr) => tr.from === B)!;
    expect(batchWithMeta.contractInfo?.address).toBe(multi);
    expect(Object.keys(batchWithMeta.tokenMetadata ?? {}).sort()).toEqual(['2', '3']);
    expect(batchWithMeta.tokenMetadata!['3']!.tokenId).toBe('3');
    const feeTx = hist.transactions.find((x) => x.transfers?.some((tr) => tr.contractAddress === fee))!;
    expect(feeTx.transfers).toHaveLength(1);
    expect(feeTx.transfers![0]).toMatchObject({ from: B, to: C, amounts: ['90'], transferType: 'RECEIVE' });
    const receipt = (await client.fetchTransactionReceipt({ txnHash: feeTx.txnHash })).receipt;
    expect(receipt).toMatchObject({ txnHash: feeTx.txnHash, txnStatus: 'SUCCESSFUL', blockNumber: feeTx.blockNumber, final: true });
    expect(receipt.logs.map((l) => l.contractAddress)).toEqual([fee, fee]);
    const block = await pub.getBlock({ blockNumber: BigInt(feeTx.blockNumber) });
    expect(feeTx.blockHash).toBe(block.hash);
    expect(new Date(feeTx.timestamp).getTime()).toBe(Number(block.timestamp) * 1000);

    // Supplies add up to the chain's.
    const supply20 = await client.getTokenSupplies({ contractAddress: erc20 });
    expect(supply20.contractType).toBe('ERC20');
    expect(supply20.tokenIDs.map((s) => s.supply)).toEqual([String(await pub.readContract({ address: erc20, abi, functionName: 'totalSupply' }))]);
    const map = await client.getTokenSuppliesMap({ tokenMap: { [multi]: ['1', '2', '3'] } });
    expect(map.supplies[multi]!.map((s) => `${s.tokenID}=${s.supply}`)).toEqual(['1=10', '2=4', '3=6']);
    expect((await client.getTokenIDs({ contractAddress: nft })).tokenIDs).toEqual(['1', '2', '4']);

    // Summary: one row per (account, contract), with the number of distinct collectibles.
    const summary = await client.getTokenBalancesSummary({ filter: { accountAddresses: [B], omitNativeBalances: false } });
    expect(summary.nativeBalances).toEqual([expect.objectContaining({ accountAddress: B, balance: '0' })]);
    const multiRow = summary.balances.find((b) => b.contractAddress === multi)!;
    expect(multiRow).toMatchObject({ isSummary: true, uniqueCollectibles: '2', balance: '8' });

    // Balance updates since block 0 cover every holder of the ERC20, a stale block hash restarts them.
    const updates = await client.getBalanceUpdates({ contractAddress: erc20, lastBlockNumber: 0 });
    expect(updates.balances.map((b) => b.accountAddress).sort()).toEqual([A, B, C].sort());
    const head = Number(await pub.getBlockNumber());
    expect((await client.getBalanceUpdates({ contractAddress: erc20, lastBlockNumber: head })).balances).toEqual([]);
    const stale = await client.getBalanceUpdates({ contractAddress: erc20, lastBlockNumber: head, lastBlockHash: `0x${'ab'.repeat(32)}` });
    expect(stale.balances).toHaveLength(3);

    // The native balance is the chain's.
    const deployer = privateKeyToAccount(ANVIL_DEPLOYER_KEY).address;
    const [eth, native] = await Promise.all([client.getEtherBalance({ accountAddress: deployer }), client.getNativeTokenBalance({ accountAddress: deployer })]);
    const wei = String(await pub.getBalance({ address: deployer }));
    expect(eth.balance.balanceWei).toBe(wei);
    expect(native.balance).toMatchObject({ balance: wei, chainId: chain.anvil.chainId, symbol: 'ETH' });
    expect((await client.getChainID()).chainID).toBe(chain.anvil.chainId);
  });

  it("the error table is the client's: every code, HTTP status and message of indexer.gen.ts", () => {
    const theirs = Object.entries(webrpcErrorByCode as Record<string, new () => { name: string; code: number; status: number; message: string }>)
      .filter(([code]) => Number(code) > 0)
      .map(([, E]) => new E())
      .map((e) => [e.name, e.code, e.status, e.message]);
    const ours = Object.values(IndexerErrors).map((d) => [d.name, d.code, d.status, d.message]);
    expect(ours.sort()).toEqual(theirs.sort());
  });

  it('refuses bad requests with the indexer error codes, and methods it lacks do not exist', async () => {
    await expect(client.getTokenBalances({})).rejects.toMatchObject({ code: 2001, status: 400 });
    await expect(client.getTokenBalances({ accountAddress: 'nope' })).rejects.toMatchObject({ code: 2001 });
    await expect(client.getTokenBalances({ accountAddress: A, page: { sort: [{ column: 'balance', order: 'DESC' as never }] } })).rejects.toMatchObject({ code: 2001 });
    await expect(client.getTransactionHistory({ filter: { metaTransactionIDs: ['x'] } })).rejects.toMatchObject({ code: 2001 });
    // Numbers past what the database takes are the caller's mistake, not a 500.
    await expect(client.getBalanceUpdates({ contractAddress: c.erc20, lastBlockNumber: 1e20 })).rejects.toMatchObject({ code: 2001 });
    await expect(client.getTokenBalances({ accountAddress: A, page: { after: '99999999999999999999' } })).rejects.toMatchObject({ code: 2001 });
    await expect(client.getTokenBalances({ accountAddress: A, page: { page: 99_999_999, pageSize: 1000 } })).rejects.toMatchObject({ code: 2001 });
    await expect(client.getTransactionHistory({ filter: { accountAddress: A, toBlock: 2 ** 60 } })).rejects.toMatchObject({ code: 2001 });
    await expect(client.fetchTransactionReceipt({ txnHash: `0x${'00'.repeat(32)}` })).rejects.toMatchObject({ code: 3000 });
    await expect(client.getMarketplaceTopOrders({ marketplaceContractAddress: A, collectionAddress: A, filter: {} as never })).rejects.toMatchObject({ code: -2, status: 404 });
    // A chain with no prices configured prices nothing: an empty answer, not an error.
    expect(await client.getTokenPrices({ q: [] })).toMatchObject({ prices: [] });
    const base = (client as unknown as { hostname: string }).hostname.replace(/\/indexer\/anvil$/, '');
    await expect(new SequenceIndexer(`${base}/indexer/nowhere`, t.accessKey).getChainID()).rejects.toMatchObject({ code: 2002 });
    await expect(new SequenceIndexer(`${base}/indexer/anvil`).getTokenBalances({ accountAddress: A })).rejects.toMatchObject({ code: 1000, status: 401 });
    // A project held to other networks gets InvalidService here.
    const other = await t.services.db.query<{ id: number }>(`INSERT INTO projects (name, allowed_chain_ids) VALUES ('mainnet-only', '{1}') RETURNING id`);
    const { key } = await t.services.accessKeys.create(Number(other.rows[0]!.id), 'mainnet');
    await expect(new SequenceIndexer(`${base}/indexer/anvil`, key).getChainID()).rejects.toMatchObject({ code: 1104, status: 403 });
  });

  it('a reorg rolls balances back, and the new fork forward', async () => {
    const ix = t.services.indexers.get(chain.anvil.chainId)!;
    const D = someone();
    const E = someone();
    const url = chain.anvil.rpcUrl;
    const snap = await snapshot(url);
    await chain.send([call(c.erc20, 'TestIndexERC20', 'mint', [D, 77n]), call(c.erc20, 'TestIndexERC20', 'move', [A, D, 10n])]);
    touch(c.erc20, D);
    touch(c.erc20, E);
    await catchUp(ix);
    expect((await indexed(client)).get(`${c.erc20}:${D}:0`)).toBe('87');
    await revert(url, snap);
    await chain.resyncNonce();
    await chain.send([call(c.erc20, 'TestIndexERC20', 'mint', [E, 5n]), call(c.erc20, 'TestIndexERC20', 'mint', [D, 1n])]);
    await mine(url, 3);
    await catchUp(ix);
    await expectGroundTruth(client);
    expect((await t.services.metrics.indexerReorgs.get()).values[0]?.value).toBe(1);
    const all = await indexed(client);
    expect(all.get(`${c.erc20}:${D}:0`)).toBe('1');
    expect(all.get(`${c.erc20}:${A}:0`)).toBe('600');
    const hist = await client.getTransactionHistory({ filter: { accountAddress: D } });
    expect(hist.transactions).toHaveLength(1);

    // Two processes following the same chain on one database: each step is applied once.
    const second = await secondProcess(t, { chains: [{ ...chain.chainConfig, watch: false, indexer: { scope: 'all', fromBlock: 0, confirmations: 0, chunkBlocks: 1 } }] });
    try {
      await chain.send([call(c.erc20, 'TestIndexERC20', 'move', [A, D, 7n]), call(c.erc20, 'TestIndexERC20', 'move', [D, E, 2n]), call(c.erc20, 'TestIndexERC20', 'mint', [E, 1n])]);
      const other = second.services.indexers.get(chain.anvil.chainId)!;
      for (let i = 0; i < 10; i++) await Promise.all([ix.follower.poll(), other.follower.poll()]);
      await catchUp(ix);
      await expectGroundTruth(client);
      expect((await indexed(client)).get(`${c.erc20}:${E}:0`)).toBe('8');
    } finally {
      await second.close();
    }
  });

  it('a backfill cut into leased ranges survives a crash between chunks, shrinks refused log ranges, and two workers finish it exactly', async () => {
    let proxy: RpcProxy | undefined;
    let t2: TestService | undefined;
    try {
      proxy = await startRpcProxy(chain.anvil.rpcUrl);
      // The node refuses eth_getLogs over more than 4 blocks, as hosted nodes cap ranges.
      proxy.addRule((rpcCall) => {
        if (rpcCall.method !== 'eth_getLogs') return undefined;
        const q = rpcCall.params[0] as { fromBlock: string; toBlock: string };
        return Number(q.toBlock) - Number(q.fromBlock) + 1 > 4 ? { kind: 'fail', message: 'query exceeds max block range 4' } : undefined;
      });
      t2 = await startTestService({
        chains: [{ chainId: chain.anvil.chainId, name: 'anvil', rpcUrls: [proxy.url], watch: false, indexer: { scope: 'all', confirmations: 0, chunkBlocks: 16 } }],
        indexer: { backfillRangeBlocks: 10, leaseSec: 1 },
        admin: { tokens: [ADMIN] },
      });
      const s = t2.services;
      const head = await pub.getBlockNumber();
      const store = backfillStore(s.db);
      const id = await store.create(chain.anvil.chainId, 'all', 0n, head, { rangeBlocks: s.config.indexer.backfillRangeBlocks });
      const deps = (onChunk?: () => void) => ({
        db: s.db,
        chains: s.chains,
        addresses: (chainId: number, scope: 'all' | 'watchlist') => addressFilter(s.db, chainId, scope, []),
        chunkBlocks: 16,
        leaseSec: s.config.indexer.leaseSec,
        onChunk,
      });
      let chunks = 0;
      const crashing = new BackfillWorker(
        deps(() => {
          if (++chunks === 2) throw new Error('injected crash between chunks');
        }),
      );
      await expect(crashing.runUntilIdle(id)).rejects.toThrow('injected crash');
      const mid = (await store.progress(id))!;
      expect(mid.status).toBe('RUNNING');
      expect(mid.done).toBeGreaterThan(0);
      expect(mid.done).toBeLessThan(mid.blocks);
      // The crashed worker's lease runs out; two fresh workers share what is left.
      await new Promise((r) => setTimeout(r, 1_100));
      // Sharing is shown, not hoped for: each worker's first chunk waits (bounded) for the other's, so
      // neither can take every range while the other is still starting (it could, on a loaded machine).
      const chunked = [false, false];
      const waitsForOther = (me: 0 | 1) => async () => {
        chunked[me] = true;
        await expect.poll(() => chunked[1 - me], { message: `worker ${2 - me} takes a range too` }).toBe(true);
      };
      const [w1, w2] = [new BackfillWorker(deps(waitsForOther(0))), new BackfillWorker(deps(waitsForOther(1)))];
      const [n1, n2] = await Promise.all([w1.runUntilIdle(id), w2.runUntilIdle(id)]);
      expect(n1).toBeGreaterThan(0);
      expect(n2).toBeGreaterThan(0);
      const done = (await store.progress(id))!;
      expect(done).toMatchObject({ status: 'DONE', done: done.blocks, malformed: 6 });
      expect(done.ranges.finished).toBe(done.ranges.total);
      // Refused ranges were cut down; every answered read spanned at most 4 blocks.
      const spans = proxy.calls
        .filter((x) => x.method === 'eth_getLogs')
        .map((x) => {
          const q = x.params[0] as { fromBlock: string; toBlock: string };
          return Number(q.toBlock) - Number(q.fromBlock) + 1;
        });
      expect(Math.max(...spans)).toBeGreaterThan(4);
      // The same rows as the follower recorded on the first database: nothing counted twice.
      const count = async (db: typeof s.db) => Number((await db.query<{ n: string }>('SELECT count(*)::text AS n FROM indexer_transfers')).rows[0]!.n);
      expect(await count(s.db)).toBe(await count(t.services.db));
      // The console shows the task.
      const consoleView = await rpc(t2.app, '/rpc/Console/IndexerStatus', {}, { authorization: `Bearer ${ADMIN}` });
      expect(consoleView.status).toBe(200);
      expect(consoleView.body.backfills).toEqual([expect.objectContaining({ id, status: 'DONE', done: done.blocks, malformed: 6 })]);
      expect(consoleView.body.chains).toEqual([expect.objectContaining({ network: 'anvil', scope: 'all' })]);
      const base = await t2.app.listen({ port: 0, host: '127.0.0.1' });
      await expectGroundTruth(new SequenceIndexer(`${base}/indexer/anvil`, t2.accessKey));
    } finally {
      await t2?.close();
      await proxy?.close();
    }
  });

  it('a watchlist chain indexes only its contracts, and one a project adds from then on', async () => {
    const t3 = await startTestService({
      chains: [{ ...chain.chainConfig, watch: false, indexer: { scope: 'watchlist', contracts: [c.fee], fromBlock: 0, confirmations: 0, chunkBlocks: 64 } }],
      admin: { tokens: [ADMIN] },
    });
    try {
      const ix = t3.services.indexers.get(chain.anvil.chainId)!;
      await catchUp(ix);
      const base = await t3.app.listen({ port: 0, host: '127.0.0.1' });
      const got = await indexed(new SequenceIndexer(`${base}/indexer/anvil`, t3.accessKey));
      expect([...new Set([...got.keys()].map((k) => k.split(':')[0]))]).toEqual([c.fee]);
      expect(got.get(`${c.fee}:${F}:0`)).toBe('60');
      const G = someone();
      // The contract goes on the watchlist without its history (the console's IndexerWatch also
      // schedules a backfill of it: test/indexer-watch.test.ts), so SyncBalance has something to do.
      await ix.watchlist.add(c.nft, t3.project.id);
      expect(await ix.watchlist.list()).toEqual([c.fee, c.nft].sort());
      await chain.send([call(c.nft, 'TestIndexERC721', 'mint', [G, 99n]), call(c.erc20, 'TestIndexERC20', 'mint', [G, 3n])]);
      touch(c.nft, G, 99);
      touch(c.erc20, G);
      await catchUp(ix);
      const later = await indexed(new SequenceIndexer(`${base}/indexer/anvil`, t3.accessKey));
      expect(later.get(`${c.nft}:${G}:99`)).toBe('1');
      expect(later.has(`${c.erc20}:${G}:0`)).toBe(false);
      // A's token 1 was minted before the contract was watched: SyncBalance takes it from the chain,
      // and a transfer after that keeps both sides right.
      const client3 = new SequenceIndexer(`${base}/indexer/anvil`, t3.accessKey);
      expect(later.has(`${c.nft}:${A}:1`)).toBe(false);
      await client3.syncBalance({ accountAddress: A, contractAddress: c.nft, tokenID: '1' });
      expect((await indexed(client3)).get(`${c.nft}:${A}:1`)).toBe('1');
      await chain.send([call(c.nft, 'TestIndexERC721', 'move', [A, G, 1n])]);
      touch(c.nft, G, 1);
      await catchUp(ix);
      const synced = await indexed(client3);
      expect(synced.has(`${c.nft}:${A}:1`)).toBe(false);
      expect(synced.get(`${c.nft}:${G}:1`)).toBe('1');
      await expect(client3.syncBalance({ accountAddress: A, contractAddress: c.nft })).rejects.toMatchObject({ code: 2001 });
      await expect(client3.syncBalance({ accountAddress: A, contractAddress: c.erc20 })).rejects.toMatchObject({ code: 3000 });
    } finally {
      await t3.close();
    }
  });

  it('metarelay indexer backfill runs the task with a progress bar and reports it done', async () => {
    const testDb = await createTestDb();
    const dir = mkdtempSync(join(tmpdir(), 'metarelay-ix-cli-'));
    try {
      // One process per PGlite folder: the CLI gets the database to itself.
      if (testDb.db.kind === 'pglite') await testDb.db.close();
      const file = join(dir, 'metarelay.json');
      writeFileSync(
        file,
        JSON.stringify({
          database: testDb.location,
          logLevel: 'silent',
          chains: [{ chainId: chain.anvil.chainId, name: 'anvil', rpcUrls: [chain.anvil.rpcUrl], watch: false, indexer: { scope: 'all', confirmations: 0, chunkBlocks: 8 } }],
          indexer: { backfillRangeBlocks: 16 },
        }),
      );
      const head = Number(await pub.getBlockNumber());
      const r = await runCli(['indexer', 'backfill', '--chain', 'anvil', '--from', '0', '--config', file]);
      expect(r.stderr).toContain('backfill 1: blocks 0..');
      expect(r.stderr).toMatch(/backfill #1 \[#{30}\] 100%/);
      expect(r.code).toBe(0);
      const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
      expect(out).toMatchObject({ id: 1, status: 'DONE', fromBlock: 0, toBlock: head, done: head + 1, malformed: 6 });
      // main() in this process (runMain): an indexer process loads the whole service (~1.5 s of CPU).
      const again = await runMain(['indexer', 'status', '1', '--config', file]);
      expect(JSON.parse(again.stdout)).toMatchObject({ status: 'DONE', logs: out.logs });
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await testDb.drop();
    }
  });
});
