// Prices without homework (#58): an indexer on a well-known chain (here anvil as chain id 1) answers USD
// prices from the built-in table of Chainlink's published feeds with no `prices` configured, shows where
// each price came from, lets the operator's entries win, and withdraws a price whose feed does not
// answer instead of making one up. The feeds are Chainlink's MockV3Aggregator put at the published
// mainnet feed addresses (anvil_setCode), so what is read is what the table names.
import { SequenceIndexer } from '@0xsequence/indexer';
import { numberToHex, type Address, type Hex } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rpcCall } from '../src/devchain/index.ts';
import { WELL_KNOWN_PRICES, effectivePrices } from '../src/prices/index.ts';
import { startTestService, type TestService } from './support/service.ts';
import { startTokenChain, type TokenChain } from './support/token-chain.ts';

const NATIVE = '0x0000000000000000000000000000000000000000';
const mainnet = WELL_KNOWN_PRICES[1]!;
const token = (symbol: string) => mainnet.tokens.find((t) => t.symbol === symbol)!;
const feedOf = (symbol: string) => {
  const usd = token(symbol).usd;
  if (usd === 'native') throw new Error(`${symbol} is priced by the native feed`);
  return usd.feed;
};
const lower = (a: string) => a.toLowerCase() as Address;

let chain: TokenChain;
let t: TestService;
let ix: SequenceIndexer;
let base: string;

/** A MockV3Aggregator of 8 decimals answering `answer` at the published address `at`. */
async function feedAt(at: Address, answer: bigint) {
  const [deployed] = await chain.deploy([{ contract: 'DevAggregator', args: [8, answer] }]);
  const code = (await rpcCall(chain.anvil.rpcUrl, 'eth_getCode', [deployed, 'latest'])) as Hex;
  await rpcCall(chain.anvil.rpcUrl, 'anvil_setCode', [at, code]);
  // Storage is not code: slot 0 holds `decimals`, and a round written at the address fills the rest.
  await rpcCall(chain.anvil.rpcUrl, 'anvil_setStorageAt', [at, numberToHex(0, { size: 32 }), numberToHex(8, { size: 32 })]);
  await chain.send([{ address: at, contract: 'DevAggregator', functionName: 'updateAnswer', args: [answer] }]);
}

beforeAll(async () => {
  chain = await startTokenChain({ chainId: 1 });
  await feedAt(mainnet.native.feed, 2_512n * 10n ** 8n);
  await feedAt(feedOf('USDC'), 99_980_000n);
  t = await startTestService({
    chains: [
      {
        ...chain.chainConfig,
        name: 'mainnet',
        watch: false,
        indexer: { scope: 'all', fromBlock: 0, confirmations: 0, chunkBlocks: 50, pollMs: 50 },
        // The operator prices DAI at a fixed $1.01: that entry wins over the table's feed.
        prices: { tokens: [{ address: token('DAI').address, symbol: 'DAI', decimals: 18, usdPrice: '1.01' }], pollMs: 50 },
      },
    ],
    media: { enabled: false },
  });
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  ix = new SequenceIndexer(`${base}/indexer/mainnet`, t.accessKey);
}, 180_000);

afterAll(async () => {
  await t?.close();
  await chain?.stop();
});

describe('built-in prices (the table of well-known Chainlink feeds)', () => {
  it('prices the native token and a common token from the published feeds, saying where each price came from', async () => {
    const eth = await ix.getTokenPrice({ q: { contractAddress: NATIVE } });
    expect(eth.price).toMatchObject({ contractAddress: NATIVE, priceUSD: '2512', updatedAt: expect.any(String) });
    expect((eth.price as unknown as { source: unknown }).source).toEqual({ kind: 'chainlink', address: lower(mainnet.native.feed), builtin: true });

    const usdc = await ix.getTokenPrice({ q: { contractAddress: lower(token('USDC').address) } });
    expect(usdc.price.priceUSD).toBe('0.9998');
    expect((usdc.price as unknown as { source: unknown }).source).toEqual({ kind: 'chainlink', address: lower(feedOf('USDC')), builtin: true });

    // WETH is the native token's price, read from the same feed.
    const weth = await ix.getTokenPrice({ q: { contractAddress: lower(token('WETH').address) } });
    expect(weth.price.priceUSD).toBe('2512');

    // The native balance is priced too, with its source.
    const holder = '0x00000000000000000000000000000000000b0b01';
    await rpcCall(chain.anvil.rpcUrl, 'anvil_setBalance', [holder, numberToHex(3n * 10n ** 18n)]);
    const bal = await ix.getNativeTokenBalance({ accountAddress: holder });
    expect(bal.balance).toMatchObject({ priceUSD: '2512', balanceUSD: '7536' });
    expect((bal.balance as unknown as { priceSource: unknown }).priceSource).toEqual({ kind: 'chainlink', address: lower(mainnet.native.feed), builtin: true });
  });

  it("the operator's entry wins over the table's", async () => {
    const dai = await ix.getTokenPrice({ q: { contractAddress: lower(token('DAI').address) } });
    expect(dai.price.priceUSD).toBe('1.01');
    expect((dai.price as unknown as { source: unknown }).source).toEqual({ kind: 'fixed', builtin: false });
  });

  it('a table feed with nothing at its address withdraws the price, never a made-up one', async () => {
    // No feed was put at USDT/USD's address on this chain.
    const err = await ix.getTokenPrice({ q: { contractAddress: lower(token('USDT').address) } }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 2002, status: 400 });
    expect(String((err as { cause?: string }).cause ?? (err as Error).message)).toMatch(new RegExp(feedOf('USDT'), 'i'));
  });

  it('builtin: false prices only what the operator lists; chains not in the table get nothing', () => {
    expect(effectivePrices(1, { tokens: [], pollMs: 1000, builtin: false })?.config.nativeUsdFeed).toBeUndefined();
    expect(effectivePrices(31_337, undefined)).toBeUndefined();
    const p = effectivePrices(8453, undefined)!;
    expect([...p.builtin].sort()).toEqual(['native', ...WELL_KNOWN_PRICES[8453]!.tokens.map((x) => lower(x.address))].sort());
  });
});
