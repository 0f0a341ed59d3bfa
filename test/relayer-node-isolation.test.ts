// One keyless request must not fail everyone's node calls (#29, finding 5). The service talks to anvil
// through a JSON-RPC proxy that refuses batches over a few members as a whole, as providers do; judged
// by the answers, by what reached the proxy, and by a meta-transaction mined on chain.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, encodeAbiParameters, encodeFunctionData, http, parseAbiParameters, type Address, type Hex } from 'viem';
import { createChainClient } from '../src/chain/client.ts';
import { createMetrics } from '../src/telemetry/metrics.ts';
import { SEQUENCE_V2_CONTEXT } from '../src/devchain/sequence.ts';
import { TRANSACTION_TUPLE, estimationAbi } from '../src/relayer/abi.ts';
import { sequenceCreationCode } from '../src/relayer/artifacts.ts';
import { intrinsicGas } from '../src/relayer/intake/simulate.ts';
import { PAYEE, erc20, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import type { RpcCall, RpcProxy } from './support/rpc-proxy.ts';
import { newSigner, sequenceFactoryAbi, sequenceWalletAbi, signedBundle, walletFor, type SequenceTx } from './support/sequence-wallet.ts';
import { startTokenChain, type TokenChain } from './support/token-chain.ts';

/** The proxy refuses batches of more members than this. */
const BATCH_LIMIT = 4;
/** anonymousMaxGasLimit's default: a 12-bundle call of fresh wallets needs about 2.4 M. */
const KEYLESS_GAS = 3_000_000;
/** The keyless gas bucket per client address. */
const KEYLESS_GAS_BURST = 3_500_000;
/** Bundles per flood call: under the bundle cap (16) and the override-byte cap set below. */
const FLOOD_BUNDLES = 12;
const SIMULATE_EXECUTE = encodeFunctionData({ abi: estimationAbi, functionName: 'simulateExecute', args: [[]] }).slice(0, 10);

let chain: TokenChain;
let env: RelayerEnv;
let proxy: RpcProxy;
let codeBytes: number;

beforeAll(async () => {
  chain = await startTokenChain();
  // The code FeeOptions places on every bundle's wallet: the override-byte cap is set to 12.5 bundles' worth.
  const runtime = await createPublicClient({ transport: http(chain.anvil.rpcUrl) }).call({ data: sequenceCreationCode('MainModuleGasEstimation') });
  codeBytes = (runtime.data!.length - 2) / 2;
  env = await startRelayerEnv({
    chain,
    proxy: true,
    relayer: { maxOverrideBytes: Math.floor(codeBytes * 12.5) },
    // A gas bucket of 3.5 M per client address that does not refill within the test (1 gas/s).
    service: { anonymousSimulationGasPerSec: 1, anonymousSimulationGasBurst: KEYLESS_GAS_BURST },
  });
  proxy = env.proxy!;
}, 120_000);
afterAll(async () => {
  await env?.close();
  await chain?.stop();
});

const key = () => ({ 'x-access-key': env.accessKey });
const relayerPath = () => `/relayer/${chain.chainConfig.name}/rpc/Relayer/`;
/** A relayer call from a client address of its own (each has its own keyless bucket). */
async function from(ip: string, method: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await env.app.inject({ method: 'POST', url: `${relayerPath()}${method}`, remoteAddress: ip, headers: { 'content-type': 'application/json', ...headers }, payload: JSON.stringify(body) });
  return { status: res.statusCode, headers: res.headers, body: JSON.parse(res.body) };
}
const transfer = (to: Address, amount: bigint, extra: Partial<SequenceTx> = {}): SequenceTx => ({
  to: env.token,
  data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [to, amount] }),
  ...extra,
});
const tuple = (t: SequenceTx) => ({
  delegateCall: t.delegateCall ?? false,
  revertOnError: t.revertOnError ?? true,
  gasLimit: t.gasLimit ?? 0n,
  target: t.to,
  value: t.value ?? 0n,
  data: t.data ?? '0x',
});
const execute = (txs: SequenceTx[]): Hex => encodeFunctionData({ abi: sequenceWalletAbi, functionName: 'execute', args: [txs.map(tuple), 0n, '0x'] });

/** FeeOptions arguments for a guest call deploying `n` fresh wallets and running a bundle of each. */
function freshBundles(n: number, txs: SequenceTx[] = [transfer(PAYEE, 0n)]) {
  const wallets = Array.from({ length: n }, () => walletFor(newSigner().address));
  const guestTxs = wallets.flatMap((w): SequenceTx[] => [
    { to: SEQUENCE_V2_CONTEXT.factory, data: encodeFunctionData({ abi: sequenceFactoryAbi, functionName: 'deploy', args: [SEQUENCE_V2_CONTEXT.mainModule, w.imageHash] }), gasLimit: 100_000n },
    { to: w.address, data: execute(txs) },
  ]);
  return { wallet: wallets[0].address, to: SEQUENCE_V2_CONTEXT.guestModule, data: execute(guestTxs) };
}

const isSimulateExecute = (c: RpcCall) => c.method === 'eth_call' && String((c.params[0] as { data?: string })?.data ?? (c.params[0] as { input?: string })?.input ?? '').startsWith(SIMULATE_EXECUTE);
const gasOf = (c: RpcCall) => Number(BigInt((c.params[0] as { gas: string }).gas));

async function receipt(id: string) {
  for (let i = 0; i < 40; i++) {
    const r = await env.call('GetMetaTxnReceipt', { metaTxID: id }, key());
    if (['SUCCEEDED', 'FAILED', 'PARTIALLY_FAILED', 'DROPPED'].includes(r.body.receipt?.status)) return r.body.receipt;
  }
  throw new Error(`meta-transaction ${id} never reached a final status`);
}

// First in the file: the service's clients keep a batch limit they learn for good, so a refusal met by
// the service's own traffic in a later test would cut the flood's batches before the node sees them.
describe('a keyless FeeOptions flood', () => {
  it("fails neither its own calls, nor another caller's FeeOptions and SendMetaTxn, nor the dispatcher's work", async () => {
    proxy.refuseBatchesOver(BATCH_LIMIT);
    proxy.requests.length = 0;
    const refusedBefore = proxy.refusedBatches;
    // Each flood from addresses of its own: two calls in flight at once from one address would take two gas
    // budgets from its bucket at once (KEYLESS_GAS_BURST holds one).
    const flood = (net: number) => Array.from({ length: 6 }, (_, i) => from(`10.29.${net}.${i + 1}`, 'FeeOptions', freshBundles(FLOOD_BUNDLES)));
    try {
      const u = { ...newSigner() };
      const wallet = walletFor(u.address);
      const to = newSigner().address;
      await chain.send([{ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [wallet.address, 10_000_000n] }]);
      const payeeBefore = await env.public.readContract({ address: env.token, abi: erc20, functionName: 'balanceOf', args: [PAYEE] });

      const first = flood(5);
      // Another caller's FeeOptions while the flood is in flight: theirs, and seven more of other wallets.
      const stub = await signedBundle({ signerKey: newSigner().privateKey, wallet, chainId: env.chainId, txs: [transfer(to, 7n)], deployed: false });
      const others = Array.from({ length: 7 }, () => {
        const w = walletFor(newSigner().address);
        return env.call('FeeOptions', { wallet: w.address, to: w.address, data: execute([transfer(PAYEE, 0n)]) }, key());
      });
      const [mine, ...rest] = await Promise.all([env.call('FeeOptions', { wallet: wallet.address, to: stub.entrypoint, data: stub.input }, key()), ...others]);
      for (const r of [mine, ...rest]) expect(r.status, JSON.stringify(r.body)).toBe(200);
      const option = mine.body.options.find((o: { token: { symbol: string } }) => o.token.symbol === 'FUSD');

      const second = flood(6);
      const b = await signedBundle({ signerKey: u.privateKey, wallet, chainId: env.chainId, txs: [transfer(to, 7n), transfer(PAYEE, BigInt(option.value))], deployed: false });
      const sent = await env.call('SendMetaTxn', { call: { walletAddress: wallet.address, contract: b.entrypoint, input: b.input }, quote: mine.body.quote }, key());
      expect(sent.status, JSON.stringify(sent.body)).toBe(200);

      // Every flood call is answered too: a refused batch costs its members nothing.
      for (const r of await Promise.all([...first, ...second])) expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect((await receipt(b.id)).status).toBe('SUCCEEDED');
      expect(await env.public.readContract({ address: env.token, abi: erc20, functionName: 'balanceOf', args: [to] })).toBe(7n);
      expect((await env.public.readContract({ address: env.token, abi: erc20, functionName: 'balanceOf', args: [PAYEE] })) - payeeBefore).toBe(BigInt(option.value));

      // The flood did make the node refuse batches (else this proved nothing)...
      expect(proxy.refusedBatches - refusedBefore).toBeGreaterThan(0);
      // ...its simulations ran with the keyless gas limit, not maxGasLimit...
      const keyless = proxy.requests
        .flat()
        .filter(isSimulateExecute)
        .filter((c) => gasOf(c) <= KEYLESS_GAS);
      expect(keyless.length).toBeGreaterThanOrEqual(12 * FLOOD_BUNDLES);
      // ...and never shared an HTTP request with the dispatcher's broadcasts or receipt reads (not its fee
      // history reads: intake reads it too, to simulate at the fees the dispatcher signs with).
      const engine = new Set(['eth_sendRawTransaction', 'eth_getBlockReceipts', 'eth_getTransactionReceipt']);
      const mixed = proxy.requests.filter((r) => r.some(isSimulateExecute) && r.some((c) => engine.has(c.method)));
      expect(mixed).toEqual([]);
      expect(proxy.requests.flat().some((c) => c.method === 'eth_sendRawTransaction')).toBe(true);
    } finally {
      proxy.refuseBatchesOver(null);
    }
  }, 60_000);
});

describe('a batch the node refuses as a whole', () => {
  it.each(['error', 'http'] as const)('is sent again in groups the node takes (refusal as %s), never whole again; only the member that itself fails, fails', async (answer) => {
    const metrics = createMetrics();
    const client = createChainClient({ chainId: env.chainId, name: 'isolation', rpcUrls: [proxy.url], rpcBatchSize: 200 }, { metrics });
    const accounts = Array.from({ length: 10 }, () => newSigner().address.toLowerCase() as Address);
    const truth = accounts.map((_, i) => BigInt(i + 1) * 10n ** 18n);
    for (const [i, a] of accounts.entries()) await env.public.request({ method: 'anvil_setBalance' as never, params: [a, `0x${truth[i].toString(16)}`] as never });
    const bad = accounts[1];
    const unrule = proxy.addRule((c) => (c.method === 'eth_getBalance' && String(c.params[0]).toLowerCase() === bad ? { kind: 'fail', message: 'this one is refused' } : undefined));
    proxy.refuseBatchesOver(BATCH_LIMIT, answer);
    proxy.requests.length = 0;
    try {
      const got = await Promise.allSettled(accounts.map((address) => client.public.getBalance({ address })));
      expect(got[1].status).toBe('rejected');
      expect(String((got[1] as PromiseRejectedResult).reason)).toMatch(/this one is refused/);
      got.forEach((g, i) => {
        if (i !== 1) expect(g, `account ${i}`).toEqual({ status: 'fulfilled', value: truth[i] });
      });
      // One batch of all ten (refused), then groups of the limit the refusal names, never the ten again
      // (the service's own traffic left out).
      const ours = proxy.requests.filter((r) => r.every((c) => c.method === 'eth_getBalance' && accounts.includes(String(c.params[0]).toLowerCase() as Address)));
      expect(ours.map((r) => r.length)).toEqual([accounts.length, BATCH_LIMIT, BATCH_LIMIT, accounts.length - 2 * BATCH_LIMIT]);
      // Operators see it: one split, four round trips.
      expect((await metrics.chainRpcBatchSplits.get()).values[0].value).toBe(1);
      expect((await metrics.chainRpcRequests.get()).values[0].value).toBe(4);
      // The limit is kept for the endpoint: the next batch of ten is cut before it is sent, and not refused.
      const refused = proxy.refusedBatches;
      proxy.requests.length = 0;
      const again = await Promise.allSettled(accounts.map((address) => client.public.getBalance({ address })));
      expect(again.filter((g) => g.status === 'fulfilled').length).toBe(accounts.length - 1);
      expect(proxy.refusedBatches).toBe(refused);
      const ours2 = proxy.requests.filter((r) => r.every((c) => c.method === 'eth_getBalance' && accounts.includes(String(c.params[0]).toLowerCase() as Address)));
      expect(Math.max(...ours2.map((r) => r.length))).toBeLessThanOrEqual(BATCH_LIMIT);
    } finally {
      unrule();
      proxy.refuseBatchesOver(null);
    }
  });
});

describe('FeeOptions and Simulate limits', () => {
  it('refuses more bundles than maxFeeOptionsBundles, and more placed code than maxOverrideBytes, before any node call', async () => {
    proxy.requests.length = 0;
    const many = await env.call('FeeOptions', freshBundles(17), key());
    expect(many.status).toBe(400);
    expect(many.body).toMatchObject({ error: 'InvalidArgument' });
    expect(many.body.cause).toMatch(/17 bundles.*at most 16 \(maxFeeOptionsBundles\)/);
    const heavy = await env.call('FeeOptions', freshBundles(13), key());
    expect(heavy.status).toBe(400);
    expect(heavy.body.cause).toMatch(new RegExp(`13 bundles places ${13 * codeBytes} bytes.*${Math.floor(codeBytes * 12.5)} \\(maxOverrideBytes\\)`));
    expect(proxy.requests.flat().filter((c) => isSimulateExecute(c) || c.method === 'eth_getCode')).toEqual([]);
    const fits = await env.call('FeeOptions', freshBundles(12), key());
    expect(fits.status, JSON.stringify(fits.body)).toBe(200);
  });

  it('charges a keyless caller by the gas simulated, not per call: several 12-bundle calls fit a gas burst of 3.5 M, then 429 before any node call', async () => {
    const ip = '10.29.5.99';
    // Each call takes its budget (3 M) up front and gets back what its simulations did not use: charged by
    // the call (3 M each), one would fit; charged by the gas simulated, several.
    let served = 0;
    let refused: Awaited<ReturnType<typeof from>> | undefined;
    for (let i = 0; i < 40 && !refused; i++) {
      proxy.requests.length = 0;
      const r = await from(ip, 'FeeOptions', freshBundles(FLOOD_BUNDLES));
      if (r.status === 200) served++;
      else refused = r;
    }
    expect(served).toBeGreaterThan(Math.floor(KEYLESS_GAS_BURST / KEYLESS_GAS));
    expect(refused?.status).toBe(429);
    expect(refused?.body.cause).toMatch(/gas simulated without an access key from 10\.29\.5\.99 .* budget of 3000000 gas/);
    expect(Number(refused?.headers['retry-after'])).toBeGreaterThan(0);
    expect(proxy.requests.flat().filter(isSimulateExecute)).toEqual([]);
    // Another address, and a keyed caller, are served.
    expect((await from('10.29.5.98', 'FeeOptions', freshBundles(1))).status).toBe(200);
    expect((await env.call('FeeOptions', freshBundles(1), key())).status).toBe(200);
  });

  it('charges a keyless SendMetaTxn by the gas it simulated: a refused one keeps its budget, and past the burst the next is 429 before any node call', async () => {
    const ip = '10.29.7.1';
    const bundle = async () => {
      const s = newSigner();
      const wallet = walletFor(s.address);
      await env.chain.send([{ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [wallet.address, 10n] }]);
      // Pays a fee of 1: simulated in full, then refused as too low (402).
      return { wallet, b: await signedBundle({ signerKey: s.privateKey, wallet, chainId: env.chainId, txs: [transfer(PAYEE, 1n)], deployed: false }) };
    };
    const first = await bundle();
    const low = await from(ip, 'SendMetaTxn', { call: { walletAddress: first.wallet.address, contract: first.b.entrypoint, input: first.b.input } });
    expect(low.status, JSON.stringify(low.body)).toBe(402);
    proxy.requests.length = 0;
    const second = await bundle();
    const over = await from(ip, 'SendMetaTxn', { call: { walletAddress: second.wallet.address, contract: second.b.entrypoint, input: second.b.input } });
    expect(over.status, JSON.stringify(over.body)).toBe(429);
    expect(over.body.cause).toMatch(/gas simulated without an access key from 10\.29\.7\.1 .* budget of 3000000 gas/);
    expect(proxy.requests.flat().filter((c) => c.method === 'eth_call' || c.method === 'eth_estimateGas')).toEqual([]);
    // With a key, the same send is not metered.
    expect((await from(ip, 'SendMetaTxn', { call: { walletAddress: second.wallet.address, contract: second.b.entrypoint, input: second.b.input } }, key())).status).toBe(402);
  });

  it('holds FeeOptions and Simulate without a key to anonymousMaxGasLimit; with a key, to maxGasLimit', async () => {
    // 200 000 non-zero calldata bytes: 3.2 M gas of intrinsic cost alone.
    const big = [transfer(PAYEE, 0n, { data: `0x${'ab'.repeat(200_000)}` as Hex, to: newSigner().address })];
    const keyless = await from('10.29.5.200', 'FeeOptions', freshBundles(1, big));
    expect(keyless.status).toBe(400);
    expect(keyless.body).toMatchObject({ error: 'SimulationFailed' });
    expect(keyless.body.cause).toMatch(new RegExp(`over this relayer's limit of ${KEYLESS_GAS} for calls without an access key`));
    expect((await env.call('FeeOptions', freshBundles(1, big), key())).status).toBe(200);

    const encoded = encodeAbiParameters(parseAbiParameters(`${TRANSACTION_TUPLE}[]`), [[tuple(transfer(PAYEE, 0n))]]);
    const wallet = walletFor(newSigner().address).address;
    proxy.requests.length = 0;
    expect((await from('10.29.5.201', 'Simulate', { wallet, transactions: encoded })).status).toBe(200);
    expect((await env.call('Simulate', { wallet, transactions: encoded }, key())).status).toBe(200);
    // Each run is given the cap for its transactions, and its own calldata's cost on top.
    const runs = proxy.requests.flat().filter(isSimulateExecute);
    expect(runs.map((c) => gasOf(c) - Number(intrinsicGas((c.params[0] as { data?: Hex; input?: Hex }).data ?? (c.params[0] as { input: Hex }).input)))).toEqual([KEYLESS_GAS, 15_000_000]);
  });
});
