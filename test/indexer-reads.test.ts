// The indexer's read path on a real anvil, through the official @0xsequence/indexer client: how many
// database statements a page with metadata costs, collections as one summary row or as their
// tokens (includeCollectionTokens), and contracts graded by the token directory (contractStatus,
// metadataOptions). Balances are checked against balanceOf/ownerOf read from the chain.
import { SequenceIndexer, type TokenBalance } from '@0xsequence/indexer';
import { parseAbi, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { devPublicClient, erc1155Document, erc1155Path, startOriginServer, type OriginServer } from '../src/devchain/index.ts';
import { countingDb, startTestService, type TestService } from './support/service.ts';
import { startTokenChain, type ContractCall, type TokenChain } from './support/token-chain.ts';
import { catchUp } from './support/catch-up.ts';

const abi = parseAbi(['function balanceOf(address) view returns (uint256)', 'function balanceOf(address, uint256) view returns (uint256)', 'function ownerOf(uint256) view returns (address)']);
const someone = () => privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
const call = (address: Address, contract: string, functionName: string, args: unknown[]): ContractCall => ({ address, contract, functionName, args });
const IDS = Array.from({ length: 60 }, (_, i) => BigInt(i + 1));

let chain: TokenChain;
let origin: OriginServer;
let pub: ReturnType<typeof devPublicClient>;
let t: TestService;
let counter: ReturnType<typeof countingDb>;
let client: SequenceIndexer;
let c: { erc20: Address; nft: Address; multi: Address };
const H = someone();
const K = someone();

/** The chain's balance for a row the indexer returned. */
async function chainBalance(b: TokenBalance): Promise<bigint> {
  const address = b.contractAddress as Address;
  const account = b.accountAddress as Address;
  if (b.contractType === 'ERC20') return pub.readContract({ address, abi, functionName: 'balanceOf', args: [account] });
  if (b.contractType === 'ERC721') {
    const owner = await pub.readContract({ address, abi, functionName: 'ownerOf', args: [BigInt(b.tokenID!)] }).catch(() => null);
    return owner?.toLowerCase() === account ? 1n : 0n;
  }
  return pub.readContract({ address, abi, functionName: 'balanceOf', args: [account, BigInt(b.tokenID!)] });
}

beforeAll(async () => {
  [chain, origin] = await Promise.all([startTokenChain(), startOriginServer()]);
  pub = devPublicClient(chain.anvil.rpcUrl, chain.anvil.chainId);
  for (const id of IDS) origin.setDocument(erc1155Path(String(id)), erc1155Document(origin.url, String(id)));
  const [erc20, nft, multi] = await chain.deploy([{ contract: 'TestIndexERC20' }, { contract: 'TestIndexERC721' }, { contract: 'TestIndexERC1155', args: [`${origin.url}/erc1155/{id}.json`] }]);
  c = { erc20: erc20!.toLowerCase() as Address, nft: nft!.toLowerCase() as Address, multi: multi!.toLowerCase() as Address };
  await chain.send([
    call(c.erc20, 'TestIndexERC20', 'mint', [H, 500n]),
    call(c.nft, 'TestIndexERC721', 'mint', [H, 7n]),
    call(c.nft, 'TestIndexERC721', 'mint', [H, 8n]),
    call(c.nft, 'TestIndexERC721', 'mint', [K, 9n]),
    call(c.multi, 'TestIndexERC1155', 'mintBatch', [H, IDS, IDS.map((i) => i * 2n)]),
    call(c.multi, 'TestIndexERC1155', 'moveBatch', [H, K, [1n, 2n], [1n, 4n]]),
  ]);
  t = await startTestService(
    {
      chains: [{ ...chain.chainConfig, watch: false, indexer: { scope: 'all', fromBlock: 0, confirmations: 0, chunkBlocks: 50, pollMs: 50 } }],
      // Media fetching works in the background and would write while statements are counted.
      media: { enabled: false },
      // Hot for the whole test: the counted request must not fall on the moment the records expire
      // (then a page also reads its token records and contract info from the store: three statements).
      metadata: { hotCacheTtlMs: 600_000 },
    },
    { wrapDb: (db) => (counter = countingDb(db)).db },
  );
  const base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  client = new SequenceIndexer(`${base}/indexer/anvil`, t.accessKey);
  await catchUp(t.services.indexers.get(chain.anvil.chainId)!);
});

afterAll(async () => {
  await t?.close();
  await Promise.all([chain?.stop(), origin?.stop()]);
});

describe('indexer read path', () => {
  it('a page of balances with metadata, once the metadata is known, is one database statement', async () => {
    const ask = () => client.getTokenBalances({ accountAddress: H, includeMetadata: true, page: { pageSize: 50 } });
    // The first answers start the metadata's resolution in the background; wait until it is there.
    // Settled: every token AVAILABLE and two answers in a row alike (no resolution still writing).
    let prev = await ask();
    let res = await ask();
    for (let i = 0; i < 400 && (res.balances.some((b) => b.contractType === 'ERC1155' && b.tokenMetadata?.status !== 'AVAILABLE') || JSON.stringify(res) !== JSON.stringify(prev)); i++) {
      await new Promise((r) => setTimeout(r, 50));
      [prev, res] = [res, await ask()];
    }
    expect(res.balances).toHaveLength(50);
    expect(res.page.more).toBe(true);
    counter.reset();
    const again = await ask();
    expect(counter.statements).toEqual([expect.stringMatching(/FROM indexer_balances/)]);
    expect(again.balances).toEqual(res.balances);
    const multi = again.balances.filter((b) => b.contractAddress === c.multi);
    expect(multi.length).toBeGreaterThan(40);
    for (const b of multi) {
      expect(b.tokenMetadata).toMatchObject({ tokenId: b.tokenID, status: 'AVAILABLE' });
      expect(b.contractInfo).toMatchObject({ address: c.multi, status: 'AVAILABLE' });
    }
    for (const b of again.balances) expect(b.balance).toBe(String(await chainBalance(b)));
    // Token ids in numeric order (as text, "10" would come before "2").
    const ids = multi.map((b) => Number(b.tokenID));
    expect(ids).toEqual([...ids].sort((x, y) => x - y));
    expect((await client.getTokenIDs({ contractAddress: c.multi, page: { pageSize: 100 } })).tokenIDs).toEqual(IDS.map(String));
  });

  it('includeCollectionTokens false gives a collection as one summary row per holder, true its tokens', async () => {
    const rows = (await client.getTokenBalances({ accountAddress: H, includeCollectionTokens: false, includeMetadata: true })).balances;
    expect(rows.map((r) => r.contractAddress).sort()).toEqual([c.erc20, c.nft, c.multi].sort());
    const by = Object.fromEntries(rows.map((r) => [r.contractAddress, r]));
    expect(by[c.erc20]).toMatchObject({ contractType: 'ERC20', isSummary: false, balance: String(await chainBalance(by[c.erc20]!)) });
    // A summary's balance is the sum of the holder's tokens and uniqueCollectibles how many it holds, as the chain says.
    for (const [contract, type, ids] of [
      [c.nft, 'ERC721', [7n, 8n, 9n]],
      [c.multi, 'ERC1155', IDS],
    ] as const) {
      const held = (await Promise.all(ids.map((id) => chainBalance({ contractType: type, contractAddress: contract, accountAddress: H, tokenID: String(id) } as TokenBalance)))).filter((b) => b > 0n);
      expect(by[contract]).toMatchObject({ contractType: type, isSummary: true, uniqueCollectibles: String(held.length), balance: String(held.reduce((x, y) => x + y, 0n)) });
      expect(by[contract]!.contractInfo?.address).toBe(contract);
      expect(by[contract]!.tokenMetadata).toBeUndefined();
    }
    expect(by[c.multi]!.uniqueCollectibles).toBe('59');
    const tokens = (await client.getTokenBalances({ accountAddress: H, contractAddress: c.nft, includeCollectionTokens: true, includeMetadata: true })).balances;
    expect(tokens.map((r) => [r.tokenID, r.isSummary, r.tokenMetadata?.tokenId])).toEqual([
      ['7', false, '7'],
      ['8', false, '8'],
    ]);
  });

  it('contractStatus and metadataOptions grade contracts by the token directory', async () => {
    const s = t.services;
    await s.directory.add(chain.anvil.chainId, [c.nft]);
    const contractsOf = (rows: TokenBalance[]) => [...new Set(rows.map((r) => r.contractAddress))].sort();
    const mine = (o: Record<string, unknown>) => client.getTokenBalances({ accountAddress: H, metadataOptions: o, page: { pageSize: 100 } }).then((r) => contractsOf(r.balances));
    expect(await mine({ verifiedOnly: true })).toEqual([c.nft]);
    expect(await mine({ unverifiedOnly: true })).toEqual([c.erc20, c.multi].sort());
    expect(await mine({ verifiedOnly: true, includeContracts: [c.erc20] })).toEqual([c.erc20, c.nft].sort());
    expect(await mine({})).toEqual([c.erc20, c.nft, c.multi].sort());
    await expect(mine({ verifiedOnly: true, unverifiedOnly: true })).rejects.toMatchObject({ code: 2001 });
    await expect(mine({ verifiedOnly: true, includeContracts: ['nope'] })).rejects.toMatchObject({ code: 2001 });

    const details = await client.getTokenBalancesDetails({ filter: { accountAddresses: [H, K], contractStatus: 'VERIFIED' as never, omitNativeBalances: true } });
    expect(details.balances.map((b) => `${b.accountAddress}:${b.tokenID}`).sort()).toEqual([`${H}:7`, `${H}:8`, `${K}:9`].sort());
    const byContract = await client.getTokenBalancesByContract({ filter: { contractAddresses: [c.nft, c.multi], contractStatus: 'UNVERIFIED' as never }, omitMetadata: true, page: { pageSize: 200 } });
    expect(contractsOf(byContract.balances)).toEqual([c.multi]);
    for (const b of byContract.balances.filter((x) => x.accountAddress === K)) expect(b.balance).toBe(String(await chainBalance(b)));
    const summary = await client.getTokenBalancesSummary({ filter: { accountAddresses: [K], contractStatus: 'UNVERIFIED' as never, omitNativeBalances: true } });
    expect(contractsOf(summary.balances)).toEqual([c.multi]);
    const hist = await client.getTransactionHistory({ filter: { accountAddress: K }, metadataOptions: { verifiedOnly: true } });
    expect(hist.transactions.flatMap((x) => x.transfers!.map((tr) => tr.contractAddress))).toEqual([c.nft]);
    const histOthers = await client.getTransactionHistory({ filter: { accountAddress: K }, metadataOptions: { unverifiedOnly: true } });
    expect(histOthers.transactions.flatMap((x) => x.transfers!.map((tr) => tr.contractAddress))).toEqual([c.multi]);
  });
});
