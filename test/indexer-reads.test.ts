// The indexer's read path on a real anvil, through the official @0xsequence/indexer client: how many
// database statements a page with metadata costs, collections as one summary row or as their
// tokens (includeCollectionTokens), and contracts graded by the token directory (contractStatus,
// metadataOptions). Balances are checked against balanceOf/ownerOf read from the chain.
import { SequenceIndexer, type TokenBalance } from '@0xsequence/indexer';
import { parseAbi, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { devPublicClient, erc1155Document, erc1155Path, startOriginServer, type OriginServer } from '../src/devchain/index.ts';
import type { ChainIndexer } from '../src/indexer/index.ts';
import { countingDb, startTestService, type TestService } from './support/service.ts';
import { startTokenChain, type ContractCall, type TokenChain } from './support/token-chain.ts';

const abi = parseAbi([
  'function balanceOf(address) view returns (uint256)',
  'function balanceOf(address, uint256) view returns (uint256)',
  'function ownerOf(uint256) view returns (address)',
]);
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

async function catchUp(ix: ChainIndexer) {
  for (let i = 0; i < 200; i++) {
    const more = await ix.follower.poll();
    const [cur, head] = await Promise.all([ix.cursor(), ix.chain.public.getBlockNumber()]);
    if (!more && cur && cur.block === head) return;
  }
  throw new Error('indexer did not catch up');
}

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
  const [erc20, nft, multi] = await chain.deploy([
    { contract: 'TestIndexERC20' },
    { contract: 'TestIndexERC721' },
    { contract: 'TestIndexERC1155', args: [`${origin.url}/erc1155/{id}.json`] },
  ]);
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
    let res = await ask();
    for (let i = 0; i < 200 && res.balances.some((b) => b.contractType === 'ERC1155' && b.tokenMetadata?.status !== 'AVAILABLE'); i++) {
      await new Promise((r) => setTimeout(r, 50));
      res = await ask();
    }
    expect(res.balances).toHaveLength(50);
    expect(res.page.more).toBe(true);
    res = await ask();
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
});
