// Simulations run like the mined transaction (#52, "simulate like the real run"): the fees it is signed
// with, a real sender with its real balance, the next block's base fee. Two attackers' contracts, each with
// a tell of the relayer's old choosing (a gas price of twice the base fee; a sender holding 10^24 wei by
// state override), return cheaply when they believe they are simulated and burn their gas when mined: the
// bundle [fee, tell.go()] was accepted and mined FAILED, fee and all. Judged on chain (the relayer's ETH,
// the payment address's balance, the sender's nonce) and at the node (what the simulations asked for).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, parseAbi, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { mine, setNextBaseFee } from './support/anvil-control.ts';
import { feeKit } from './support/fee-kit.ts';
import { PAYEE, SENDER_KEYS, erc20, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import type { RpcCall } from './support/rpc-proxy.ts';
import { signedBundle, type SequenceTx } from './support/sequence-wallet.ts';

let env: RelayerEnv;
let gasPriceTell: Address;
let balanceTell: Address;
const SENDER = privateKeyToAccount(SENDER_KEYS[0]).address;
const GWEI = 1_000_000_000n;
/** 100 FUSD, worth 0.04 ETH at the test price: far above any of these bundles' gas limits at 2 gwei. */
const FEE = 100_000_000n;
const tellAbi = parseAbi(['function go()', 'function burned() view returns (uint256)']);

beforeAll(async () => {
  // One sender, so every simulation and every transaction is its.
  env = await startRelayerEnv({ proxy: true, relayer: { senderKeys: [SENDER_KEYS[0]] } });
  [gasPriceTell, balanceTell] = await env.chain.deploy([{ contract: 'TestGasPriceTell' }, { contract: 'TestBalanceTell' }]);
}, 120_000);
afterAll(async () => {
  await env?.close();
});

const { key, user, mint, balance } = feeKit(() => env);
const fee = (): SequenceTx => ({ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [PAYEE, FEE] }) });
const go = (tell: Address): SequenceTx => ({ to: tell, data: encodeFunctionData({ abi: tellAbi, functionName: 'go' }) });
const execute = '0x7a9a1628';

/** The next block's base fee set to `wei` and one block mined (anvil lowers it after every near-empty block). */
async function pinBaseFee(wei: bigint) {
  await setNextBaseFee(env.rpcUrl, wei);
  await mine(env.rpcUrl);
}

/** Ground truth: the relayer's ETH, its sender's nonce, and the payment address's fee-token balance. */
async function books() {
  const [eth, nonce, fusd] = await Promise.all([env.public.getBalance({ address: SENDER }), env.public.getTransactionCount({ address: SENDER }), balance(PAYEE)]);
  return { eth, nonce, fusd };
}

/** The eth_call params of the intake simulations that ran a wallet's bundle through the probe (its execute in the calldata). */
const probeCallsOf = (wallet: Address) =>
  env
    .proxy!.calls.filter((c: RpcCall) => c.method === 'eth_call')
    .map((c) => c.params as [Record<string, string>, string, Record<string, { balance?: string }>?, Record<string, string>?])
    .filter(([tx]) => String(tx.data ?? tx.input ?? '').includes(wallet.slice(2).toLowerCase()) && String(tx.data ?? tx.input ?? '').includes(execute.slice(2)));

describe('a tell of the relayer choosing no longer tells a simulation from the mined run', () => {
  it.each([
    ['a gas price of at least twice the base fee', () => gasPriceTell],
    ['a sender holding at least 10^23 wei', () => balanceTell],
  ])('%s: the bundle [fee, tell.go()] fails in FeeOptions and SendMetaTxn as it would mined; nothing is sent, nothing spent', async (_what, tell) => {
    await pinBaseFee(2n * GWEI);
    const u = user();
    await mint(u.wallet.address, 10n * FEE);
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [fee(), go(tell())], deployed: false });
    const before = await books();
    const quoted = await env.call('FeeOptions', { wallet: u.wallet.address, to: b.entrypoint, data: b.input }, key());
    expect(quoted.status, JSON.stringify(quoted.body)).toBe(400);
    expect(quoted.body).toMatchObject({ error: 'SimulationFailed' });
    const sent = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input } }, key());
    expect(sent.status, JSON.stringify(sent.body)).toBe(400);
    expect(sent.body).toMatchObject({ error: 'SimulationFailed' });
    expect(sent.body.cause).toMatch(/mined/);
    // On chain: no transaction of the relayer's, no ETH spent, no fee (none was owed).
    expect(await books()).toEqual(before);
    expect(await env.public.readContract({ address: tell(), abi: tellAbi, functionName: 'burned' })).toBe(0n);
  });

  it('simulates from the real sender at the fees it signs with, the next base fee by block override, and lends it no balance it has', async () => {
    await pinBaseFee(2n * GWEI);
    const u = user();
    await mint(u.wallet.address, 10n * FEE);
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [fee()], deployed: false });
    env.proxy!.calls.length = 0;
    const sent = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input } }, key());
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    const runs = probeCallsOf(u.wallet.address);
    expect(runs.length).toBeGreaterThan(0);
    for (const [tx, , state, block] of runs) {
      expect(tx.from?.toLowerCase()).toBe(SENDER.toLowerCase());
      expect(tx.gasPrice).toBeUndefined();
      expect(BigInt(tx.maxFeePerGas)).toBeGreaterThan(0n);
      // The sender's balance is its own: no override of it.
      expect(state?.[SENDER.toLowerCase()] ?? state?.[SENDER]).toBeUndefined();
      expect(block?.baseFeePerGas).toBeDefined();
    }
    // The transaction mined carries the fee fields the simulation ran at.
    const receipt = await waitMined(sent.body.txnHash);
    const mined = await env.public.getTransaction({ hash: receipt });
    const [tx] = runs[0];
    expect(mined.maxPriorityFeePerGas).toBe(BigInt(tx.maxPriorityFeePerGas));
  });

  it('lends a sender that cannot buy the gas a simulation is given exactly that much, and no more', async () => {
    const rich = await env.public.getBalance({ address: SENDER });
    const poor = 10n ** 15n;
    await env.public.request({ method: 'anvil_setBalance' as never, params: [SENDER, `0x${poor.toString(16)}`] as never });
    try {
      await mine(env.rpcUrl);
      const u = user();
      const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [fee()], deployed: false });
      env.proxy!.calls.length = 0;
      // The wallet holds no FUSD: the fee does not arrive, which the simulation must run to find.
      const sent = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input } }, key());
      expect(sent.status, JSON.stringify(sent.body)).toBe(400);
      const runs = probeCallsOf(u.wallet.address);
      expect(runs.length).toBeGreaterThan(0);
      for (const [tx, , state] of runs) {
        const lent = state?.[SENDER.toLowerCase()]?.balance ?? state?.[SENDER]?.balance;
        expect(lent, JSON.stringify(state)).toBeDefined();
        expect(BigInt(lent!)).toBe(BigInt(tx.gas) * BigInt(tx.maxFeePerGas));
        expect(BigInt(lent!)).toBeGreaterThan(poor);
      }
    } finally {
      await env.public.request({ method: 'anvil_setBalance' as never, params: [SENDER, `0x${rich.toString(16)}`] as never });
    }
  });
});

/** The hash of the transaction that mined a meta-transaction, once it has. */
async function waitMined(id: string): Promise<Hex> {
  for (let i = 0; i < 60; i++) {
    const r = await env.call('GetMetaTxnReceipt', { metaTxID: id }, key());
    if (r.body.receipt?.status === 'SUCCEEDED') return r.body.receipt.txnHash;
    if (['FAILED', 'DROPPED'].includes(r.body.receipt?.status)) throw new Error(`${id}: ${r.body.receipt.status}`);
  }
  throw new Error(`${id} was not mined`);
}
