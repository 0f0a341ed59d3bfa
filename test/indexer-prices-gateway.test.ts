// USD prices and the IndexerGateway (#34) on two real anvils, through the official @0xsequence/indexer
// clients (SequenceIndexer, SequenceIndexerGateway). Chain A prices its token and its native currency
// from Chainlink MockV3Aggregator feeds (the relayer's machinery, src/prices/); chain B, behind a proxy
// that can take its node down, from a native/USD feed and a fixed token price. Prices follow the feeds,
// are withdrawn (never a made-up "0") when a feed goes stale, and the gateway answers across both
// chains, marking the one whose node is down.
import { SequenceIndexer, SequenceIndexerGateway, type IndexerGateway, type NativeTokenBalance, type Price, type TokenBalance } from '@0xsequence/indexer';
import { encodeFunctionData, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/load.ts';
import { devPublicClient, devWalletClient, rpcCall } from '../src/devchain/index.ts';
import { PRICE_ADMIN_KEY, aggregatorAdminAbi, deployPriceFeeds, type DevPriceFeeds } from '../src/devchain/prices.ts';
import { startRpcProxy, type RpcProxy } from './support/rpc-proxy.ts';
import { rpc, startTestService, type TestService } from './support/service.ts';
import { startTokenChain, type ContractCall, type TokenChain } from './support/token-chain.ts';
import { catchUp } from './support/catch-up.ts';

const NATIVE = '0x0000000000000000000000000000000000000000';
const HEARTBEAT = 3_600;
const someone = () => privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
const call = (address: Address, contract: string, functionName: string, args: unknown[]): ContractCall => ({ address, contract, functionName, args });
const usd = (dollars: number) => BigInt(Math.round(dollars * 1e8));
const E18 = 10n ** 18n;

let a: TokenChain;
let b: TokenChain;
let proxyB: RpcProxy;
let feeds: DevPriceFeeds;
let feedB: Address;
let t: TestService;
let base: string;
let ixA: SequenceIndexer;
let gw: SequenceIndexerGateway;
/** Chain A: X (priced by its feed), N (a collectible, not priced). Chain B: Y (a fixed $3; at X's address). */
let X: Address, N: Address, Y: Address;
const H = someone();
const CHAIN_B = 31_338;

// The fields of the generated types (indexer.gen.ts): an answer has every required one and nothing
// else but metarelay's documented extras.
const FIELDS = {
  Price: { required: ['contractAddress', 'priceUSD'], optional: ['tokenID', 'updatedAt', 'source'] },
  TokenBalance: {
    required: ['contractType', 'contractAddress', 'accountAddress', 'balance', 'balanceUSD', 'priceUSD', 'blockHash', 'blockNumber', 'chainId', 'uniqueCollectibles', 'isSummary'],
    optional: ['tokenID', 'priceUpdatedAt', 'contractInfo', 'tokenMetadata', 'priceUnavailable', 'priceSource'],
  },
  NativeTokenBalance: {
    required: ['accountAddress', 'chainId', 'name', 'symbol', 'balance', 'balanceUSD', 'priceUSD'],
    optional: ['priceUpdatedAt', 'errorReason', 'priceUnavailable', 'priceSource'],
  },
  GatewayEntry: { required: ['chainId', 'results'], optional: ['errorReason'] },
  GatewayNative: { required: ['chainId', 'result'], optional: ['errorReason'] },
  GatewayPrice: { required: ['chainID', 'results'], optional: ['errorReason', 'unpriced'] },
  Page: { required: ['page', 'pageSize', 'more'], optional: ['after'] },
} as const;

function shaped(kind: keyof typeof FIELDS, v: object) {
  const f = FIELDS[kind];
  for (const k of f.required) expect(v, `${kind}.${k}`).toHaveProperty(k);
  expect(
    Object.keys(v).filter((k) => !(f.required as readonly string[]).includes(k) && !(f.optional as readonly string[]).includes(k)),
    `${kind}: unknown fields`,
  ).toEqual([]);
}
const iso = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);

async function adminSend(chain: TokenChain, to: Address, data: `0x${string}`) {
  const wallet = devWalletClient(chain.anvil.rpcUrl, chain.anvil.chainId, privateKeyToAccount(PRICE_ADMIN_KEY));
  const hash = await wallet.sendTransaction({ to, data, gas: 300_000n });
  expect((await devPublicClient(chain.anvil.rpcUrl, chain.anvil.chainId).waitForTransactionReceipt({ hash })).status).toBe('success');
  // The price book asks for the head at most once per pollMs (50 ms here): let it see this block.
  await new Promise((res) => setTimeout(res, 80));
}
const setAnswer = (chain: TokenChain, feed: Address, answer: bigint) => adminSend(chain, feed, encodeFunctionData({ abi: aggregatorAdminAbi, functionName: 'updateAnswer', args: [answer] }));

beforeAll(async () => {
  [a, b] = await Promise.all([startTokenChain(), startTokenChain({ chainId: CHAIN_B })]);
  [[X, N], [Y, feedB]] = await Promise.all([
    a.deploy([{ contract: 'TestIndexERC20' }, { contract: 'TestIndexERC721' }]),
    b.deploy([{ contract: 'TestIndexERC20' }, { contract: 'DevAggregator', args: [8, usd(1000)] }]),
  ]);
  [X, N, Y, feedB] = [X, N, Y, feedB].map((x) => x!.toLowerCase() as Address);
  feeds = await deployPriceFeeds({ rpcUrl: a.anvil.rpcUrl, chainId: a.anvil.chainId, artifacts: a.artifacts, token: X, tokenDecimals: 18 });
  await Promise.all([
    a.send([call(X, 'TestIndexERC20', 'mint', [H, 1_500n * E18]), call(N, 'TestIndexERC721', 'mint', [H, 7n])]),
    b.send([call(Y, 'TestIndexERC20', 'mint', [H, 4n * E18])]),
    rpcCall(a.anvil.rpcUrl, 'anvil_setBalance', [H, `0x${(2n * E18).toString(16)}`]),
    rpcCall(b.anvil.rpcUrl, 'anvil_setBalance', [H, `0x${(3n * E18).toString(16)}`]),
  ]);
  proxyB = await startRpcProxy(b.anvil.rpcUrl);
  const indexer = { scope: 'all', fromBlock: 0, confirmations: 0, chunkBlocks: 50, pollMs: 50 } as const;
  t = await startTestService({
    chains: [
      {
        ...a.chainConfig,
        name: 'anvil-a',
        watch: false,
        indexer,
        prices: {
          nativeUsdFeed: { feed: feeds.nativeUsd, heartbeatSec: HEARTBEAT },
          tokens: [{ address: X, symbol: 'X', decimals: 18, prices: [{ kind: 'chainlink', feed: feeds.tokenUsd, quote: 'usd', heartbeatSec: HEARTBEAT }] }],
          pollMs: 50,
        },
      },
      {
        chainId: CHAIN_B,
        name: 'anvil-b',
        rpcUrls: [proxyB.url],
        watch: false,
        indexer,
        prices: { nativeUsdFeed: { feed: feedB, heartbeatSec: HEARTBEAT }, tokens: [{ address: Y, symbol: 'Y', decimals: 18, usdPrice: '3' }], pollMs: 50 },
      },
    ],
    media: { enabled: false },
  });
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  ixA = new SequenceIndexer(`${base}/indexer/anvil-a`, t.accessKey);
  gw = new SequenceIndexerGateway(base, t.accessKey);
  await Promise.all([catchUp(t.services.indexers.get(a.anvil.chainId)!), catchUp(t.services.indexers.get(CHAIN_B)!)]);
}, 180_000);

afterAll(async () => {
  await t?.close();
  await proxyB?.close();
  await Promise.all([a?.stop(), b?.stop()]);
});

describe('prices on one chain (Indexer)', () => {
  it('GetTokenPrice, GetTokenPrices and ListTokenPrices answer the feeds, in the generated shapes', async () => {
    const one = await ixA.getTokenPrice({ q: { contractAddress: X } });
    shaped('Price', one.price);
    expect(one.price).toEqual({ contractAddress: X, priceUSD: '1', updatedAt: iso, source: { kind: 'chainlink', address: feeds.tokenUsd.toLowerCase(), builtin: false } });

    const native = await ixA.getTokenPrice({ q: { contractAddress: NATIVE } });
    expect(native.price.priceUSD).toBe('2000');

    const many = await ixA.getTokenPrices({ q: [{ contractAddress: X }, { contractAddress: N, tokenID: '7' }, { contractAddress: NATIVE }] });
    for (const p of many.prices) shaped('Price', p);
    // N has no source: left out of prices, listed with the reason in metarelay's `unpriced`.
    expect(many.prices.map((p: Price) => [p.contractAddress, p.priceUSD])).toEqual([
      [X, '1'],
      [NATIVE, '2000'],
    ]);
    expect((many as unknown as { unpriced: Array<{ contractAddress: string; reason: string }> }).unpriced).toEqual([
      { contractAddress: N, tokenID: '7', reason: expect.stringMatching(/no price source/) },
    ]);

    const list = await ixA.listTokenPrices({ page: { pageSize: 1 } });
    shaped('Page', list.page);
    expect(list.page).toMatchObject({ page: 0, pageSize: 1, more: true });
    expect(list.prices.map((p) => p.contractAddress)).toEqual([NATIVE]);
    const next = await ixA.listTokenPrices({ page: list.page });
    expect(next.prices.map((p) => [p.contractAddress, p.priceUSD])).toEqual([[X, '1']]);
    expect(next.page.more).toBe(false);
  });

  it('balances carry priceUSD and balanceUSD when priced; a collectible keeps "0" with no priceUpdatedAt', async () => {
    const res = await ixA.getTokenBalances({ accountAddress: H });
    for (const row of res.balances) shaped('TokenBalance', row);
    const x = res.balances.find((r: TokenBalance) => r.contractAddress === X)!;
    expect(x).toMatchObject({ balance: (1_500n * E18).toString(), priceUSD: '1', balanceUSD: '1500', priceUpdatedAt: iso });
    const n = res.balances.find((r: TokenBalance) => r.contractAddress === N)!;
    expect(n).toMatchObject({ priceUSD: '0', balanceUSD: '0' });
    expect(n).not.toHaveProperty('priceUpdatedAt');
    expect(n).not.toHaveProperty('priceUnavailable');

    const nat = await ixA.getNativeTokenBalance({ accountAddress: H });
    shaped('NativeTokenBalance', nat.balance);
    expect(nat.balance).toMatchObject({ balance: (2n * E18).toString(), priceUSD: '2000', balanceUSD: '4000', priceUpdatedAt: iso });

    const details = await ixA.getTokenBalancesDetails({ filter: { accountAddresses: [H], omitNativeBalances: false }, omitMetadata: true });
    expect(details.nativeBalances[0]).toMatchObject({ priceUSD: '2000', balanceUSD: '4000' });
    expect(details.balances.find((r) => r.contractAddress === X)).toMatchObject({ priceUSD: '1', balanceUSD: '1500' });
    // omitPrices: no price is read or shown.
    const bare = await ixA.getTokenBalancesSummary({ filter: { accountAddresses: [H], omitNativeBalances: false, omitPrices: true }, omitMetadata: true });
    expect(bare.nativeBalances[0]).toMatchObject({ priceUSD: '0', balanceUSD: '0' });
    expect(bare.nativeBalances[0]).not.toHaveProperty('priceUpdatedAt');
    expect(bare.balances.find((r) => r.contractAddress === X)).toMatchObject({ priceUSD: '0', balanceUSD: '0' });
  });

  it('prices follow the feeds as they move', async () => {
    await setAnswer(a, feeds.tokenUsd, usd(1.25));
    await setAnswer(a, feeds.nativeUsd, usd(2500));
    expect((await ixA.getTokenPrice({ q: { contractAddress: X } })).price.priceUSD).toBe('1.25');
    expect((await ixA.getTokenPrice({ q: { contractAddress: NATIVE } })).price.priceUSD).toBe('2500');
    const x = (await ixA.getTokenBalances({ accountAddress: H, contractAddress: X })).balances[0]!;
    expect(x).toMatchObject({ priceUSD: '1.25', balanceUSD: '1875' });
    expect((await ixA.getNativeTokenBalance({ accountAddress: H })).balance.balanceUSD).toBe('5000');
  });

  it('a stale feed withdraws the price: an error for the price methods, a flagged "0" on balances; a fresh answer brings it back', async () => {
    await rpcCall(a.anvil.rpcUrl, 'evm_increaseTime', [HEARTBEAT + 60]);
    await rpcCall(a.anvil.rpcUrl, 'evm_mine', []);
    await new Promise((res) => setTimeout(res, 80));

    const err = await ixA.getTokenPrice({ q: { contractAddress: X } }).catch((e: unknown) => e as { code: number; status: number; cause: string });
    expect(err).toMatchObject({ code: 2002, status: 400 });
    expect((err as { cause: string }).cause).toMatch(/stale/);
    const many = (await ixA.getTokenPrices({ q: [{ contractAddress: X }, { contractAddress: NATIVE }] })) as unknown as {
      prices: Price[];
      unpriced: Array<{ contractAddress: string; reason: string }>;
    };
    expect(many.prices).toEqual([]);
    expect(many.unpriced.map((u) => u.contractAddress)).toEqual([X, NATIVE]);
    expect(many.unpriced[0]!.reason).toMatch(/stale/);

    const x = (await ixA.getTokenBalances({ accountAddress: H, contractAddress: X })).balances[0]!;
    shaped('TokenBalance', x);
    expect(x).toMatchObject({ priceUSD: '0', balanceUSD: '0', priceUnavailable: expect.stringMatching(/stale/) });
    expect(x).not.toHaveProperty('priceUpdatedAt');
    const nat = (await ixA.getNativeTokenBalance({ accountAddress: H })).balance as NativeTokenBalance & { priceUnavailable?: string };
    expect(nat.priceUnavailable).toMatch(/stale/);
    expect(nat).not.toHaveProperty('priceUpdatedAt');

    await setAnswer(a, feeds.nativeUsd, usd(2000));
    await setAnswer(a, feeds.tokenUsd, usd(1));
    expect((await ixA.getTokenPrice({ q: { contractAddress: X } })).price.priceUSD).toBe('1');
  });

  it('bad input is refused with the reason, a token not priced here is NotFound', async () => {
    const bad = await rpc(t.app, '/indexer/anvil-a/rpc/Indexer/GetTokenPrice', { q: { contractAddress: '0x12' } }, { 'x-access-key': t.accessKey });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ code: 2001, cause: expect.stringMatching(/q.contractAddress/) });
    const unknown = await rpc(t.app, '/indexer/anvil-a/rpc/Indexer/GetTokenPrice', { q: { contractAddress: N } }, { 'x-access-key': t.accessKey });
    expect(unknown.body).toMatchObject({ code: 3000, cause: expect.stringMatching(/no price source/) });
    const tooMany = await rpc(t.app, '/indexer/anvil-a/rpc/Indexer/GetTokenPrices', { q: Array.from({ length: 101 }, () => ({ contractAddress: X })) }, { 'x-access-key': t.accessKey });
    expect(tooMany.body).toMatchObject({ code: 2001, cause: expect.stringMatching(/at most 100/) });
  });

  it('the config refuses a priced token it could not price', () => {
    const cfg = (prices: object) => () => parseConfig({ chains: [{ chainId: 1, name: 'one', rpcUrls: ['http://127.0.0.1:1'], prices }] });
    const token = { address: `0x${'22'.repeat(20)}`, symbol: 'T', decimals: 6 };
    expect(cfg({ tokens: [token] })).toThrow(/a priced token needs prices or a fixed usdPrice/);
    expect(cfg({ tokens: [{ ...token, usdPrice: '0' }] })).toThrow(/above zero/);
    expect(cfg({ tokens: [{ ...token, prices: [{ kind: 'chainlink', feed: `0x${'33'.repeat(20)}`, quote: 'native', heartbeatSec: 60 }] }] })).toThrow(/nativeUsdFeed or a nativeUsdPrice/);
  });
});

describe('IndexerGateway across two chains', () => {
  const A = () => a.anvil.chainId;

  it('Ping, Version, RuntimeStatus and GetChains', async () => {
    expect(await gw.ping()).toEqual({ status: true });
    expect((await gw.version()).version).toMatchObject({ schemaVersion: 'v0.4.0', schemaHash: '212120aad9a46e88ead9a2183c5717e9902d8c2b' });
    const st = (await gw.runtimeStatus()).status;
    expect(Object.keys(st).sort()).toEqual(['backends', 'branch', 'commitHash', 'healthOK', 'startTime', 'uptime', 'ver']);
    expect(st.backends.map((x: IndexerGateway.GatewayBackendRuntimeStatus) => [x.name, x.chainId])).toEqual([
      ['anvil-a', A()],
      ['anvil-b', CHAIN_B],
    ]);
    expect((await gw.getChains({})).chains).toEqual([
      { chainId: A(), chainName: 'anvil-a' },
      { chainId: CHAIN_B, chainName: 'anvil-b' },
    ]);
  });

  it('balances, native balances, history and updates of every chain in one call', async () => {
    const nat = await gw.getNativeTokenBalance({ accountAddress: H });
    for (const e of nat.balances) {
      shaped('GatewayNative', e);
      shaped('NativeTokenBalance', e.result);
    }
    expect(nat.balances.map((e) => [e.chainId, e.result.balance, e.result.priceUSD, e.result.balanceUSD])).toEqual([
      [A(), (2n * E18).toString(), '2000', '4000'],
      [CHAIN_B, (3n * E18).toString(), '1000', '3000'],
    ]);

    const tb = await gw.getTokenBalances({ accountAddress: H });
    shaped('Page', tb.page);
    for (const e of tb.balances) {
      shaped('GatewayEntry', e);
      for (const r of e.results) shaped('TokenBalance', r);
    }
    expect(tb.balances.map((e) => [e.chainId, e.results.map((r) => [r.contractAddress, r.chainId, r.priceUSD, r.balanceUSD])])).toEqual([
      [
        A(),
        [
          [X, A(), '1', '1500'],
          [N, A(), '0', '0'],
        ].sort((p, q) => (p[0]! < q[0]! ? -1 : 1)),
      ],
      [CHAIN_B, [[Y, CHAIN_B, '3', '12']]],
    ]);

    const details = await gw.getTokenBalancesDetails({ filter: { accountAddresses: [H], omitNativeBalances: false }, omitMetadata: true });
    expect(details.nativeBalances.map((e) => [e.chainId, e.results.map((r) => r.priceUSD)])).toEqual([
      [A(), ['2000']],
      [CHAIN_B, ['1000']],
    ]);
    expect(details.balances.map((e) => [e.chainId, e.results.length])).toEqual([
      [A(), 2],
      [CHAIN_B, 1],
    ]);
    const summary = await gw.getTokenBalancesSummary({ filter: { accountAddresses: [H], omitNativeBalances: true }, omitMetadata: true });
    expect(summary.nativeBalances.map((e) => e.results)).toEqual([[], []]);
    expect(summary.balances.flatMap((e) => e.results.map((r) => r.isSummary))).toEqual([true, true, true]);

    // X and Y were deployed by the same account at the same nonce: one address, a token on each chain
    // (as a bridged token often is), priced per chain.
    expect(Y).toBe(X);
    const byContract = await gw.getTokenBalancesByContract({ filter: { contractAddresses: [Y], accountAddresses: [H] }, omitMetadata: true });
    expect(byContract.balances.map((e) => [e.chainId, e.results.map((r) => [r.accountAddress, r.balance, r.priceUSD])])).toEqual([
      [A(), [[H, (1_500n * E18).toString(), '1']]],
      [CHAIN_B, [[H, (4n * E18).toString(), '3']]],
    ]);

    const updates = await gw.getBalanceUpdates({ contractAddress: X, lastBlockNumber: 0 });
    expect(updates.balances.map((e) => [e.chainId, e.results.some((r) => r.accountAddress === H)])).toEqual([
      [A(), true],
      [CHAIN_B, true],
    ]);
    const later = await gw.getBalanceUpdates({ contractAddress: X, lastBlockNumber: 1_000_000 });
    expect(later.balances.map((e) => [e.chainId, e.results])).toEqual([
      [A(), []],
      [CHAIN_B, []],
    ]);

    const history = await gw.getTransactionHistory({ filter: { accountAddress: H } });
    shaped('Page', history.page);
    for (const e of history.transactions) shaped('GatewayEntry', e);
    expect(history.transactions.map((e) => [e.chainId, e.results.flatMap((tx) => tx.transfers!.map((tr) => [tr.contractAddress, tr.transferType]))])).toEqual([
      [
        A(),
        expect.arrayContaining([
          [X, 'RECEIVE'],
          [N, 'RECEIVE'],
        ]),
      ],
      [CHAIN_B, [[Y, 'RECEIVE']]],
    ]);

    // chainIds / networks pick chains; the page is each chain's.
    const onlyB = await gw.getTokenBalances({ accountAddress: H, networks: ['anvil-b'] });
    expect(onlyB.balances.map((e) => e.chainId)).toEqual([CHAIN_B]);
    const paged = await gw.getTokenBalances({ accountAddress: H, chainIds: [A(), CHAIN_B], page: { pageSize: 1 } });
    expect(paged.page).toMatchObject({ page: 0, pageSize: 1, more: true });
    expect(paged.balances.map((e) => e.results.length)).toEqual([1, 1]);
  });

  it('GetTokenPrice and GetTokenPrices per chain', async () => {
    const one = await gw.getTokenPrice({ q: { chainID: A(), queries: [{ contractAddress: X }] } });
    shaped('GatewayPrice', one.price);
    expect(one.price).toMatchObject({ chainID: A(), results: [{ contractAddress: X, priceUSD: '1', updatedAt: iso }] });
    const many = await gw.getTokenPrices({
      q: [
        { chainID: CHAIN_B, queries: [{ contractAddress: Y }, { contractAddress: NATIVE }] },
        { chainID: A(), queries: [{ contractAddress: NATIVE }] },
      ],
    });
    for (const p of many.prices) shaped('GatewayPrice', p);
    expect(many.prices.map((p) => [p.chainID, p.results.map((r) => [r.contractAddress, r.priceUSD])])).toEqual([
      [
        CHAIN_B,
        [
          [Y, '3'],
          [NATIVE, '1000'],
        ],
      ],
      [A(), [[NATIVE, '2000']]],
    ]);
    // A fixed price has no read behind it: no updatedAt.
    expect(many.prices[0]!.results[0]).not.toHaveProperty('updatedAt');
    // A chain's name, or its number as a string, is accepted as every chainID is (docs/api.md); the answer's chainID is the number.
    const byName = await rpc(
      t.app,
      '/rpc/IndexerGateway/GetTokenPrices',
      {
        q: [
          { chainID: 'anvil-b', queries: [{ contractAddress: Y }] },
          { chainID: String(A()), queries: [{ contractAddress: NATIVE }] },
        ],
      },
      { 'x-access-key': t.accessKey },
    );
    expect(byName.status, JSON.stringify(byName.body)).toBe(200);
    expect(byName.body.prices.map((p: { chainID: number; results: Array<{ priceUSD: string }> }) => [p.chainID, p.results.map((r) => r.priceUSD)])).toEqual([
      [CHAIN_B, ['3']],
      [A(), ['2000']],
    ]);
    const unknown = await rpc(t.app, '/rpc/IndexerGateway/GetTokenPrice', { q: { chainID: 'atlantis', queries: [] } }, { 'x-access-key': t.accessKey });
    expect([unknown.status, unknown.body.error, unknown.body.cause]).toEqual([400, 'InvalidArgument', 'q.chainID: unknown chain "atlantis"']);
  });

  it('with chain B`s node down, chain A answers and B is marked with errorReason', async () => {
    const off = proxyB.addRule(() => ({ kind: 'drop' }));
    try {
      const nat = await gw.getNativeTokenBalance({ accountAddress: H });
      expect(nat.balances[0]).toMatchObject({ chainId: A(), result: { balance: (2n * E18).toString(), priceUSD: '2000' } });
      expect(nat.balances[0]).not.toHaveProperty('errorReason');
      expect(nat.balances[1]).toEqual({ chainId: CHAIN_B, errorReason: expect.stringMatching(/anvil-b.*cannot be reached/), result: null });

      const details = await gw.getTokenBalancesDetails({ filter: { accountAddresses: [H], omitNativeBalances: false }, omitMetadata: true });
      expect(details.nativeBalances[0]!.results.map((r) => r.priceUSD)).toEqual(['2000']);
      expect(details.nativeBalances[1]).toEqual({ chainId: CHAIN_B, errorReason: expect.stringMatching(/anvil-b/), results: [] });
      expect(details.balances[0]!.results).toHaveLength(2);
      expect(details.balances[1]).toEqual({ chainId: CHAIN_B, errorReason: expect.stringMatching(/anvil-b/), results: [] });

      const prices = await gw.getTokenPrices({
        q: [
          { chainID: A(), queries: [{ contractAddress: X }] },
          { chainID: CHAIN_B, queries: [{ contractAddress: NATIVE }] },
        ],
      });
      expect(prices.prices[0]).toMatchObject({ chainID: A(), results: [{ contractAddress: X, priceUSD: '1' }] });
      expect(prices.prices[1]).toEqual({ chainID: CHAIN_B, errorReason: expect.stringMatching(/anvil-b|price read failed/), results: [] });

      // Balances live in the database and still answer; B's prices need its node, so they are withdrawn, flagged.
      const tb = await gw.getTokenBalances({ accountAddress: H });
      expect(tb.balances[1]!.results[0]).toMatchObject({ contractAddress: Y, priceUSD: '0', balanceUSD: '0', priceUnavailable: expect.stringMatching(/price read failed/) });
      // On B alone, a price method needs the node: 503 naming the chain, as other calls needing a node.
      const down = await rpc(t.app, '/indexer/anvil-b/rpc/Indexer/GetTokenPrice', { q: { contractAddress: NATIVE } }, { 'x-access-key': t.accessKey });
      expect(down.status).toBe(503);
      expect(down.body).toMatchObject({ code: 2002, cause: expect.stringMatching(/anvil-b/) });
    } finally {
      off();
    }
    // Back up: B answers again.
    const nat = await gw.getNativeTokenBalance({ accountAddress: H, chainIds: [CHAIN_B] });
    expect(nat.balances).toEqual([{ chainId: CHAIN_B, result: expect.objectContaining({ priceUSD: '1000' }) }]);
  });

  it('bad input is refused with the reason, never a 500', async () => {
    const unknown = await rpc(t.app, '/rpc/IndexerGateway/GetTokenBalances', { accountAddress: H, chainIds: [999_999] }, { 'x-access-key': t.accessKey });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toMatchObject({ code: 2001, cause: expect.stringMatching(/999999/) });
    const none = await rpc(t.app, '/rpc/IndexerGateway/GetTokenBalances', {}, { 'x-access-key': t.accessKey });
    expect(none.body).toMatchObject({ code: 2001, cause: expect.stringMatching(/accountAddress or contractAddress/) });
    const type = await rpc(t.app, '/rpc/IndexerGateway/GetChains', { networkType: 'SOME' }, { 'x-access-key': t.accessKey });
    expect(type.body).toMatchObject({ code: 2001, cause: expect.stringMatching(/networkType/) });
    const noKey = await rpc(t.app, '/rpc/IndexerGateway/GetChains', {});
    expect(noKey.body).toMatchObject({ code: 1000 });
  });

  it('a key held to one network sees only that chain, and naming another is refused', async () => {
    const other = await t.services.db.query<{ id: number }>(`INSERT INTO projects (name, allowed_chain_ids) VALUES ('b-only', '{${CHAIN_B}}') RETURNING id`);
    const { key } = await t.services.accessKeys.create(Number(other.rows[0]!.id), 'b-only');
    const held = new SequenceIndexerGateway(base, key);
    expect((await held.getChains({})).chains).toEqual([{ chainId: CHAIN_B, chainName: 'anvil-b' }]);
    expect((await held.getTokenBalances({ accountAddress: H })).balances.map((e) => e.chainId)).toEqual([CHAIN_B]);
    const refused = await rpc(t.app, '/rpc/IndexerGateway/GetTokenBalances', { accountAddress: H, chainIds: [A()] }, { 'x-access-key': key });
    expect(refused.body).toMatchObject({ code: 1104 });
    const price = await rpc(t.app, '/rpc/IndexerGateway/GetTokenPrice', { q: { chainID: A(), queries: [] } }, { 'x-access-key': key });
    expect(price.body).toMatchObject({ code: 1104 });
  });
});
