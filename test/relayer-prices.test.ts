// Live fee prices (#18) on a real anvil: Chainlink's MockV3Aggregator feeds and a Uniswap v3 pool from the
// official artifacts. Fees follow the feeds, a stale, zero or negative feed withdraws its token (FeeOptions,
// SendMetaTxn, RuntimeStatus, the metric), fallbacks go in the configured order, and pricing costs one
// Multicall3 call per block. Judged by what the payment address receives against what the sender paid.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, parseAbi, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { devPublicClient, devWalletClient, rpcCall } from '../src/devchain/index.ts';
import { PRICE_ADMIN_KEY, aggregatorAdminAbi, deployPriceFeeds, poolAdminAbi, type DevPriceFeeds } from '../src/devchain/prices.ts';
import { parseConfig } from '../src/config/load.ts';
import { PAYEE, erc20, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { newSigner, signedBundle, walletFor, type SequenceTx } from './support/sequence-wallet.ts';
import { startTokenChain, type TokenChain } from './support/token-chain.ts';

let chain: TokenChain;
let env: RelayerEnv;
let feeds: DevPriceFeeds;
/** R: token/USD feed only (withdrawn when it fails). Q: token/native feed, then a fixed rate. P: token/USD feed, then the pool's TWAP. */
let R: Address, Q: Address, P: Address;
let rFeed: Address, qFeed: Address;

const HEARTBEAT = 3_600;
const testRoundFeedAbi = parseAbi(['function set(uint80 roundId, int256 answer, uint256 updatedAt, uint80 answeredInRound)']);
const usd = (dollars: number) => BigInt(Math.round(dollars * 1e8));
const ceilDiv = (a: bigint, b: bigint) => (a + b - 1n) / b;

const admin = () => devWalletClient(chain.anvil.rpcUrl, chain.anvil.chainId, privateKeyToAccount(PRICE_ADMIN_KEY));
const pub = () => devPublicClient(chain.anvil.rpcUrl, chain.anvil.chainId);

async function adminSend(to: Address, data: Hex) {
  const hash = await admin().sendTransaction({ to, data, gas: 300_000n });
  const r = await pub().waitForTransactionReceipt({ hash });
  expect(r.status).toBe('success');
  // The relayer asks for the head at most once per pollMs (50 ms here): let it see this block.
  await new Promise((res) => setTimeout(res, 80));
}
const setAnswer = (feed: Address, answer: bigint) => adminSend(feed, encodeFunctionData({ abi: aggregatorAdminAbi, functionName: 'updateAnswer', args: [answer] }));
/** Every feed answers again, dated now (chain time). */
async function refreshFeeds(r = usd(1), q = 5n * 10n ** 14n, nativeUsd = usd(2000)) {
  await setAnswer(feeds.nativeUsd, nativeUsd);
  await setAnswer(rFeed, r);
  await setAnswer(qFeed, q);
  await setAnswer(feeds.tokenUsd, usd(1));
}
async function timeTravel(seconds: number) {
  await rpcCall(chain.anvil.rpcUrl, 'evm_increaseTime', [seconds]);
  await rpcCall(chain.anvil.rpcUrl, 'evm_mine', []);
  await new Promise((res) => setTimeout(res, 80));
}

beforeAll(async () => {
  chain = await startTokenChain();
  [R, Q, P] = await chain.deploy([
    { contract: 'DevERC20', args: ['R Dollar', 'RUSD'] },
    { contract: 'DevERC20', args: ['Q Dollar', 'QUSD'] },
    { contract: 'DevERC20', args: ['P Dollar', 'PUSD'] },
  ]);
  feeds = await deployPriceFeeds({ rpcUrl: chain.anvil.rpcUrl, chainId: chain.anvil.chainId, artifacts: chain.artifacts, token: P, tokenDecimals: 6 });
  [rFeed, qFeed] = await chain.deploy([
    { contract: 'DevAggregator', args: [8, usd(1)] },
    // token/native, 18 decimals: 0.0005 ETH per QUSD.
    { contract: 'DevAggregator', args: [18, 5n * 10n ** 14n] },
  ]);
  // The pool's TWAP window needs history behind it.
  await timeTravel(120);
  await refreshFeeds();
  env = await startRelayerEnv({
    chain,
    relayer: {
      nativeUsdFeed: { feed: feeds.nativeUsd, heartbeatSec: HEARTBEAT },
      wrappedNative: feeds.wrappedNative,
      feeTokens: [
        { address: R, name: 'R Dollar', symbol: 'RUSD', decimals: 6, prices: [{ kind: 'chainlink', feed: rFeed, quote: 'usd', heartbeatSec: HEARTBEAT }] },
        { address: Q, name: 'Q Dollar', symbol: 'QUSD', decimals: 6, prices: [{ kind: 'chainlink', feed: qFeed, quote: 'native', heartbeatSec: HEARTBEAT }], nativePrice: '0.0004' },
        {
          address: P,
          name: 'P Dollar',
          symbol: 'PUSD',
          decimals: 6,
          prices: [
            { kind: 'chainlink', feed: feeds.tokenUsd, quote: 'usd', heartbeatSec: HEARTBEAT },
            { kind: 'uniswapV3', pool: feeds.pool, windowSec: 60 },
          ],
        },
        { address: null, name: 'Ether', symbol: 'ETH', decimals: 18, nativePrice: '1' },
      ],
    },
  });
}, 180_000);
afterAll(async () => {
  await env?.close();
  await chain?.stop();
});

type Option = {
  token: { symbol: string; contractAddress: string | null };
  to: string;
  value: string;
  gasLimit: number;
  price: { ok: true; nativePrice: string; source: string; address: string | null; block: string | null; skipped: string[] };
};
type Options = { options: Option[]; sponsored: boolean; quote: string; unpriced: { token: { symbol: string }; reason: string }[] };

function user() {
  const s = newSigner();
  return { key: s.privateKey, wallet: walletFor(s.address) };
}
const transfer = (token: Address, to: Address, amount: bigint): SequenceTx => ({ to: token, data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [to, amount] }) });
const balance = (token: Address, owner: Address) => env.public.readContract({ address: token, abi: erc20, functionName: 'balanceOf', args: [owner] });

async function feeOptions(u: ReturnType<typeof user>, txs: SequenceTx[]): Promise<Options> {
  const stub = await signedBundle({ signerKey: newSigner().privateKey, wallet: u.wallet, chainId: env.chainId, txs, deployed: false });
  const r = await env.call('FeeOptions', { wallet: u.wallet.address, to: stub.entrypoint, data: stub.input });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as Options;
}
const bySymbol = (o: Options) => Object.fromEntries(o.options.map((x) => [x.token.symbol, x]));

async function finalReceipt(id: string) {
  for (let i = 0; i < 40; i++) {
    const r = await env.call('GetMetaTxnReceipt', { metaTxID: id });
    if (['SUCCEEDED', 'FAILED', 'PARTIALLY_FAILED', 'DROPPED'].includes(r.body.receipt.status)) return r.body.receipt;
  }
  throw new Error(`meta-transaction ${id} never reached a final status`);
}

async function metric(name: string, labels: Record<string, string>): Promise<number> {
  const m = (await env.services.metrics.registry.getMetricsAsJSON()).find((x) => x.name === name);
  const v = m?.values.find((x) => Object.entries(labels).every(([k, val]) => (x.labels as Record<string, unknown>)[k] === val));
  return Number(v?.value ?? 0);
}

describe('price configuration', () => {
  const relayerWith = (relayer: object) => () => parseConfig({ chains: [{ chainId: 1, name: 'one', rpcUrls: ['http://127.0.0.1:1'], relayer: { senderKeys: ['0x' + '11'.repeat(32)], ...relayer } }] });
  const token = { address: '0x' + '22'.repeat(20), name: 'T', symbol: 'T', decimals: 6 };
  const feed = '0x' + '33'.repeat(20);

  it('refuses sources it could not honour, with the key that is missing', () => {
    expect(relayerWith({ feeTokens: [token] })).toThrow(/a fee token needs prices or a fixed nativePrice/);
    expect(relayerWith({ feeTokens: [{ ...token, prices: [{ kind: 'chainlink', feed, quote: 'usd', heartbeatSec: 60 }] }] })).toThrow(/nativeUsdFeed/);
    expect(relayerWith({ feeTokens: [{ ...token, prices: [{ kind: 'uniswapV3', pool: feed, windowSec: 600 }] }] })).toThrow(/wrappedNative/);
    expect(relayerWith({ feeTokens: [{ ...token, address: null, prices: [{ kind: 'chainlink', feed, heartbeatSec: 60 }] }] })).toThrow(/native fee token is worth exactly 1/);
    expect(relayerWith({ feeTokens: [{ ...token, prices: [{ kind: 'chainlink', feed }] }] })).toThrow(/heartbeatSec/);
    expect(relayerWith({ feeTokens: [{ ...token, prices: [{ kind: 'chainlink', feed, heartbeatSec: 60, maxDeviation: 1 }] }] })).toThrow(/maxDeviation/);
    expect(relayerWith({ wrappedNative: feed, feeTokens: [{ ...token, prices: [{ kind: 'uniswapV3', pool: feed, windowSec: 10 }] }] })).toThrow(/windowSec/);
    expect(relayerWith({ feeTokens: [{ ...token, nativePrice: '0.0004' }] })).not.toThrow();
  });
});

describe('live fee prices', () => {
  it('prices each token from its feed, and the fee in a token moves inversely to its price; the payee gets at least the gas it paid', async () => {
    const u = user();
    const to = newSigner().address;
    await chain.send([{ address: R, contract: 'DevERC20', functionName: 'mint', args: [u.wallet.address, 10n ** 12n] }]);
    const at1 = await feeOptions(u, [transfer(R, to, 5n)]);
    const o1 = bySymbol(at1);
    expect(o1.RUSD.price).toMatchObject({ ok: true, nativePrice: '0.0005', source: 'chainlink', address: rFeed });
    expect(o1.QUSD.price).toMatchObject({ nativePrice: '0.0005', source: 'chainlink', address: qFeed });
    expect(o1.PUSD.price).toMatchObject({ nativePrice: '0.0005', source: 'chainlink' });
    expect(o1.ETH.price).toMatchObject({ nativePrice: '1', source: 'fixed' });
    // ETH's value is the fee in wei; RUSD at $1 / ETH at $2 000 is 2 000 RUSD per ETH, rounded up.
    const wei1 = BigInt(o1.ETH.value);
    expect(BigInt(o1.RUSD.value)).toBe(ceilDiv(wei1 * 10n ** 6n * 2_000n, 10n ** 18n));
    // The quote carries the prices it used.
    const payload = JSON.parse(Buffer.from(at1.quote.split('.')[0], 'base64url').toString());
    expect(payload.p[R.toLowerCase()]).toMatch(/^\d+\/\d+$/);
    const [n, d] = payload.p[R.toLowerCase()].split('/').map(BigInt);
    expect(n * 2_000n).toBe(d);

    // RUSD doubles to $2: its fee halves (against the ETH fee of the same answer).
    await setAnswer(rFeed, usd(2));
    const at2 = await feeOptions(u, [transfer(R, to, 5n)]);
    const o2 = bySymbol(at2);
    expect(o2.RUSD.price.nativePrice).toBe('0.001');
    expect(BigInt(o2.RUSD.value)).toBe(ceilDiv(BigInt(o2.ETH.value) * 10n ** 6n * 1_000n, 10n ** 18n));
    // ETH falls to $1 000 with RUSD at $2: 500 RUSD per ETH.
    await setAnswer(feeds.nativeUsd, usd(1000));
    const o3 = bySymbol(await feeOptions(u, [transfer(R, to, 5n)]));
    expect(o3.RUSD.price.nativePrice).toBe('0.002');
    expect(BigInt(o3.RUSD.value)).toBe(ceilDiv(BigInt(o3.ETH.value) * 10n ** 6n * 500n, 10n ** 18n));

    // Paid at that price, the payee's RUSD is worth at least the gas the sender spent (ground truth).
    const q = await feeOptions(u, [transfer(R, to, 5n)]);
    const fee = BigInt(bySymbol(q).RUSD.value);
    const before = await balance(R, PAYEE);
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [transfer(R, to, 5n), transfer(R, PAYEE, fee)], deployed: false });
    const sent = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input }, quote: q.quote });
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    const rec = await finalReceipt(b.id);
    expect(rec.status).toBe('SUCCEEDED');
    const received = (await balance(R, PAYEE)) - before;
    expect(received).toBe(fee);
    const chainReceipt = await env.public.getTransactionReceipt({ hash: rec.txnHash });
    const gasPaid = chainReceipt.gasUsed * chainReceipt.effectiveGasPrice;
    // 0.002 ETH per RUSD: received × 0.002 × 10^18 / 10^6 wei.
    expect((received * 2n * 10n ** 15n) / 10n ** 6n).toBeGreaterThanOrEqual(gasPaid);
    await refreshFeeds();
  });

  it('withdraws a token whose feed is stale, and refuses SendMetaTxn paying with it; fallbacks go in order; ETH still pays', async () => {
    const u = user();
    await chain.send([{ address: R, contract: 'DevERC20', functionName: 'mint', args: [u.wallet.address, 10n ** 12n] }]);
    const fresh = await feeOptions(u, []);
    const rQuoted = BigInt(bySymbol(fresh).RUSD.value);

    // Past every feed's heartbeat: R (feed only) is withdrawn, Q falls back to its fixed rate, P to its pool's TWAP.
    await timeTravel(HEARTBEAT + 60);
    const stale = await feeOptions(u, []);
    const o = bySymbol(stale);
    expect(o.RUSD).toBeUndefined();
    expect(stale.unpriced.map((x) => x.token.symbol)).toEqual(['RUSD']);
    expect(stale.unpriced[0].reason).toMatch(/stale: updated \d+ s ago, heartbeat 3600 s/);
    expect(o.QUSD.price).toMatchObject({ source: 'fixed', nativePrice: '0.0004' });
    expect(o.QUSD.price.skipped[0]).toMatch(/^chainlink: feed .* is stale/);
    expect(o.PUSD.price.source).toBe('uniswapV3');
    expect(o.PUSD.price.address).toBe(feeds.pool);
    // The pool was made at $1 / $2 000: its TWAP is 0.0005 ETH per PUSD to within a tick.
    expect(Math.abs(Number(o.PUSD.price.nativePrice) / 0.0005 - 1)).toBeLessThan(0.0002);
    expect(o.ETH.price.source).toBe('fixed');

    const status = await env.call('RuntimeStatus', {}, { 'x-access-key': env.accessKey });
    const r = status.body.status.prices.find((p: { symbol: string }) => p.symbol === 'RUSD');
    expect(r).toMatchObject({ ok: false });
    expect(r.reason).toMatch(/stale/);
    expect(await metric('metarelay_relayer_fee_token_unpriced', { token: 'RUSD' })).toBe(1);
    expect(await metric('metarelay_relayer_fee_token_unpriced', { token: 'QUSD' })).toBe(0);

    // A bundle paying in RUSD, even at the quote issued while it was priced, is refused and nothing moves.
    const before = await balance(R, PAYEE);
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [transfer(R, PAYEE, rQuoted * 10n)], deployed: false });
    const refused = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input }, quote: fresh.quote });
    expect(refused.status).toBe(402);
    expect(refused.body.cause).toMatch(/RUSD is not accepted now: it has no trustworthy price \(.*stale/);
    expect((await env.call('GetMetaTxnStatus', { metaTxID: b.id })).body.error).toBe('NotFound');

    // ETH still pays: the payee receives exactly the native fee.
    await rpcCall(chain.anvil.rpcUrl, 'anvil_setBalance', [u.wallet.address, '0xde0b6b3a7640000']);
    const eth = BigInt(o.ETH.value);
    const ethBefore = await env.public.getBalance({ address: PAYEE });
    const nb = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [{ to: PAYEE, value: eth, data: '0x' }], deployed: false });
    const ok = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: nb.entrypoint, input: nb.input }, quote: stale.quote });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect((await finalReceipt(nb.id)).status).toBe('SUCCEEDED');
    expect((await env.public.getBalance({ address: PAYEE })) - ethBefore).toBe(eth);
    expect(await balance(R, PAYEE)).toBe(before);

    // Fresh answers bring RUSD back.
    await refreshFeeds();
    const back = bySymbol(await feeOptions(u, []));
    expect(back.RUSD.price).toMatchObject({ source: 'chainlink', nativePrice: '0.0005' });
    expect(await metric('metarelay_relayer_fee_token_unpriced', { token: 'RUSD' })).toBe(0);
  });

  it('does not honour a quote below the gas cost at the current price: a token that crashed after quoting pays the new price', async () => {
    const u = user();
    const to = newSigner().address;
    await chain.send([{ address: R, contract: 'DevERC20', functionName: 'mint', args: [u.wallet.address, 10n ** 12n] }]);
    const q = await feeOptions(u, [transfer(R, to, 1n)]);
    const quoted = BigInt(bySymbol(q).RUSD.value);
    // RUSD falls to a fifth of a dollar: the quoted amount is now worth far less than the gas.
    await setAnswer(rFeed, usd(0.2));
    const before = await balance(R, PAYEE);
    const cheap = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [transfer(R, to, 1n), transfer(R, PAYEE, quoted)], deployed: false });
    const refused = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: cheap.entrypoint, input: cheap.input }, quote: q.quote });
    expect(refused.status).toBe(402);
    expect(refused.body.cause).toMatch(/too low \(RUSD: paid \d+ as quoted, but its gas limit of \d+ alone now costs \d+ at the current price/);
    // Paying at the new price goes through; the payee's RUSD covers the gas the sender paid, at the new price.
    const fresh = await feeOptions(u, [transfer(R, to, 1n)]);
    const fee = BigInt(bySymbol(fresh).RUSD.value);
    expect(fee).toBeGreaterThan(quoted * 4n);
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [transfer(R, to, 1n), transfer(R, PAYEE, fee)], deployed: false });
    const sent = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input }, quote: fresh.quote });
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    const rec = await finalReceipt(b.id);
    expect(rec.status).toBe('SUCCEEDED');
    expect((await balance(R, PAYEE)) - before).toBe(fee);
    const chainReceipt = await env.public.getTransactionReceipt({ hash: rec.txnHash });
    // 0.2 / 2 000 = 0.0001 ETH per RUSD.
    expect((fee * 10n ** 14n) / 10n ** 6n).toBeGreaterThanOrEqual(chainReceipt.gasUsed * chainReceipt.effectiveGasPrice);
    await refreshFeeds();
  });

  it('withdraws a token whose feed answers zero or a negative price, or an answer dated before its heartbeat', async () => {
    const u = user();
    for (const answer of [0n, -usd(1)]) {
      await setAnswer(rFeed, answer);
      const o = await feeOptions(u, []);
      expect(bySymbol(o).RUSD).toBeUndefined();
      expect(o.unpriced[0].reason).toContain(`answers ${answer}, not a positive price`);
    }
    // A round reported with an old updatedAt (no time travel): stale.
    const block = await env.public.getBlock({ blockTag: 'latest' });
    const old = block.timestamp - BigInt(HEARTBEAT + 1);
    await adminSend(rFeed, encodeFunctionData({ abi: aggregatorAdminAbi, functionName: 'updateRoundData', args: [100n, usd(1), old, old] }));
    const o = await feeOptions(u, []);
    expect(bySymbol(o).RUSD).toBeUndefined();
    expect(o.unpriced[0].reason).toMatch(/stale/);
    // A round with no updatedAt is incomplete.
    await adminSend(rFeed, encodeFunctionData({ abi: aggregatorAdminAbi, functionName: 'updateRoundData', args: [101n, usd(1), 0n, 0n] }));
    const inc = await feeOptions(u, []);
    expect(bySymbol(inc).RUSD).toBeUndefined();
    expect(inc.unpriced[0].reason).toMatch(/round 101 is incomplete/);
    // A fresh, positive answer carried over from an earlier round (answeredInRound < roundId) is not trusted
    // either. MockV3Aggregator cannot say that, so R's feed runs TestRoundFeed's code for a moment.
    const [roundFeed] = await chain.deploy([{ contract: 'TestRoundFeed', args: [] }]);
    const aggregatorCode = await pub().getCode({ address: rFeed });
    await rpcCall(chain.anvil.rpcUrl, 'anvil_setCode', [rFeed, await pub().getCode({ address: roundFeed })]);
    const now = (await env.public.getBlock({ blockTag: 'latest' })).timestamp;
    const setRound = (answeredInRound: bigint) => adminSend(rFeed, encodeFunctionData({ abi: testRoundFeedAbi, functionName: 'set', args: [102n, usd(1), now, answeredInRound] }));
    await setRound(101n);
    const carried = await feeOptions(u, []);
    expect(bySymbol(carried).RUSD).toBeUndefined();
    expect(carried.unpriced[0].reason).toMatch(/round 102 is incomplete \(answered in round 101/);
    // The same round answered in itself is priced: the refusal above was the carried-over round, nothing else.
    await setRound(102n);
    expect(bySymbol(await feeOptions(u, [])).RUSD).toBeDefined();
    await rpcCall(chain.anvil.rpcUrl, 'anvil_setCode', [rFeed, aggregatorCode]);
    // The native/USD feed failing withdraws every token priced in USD without another source, not the others.
    await setAnswer(rFeed, usd(1));
    await setAnswer(feeds.nativeUsd, 0n);
    const n = await feeOptions(u, []);
    expect(n.unpriced.map((x) => x.token.symbol)).toEqual(['RUSD']);
    expect(n.unpriced[0].reason).toMatch(/native\/USD: feed .* answers 0/);
    expect(bySymbol(n).PUSD.price.source).toBe('uniswapV3');
    await refreshFeeds();
  });

  it("follows a pool's TWAP when the feed is stale: a swap moves it only by its time share, a price that holds moves it fully", async () => {
    const u = user();
    const block = await env.public.getBlock({ blockTag: 'latest' });
    const old = block.timestamp - BigInt(HEARTBEAT + 1);
    await adminSend(feeds.tokenUsd, encodeFunctionData({ abi: aggregatorAdminAbi, functionName: 'updateRoundData', args: [100n, usd(1), old, old] }));
    const before = bySymbol(await feeOptions(u, [])).PUSD;
    expect(before.price.source).toBe('uniswapV3');
    expect(before.price.skipped[0]).toMatch(/^chainlink: feed .* is stale/);
    const p0 = Number(before.price.nativePrice);

    // Buy PUSD in the pool until its spot price in ETH is 4×.
    const [sqrt] = await env.public.readContract({ address: feeds.pool, abi: poolAdminAbi, functionName: 'slot0' });
    const pFirst = P.toLowerCase() < feeds.wrappedNative.toLowerCase();
    const helper = chain.artifacts.DevUniswapV3Helper!;
    const limit = pFirst ? sqrt * 2n : sqrt / 2n;
    await adminSend(feeds.helper, encodeFunctionData({ abi: helper.abi, functionName: 'swap', args: [feeds.pool, !pFirst, 10n ** 30n, limit] }));
    const [after] = await env.public.readContract({ address: feeds.pool, abi: poolAdminAbi, functionName: 'slot0' });
    expect(after).toBe(limit);

    // Right after the swap the 60 s average has barely moved: about 4^(1/60).
    await timeTravel(1);
    const moved = bySymbol(await feeOptions(u, [])).PUSD;
    expect(moved.price.source).toBe('uniswapV3');
    const ratio = Number(moved.price.nativePrice) / p0;
    expect(ratio).toBeGreaterThan(1);
    expect(ratio).toBeLessThan(1.1);

    // Held for the whole window, the average is the new price, and the PUSD fee is a quarter (against ETH).
    await timeTravel(61);
    const held = await feeOptions(u, []);
    const h = bySymbol(held).PUSD;
    expect(Math.abs(Number(h.price.nativePrice) / (4 * p0) - 1)).toBeLessThan(0.001);
    const [n, d] = JSON.parse(Buffer.from(held.quote.split('.')[0], 'base64url').toString())
      .p[P.toLowerCase()].split('/')
      .map(BigInt);
    expect(BigInt(h.value)).toBe(ceilDiv(BigInt(bySymbol(held).ETH.value) * 10n ** 6n * d, n * 10n ** 18n));
    await refreshFeeds();
    expect(bySymbol(await feeOptions(u, [])).PUSD.price.source).toBe('chainlink');
  });

  it('reads every price of the chain in one eth_call per block, however many callers', async () => {
    const calls = () => metric('metarelay_chain_rpc_calls_total', { method: 'eth_call' });
    const relayer = env.services.relayers.get(env.chainId)!;
    // The relayer's head is read fresh after each block is mined (not slept for: under load the head
    // could still be the block before, and the ten reads span both blocks).
    const head = env.services.chains.get(env.chainId)!.head;
    const mined = async () => {
      await rpcCall(chain.anvil.rpcUrl, 'evm_mine', []);
      const n = await env.public.getBlockNumber({ cacheTime: 0 });
      await expect.poll(() => head.number(0)).toBe(n);
    };
    await mined();
    const start = await calls();
    await Promise.all(Array.from({ length: 5 }, () => relayer.priceStatus()));
    for (let i = 0; i < 5; i++) await relayer.priceStatus();
    expect((await calls()) - start).toBe(1);
    await mined();
    const statuses = await Promise.all(Array.from({ length: 5 }, () => relayer.priceStatus()));
    expect((await calls()) - start).toBe(2);
    expect(statuses[0].map((p) => p.ok)).toEqual([true, true, true, true]);
  });
});
