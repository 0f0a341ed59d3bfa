// `metarelay dev` indexes its sample contracts: the official indexer client, pointed at the manifest's
// indexerUrl, reads the holder's balances (equal to the chain's) with their metadata, priced in USD by
// the dev feeds; the gateway client answers the same chain.
import { SequenceIndexer, SequenceIndexerGateway, type TokenBalance } from '@0xsequence/indexer';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatUnits, parseAbi, type Address } from 'viem';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { devPublicClient } from '../src/devchain/index.ts';
import { startCli } from './support/cli.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';
import { eventually } from './support/token-chain.ts';

const abi = parseAbi(['function balanceOf(address) view returns (uint256)', 'function balanceOf(address, uint256) view returns (uint256)', 'function ownerOf(uint256) view returns (address)']);
const dir = mkdtempSync(join(tmpdir(), 'metarelay-ix-dev-'));
let testDb: TestDb | undefined;
let env: Record<string, string> = {};

beforeAll(async () => {
  if (TEST_DB === 'postgres') {
    testDb = await createTestDb();
    env = { DATABASE_URL: testDb.location };
  }
});
afterAll(async () => {
  await testDb?.drop();
  rmSync(dir, { recursive: true, force: true });
});

it("dev mode indexes the samples: the official client reads the holder's balances with metadata, as the banner shows", async () => {
  const manifestPath = join(dir, 'manifest.json');
  const dev = startCli(['dev', '--port', '0', '--data', join(dir, 'data'), '--manifest', manifestPath], env);
  try {
    await dev.waitFor(/metarelay dev is ready/);
    const m = JSON.parse(readFileSync(manifestPath, 'utf8'));
    expect(m.indexerUrl).toBe(`${m.baseUrl}/indexer/anvil`);
    expect(dev.output()).toContain(`${m.indexerUrl}/rpc/Indexer/GetTokenBalances`);
    expect(dev.output()).toContain(m.holder);
    const holder = (m.holder as string).toLowerCase() as Address;
    const client = new SequenceIndexer(m.indexerUrl, m.accessKey);
    const c = m.contracts as Record<string, Address>;
    const want = [
      ...(m.tokens.erc721 as string[]).map((id) => `${c.erc721!.toLowerCase()}:${id}`),
      ...(m.tokens.erc721OnChain as string[]).map((id) => `${c.erc721OnChain!.toLowerCase()}:${id}`),
      ...(m.tokens.erc1155 as string[]).map((id) => `${c.erc1155!.toLowerCase()}:${id}`),
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
    expect(prices.prices).toEqual([{ chainID: m.chain.chainId, results: [{ contractAddress: c.erc20!.toLowerCase(), priceUSD: '1', updatedAt: expect.any(String) }], unpriced: [] }]);
    expect(await dev.stop('SIGTERM')).toBe(0);
  } finally {
    await dev.stop('SIGKILL');
  }
});
