// What `metarelay dev` serves out of the box, read through the official clients from one dev start:
// - its sample collection: the ERC-721's base URI points at this service, and GetTokenMetadata on that
//   contract shows the collection's tokens with their pictures, stored in the dev media store and
//   served by the media routes; the console's Collections tab lists it with its tokens' pictures;
// - its indexer: the official indexer client, pointed at the manifest's indexerUrl, reads the holder's
//   balances (equal to the chain's) with their metadata, priced in USD by the dev feeds; the gateway
//   client answers the same chain.
// Both only read; the indexer's test, the last, stops dev with SIGTERM.
import { SequenceIndexer, SequenceIndexerGateway, type TokenBalance } from '@0xsequence/indexer';
import { SequenceMetadata } from '@0xsequence/metadata';
import { formatUnits, parseAbi, type Address } from 'viem';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { DevServiceManifest } from '../src/cli/dev.ts';
import { devPublicClient } from '../src/devchain/index.ts';
import type { LongRunning } from './support/cli.ts';
import { devFolder, ready, type DevFolder } from './support/dev.ts';
import { eventually } from './support/token-chain.ts';

const abi = parseAbi(['function balanceOf(address) view returns (uint256)', 'function balanceOf(address, uint256) view returns (uint256)', 'function ownerOf(uint256) view returns (address)']);

let folder: DevFolder;
let dev: LongRunning;
let m: DevServiceManifest;

beforeAll(async () => {
  folder = await devFolder();
  dev = folder.start();
  // A bound on a hang, not a speed check.
  await ready(dev, 240_000);
  m = folder.manifest();
}, 300_000);
afterAll(async () => {
  await dev?.stop('SIGKILL');
  await folder?.remove();
});

it('dev mode owns a published sample collection that a fresh ERC-721 points at, read through GetTokenMetadata', async () => {
  const c = m.collection!;
  expect(c.tokenMetadataURI).toMatch(new RegExp(`^${m.baseUrl}/projects/\\d+/collections/${c.id}/tokens/$`));
  expect(dev.output()).toContain(`/tokens/anvil/${c.contract}/1,2,3`);
  const client = new SequenceMetadata(m.baseUrl, m.accessKey);
  const { tokenMetadata } = await client.getTokenMetadata({ chainID: 'anvil', contractAddress: c.contract, tokenIDs: c.tokens });
  expect(tokenMetadata.map((t) => t.name)).toEqual(['Ruby', 'Emerald', 'Sapphire']);
  expect(tokenMetadata[0]).toMatchObject({ status: 'AVAILABLE', attributes: [{ trait_type: 'Colour', value: 'Ruby' }] });
  const image = await fetch(tokenMetadata[0]!.image!);
  expect(image.status).toBe(200);
  expect(image.headers.get('content-type')).toBe('image/png');

  // The console's Collections tab lists it and shows its tokens with pictures (its methods, as the page calls them).
  const consoleCall = async (method: string, body: unknown) => {
    const r = await fetch(`${m.baseUrl}/rpc/Console/${method}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${m.adminToken}` },
      body: JSON.stringify(body),
    });
    expect(r.status).toBe(200);
    return r.json();
  };
  const projectId = Number(/\/projects\/(\d+)\//.exec(c.tokenMetadataURI)![1]);
  const { collections } = await consoleCall('ListProjectCollections', { projectId });
  expect(collections).toContainEqual(
    expect.objectContaining({ id: c.id, name: 'Dev Collection', published: true, tokenCount: 3, contracts: [expect.objectContaining({ chainId: m.chain.chainId, contractAddress: c.contract })] }),
  );
  const { tokens } = await consoleCall('ListCollectionTokens', { projectId, collectionId: c.id });
  expect(tokens.map((t: { name: string }) => t.name)).toEqual(['Ruby', 'Emerald', 'Sapphire']);
  for (const t of tokens) {
    const thumb = await fetch(`${m.baseUrl}${t.picture.thumbnail}`);
    expect(thumb.status).toBe(200);
    expect(thumb.headers.get('content-type')).toBe('image/webp');
  }
});

it("dev mode indexes the samples: the official client reads the holder's balances with metadata, as the banner shows", async () => {
  expect(m.indexerUrl).toBe(`${m.baseUrl}/indexer/anvil`);
  expect(dev.output()).toContain(`${m.indexerUrl}/rpc/Indexer/GetTokenBalances`);
  expect(dev.output()).toContain(m.holder);
  const holder = m.holder.toLowerCase() as Address;
  const client = new SequenceIndexer(m.indexerUrl, m.accessKey);
  const c = m.contracts as Record<string, Address>;
  const want = [
    ...m.tokens.erc721!.map((id) => `${c.erc721!.toLowerCase()}:${id}`),
    ...m.tokens.erc721OnChain!.map((id) => `${c.erc721OnChain!.toLowerCase()}:${id}`),
    ...m.tokens.erc1155!.map((id) => `${c.erc1155!.toLowerCase()}:${id}`),
    `${c.erc20!.toLowerCase()}:0`,
  ].sort();
  // The follower polls every 500 ms and metadata resolves in the background: wait for both.
  const balances = await eventually(
    async () => (await client.getTokenBalances({ accountAddress: holder, includeMetadata: true, page: { pageSize: 100 } })).balances,
    (b: TokenBalance[]) => {
      expect(b.map((x) => `${x.contractAddress}:${x.tokenID}`).sort()).toEqual(want);
      for (const x of b) if (x.contractType !== 'ERC20') expect(x.tokenMetadata?.status).toBe('AVAILABLE');
    },
    30_000,
  );
  const pub = devPublicClient(m.chain.rpcUrl, m.chain.chainId);
  for (const b of balances) {
    const address = b.contractAddress as Address;
    const id = BigInt(b.tokenID!);
    const onChain =
      b.contractType === 'ERC1155'
        ? await pub.readContract({ address, abi, functionName: 'balanceOf', args: [holder, id] })
        : b.contractType === 'ERC721'
          ? (await pub.readContract({ address, abi, functionName: 'ownerOf', args: [id] })).toLowerCase() === holder
            ? 1n
            : 0n
          : await pub.readContract({ address, abi, functionName: 'balanceOf', args: [holder] });
    expect(b.balance).toBe(String(onChain));
    expect(b.contractInfo?.address).toBe(b.contractAddress);
  }
  const nft = balances.find((b) => b.contractAddress === c.erc721!.toLowerCase() && b.tokenID === '1')!;
  expect(nft.tokenMetadata?.name).toBe('Dev ERC721 #1');
  // The dev feeds price DUSD ($1) and ETH ($2 000): balances carry their worth, and the gateway answers the chain.
  const dusd = balances.find((b) => b.contractAddress === c.erc20!.toLowerCase())!;
  expect(dusd).toMatchObject({ priceUSD: '1', balanceUSD: formatUnits(BigInt(dusd.balance), 6), priceUpdatedAt: expect.any(String) });
  const native = (await client.getNativeTokenBalance({ accountAddress: holder })).balance;
  expect(native.priceUSD).toBe('2000');
  const gw = new SequenceIndexerGateway(m.baseUrl, m.accessKey);
  const prices = await gw.getTokenPrices({ q: [{ chainID: m.chain.chainId, queries: [{ contractAddress: c.erc20! }] }] });
  expect(prices.prices).toEqual([
    {
      chainID: m.chain.chainId,
      results: [{ contractAddress: c.erc20!.toLowerCase(), priceUSD: '1', updatedAt: expect.any(String), source: { kind: 'chainlink', address: expect.any(String), builtin: false } }],
      unpriced: [],
    },
  ]);
  expect(await dev.stop('SIGTERM')).toBe(0);
});
