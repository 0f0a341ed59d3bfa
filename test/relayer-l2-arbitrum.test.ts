// The Arbitrum fee model on a real anvil behind a JSON-RPC proxy that plays an Arbitrum node: its
// eth_estimateGas answers carry an L1 component on top of what anvil measured, and it refuses with
// "intrinsic gas too low" a transaction whose gas limit is below its intrinsic gas plus that component
// (the L1 price at the moment of sending). What is judged: the gas limits signed, what the node refused
// (the proxy's count), the receipts on chain and the stored rows.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, parseTransaction, type Hex } from 'viem';
import { intrinsicGas } from '../src/relayer/intake/simulate.ts';
import { resizeWithinCover } from '../src/relayer/engine/l2-gas.ts';
import { classifySendError } from '../src/chain/node-errors.ts';
import { marketFees } from '../src/relayer/engine/gas-price.ts';
import { feeKit } from './support/fee-kit.ts';
import { deployWallets, mintBundles, waitFor, type User } from './support/relay-load.ts';
import { PAYEE, erc20, sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { signedBundle } from './support/sequence-wallet.ts';

let env: RelayerEnv;
let users: User[];
/** The fee token's fixed price in the test relayer: 0.0004 ETH per whole FUSD (6 decimals). */
const WEI_PER_FUSD_UNIT = 400_000_000n;
const L1_GAS = 1_000_000n;
/** The L1 component the node's estimates report, and the one it demands of a transaction sent now. */
const node = { estimate: L1_GAS, send: L1_GAS, refused: 0 };

beforeAll(async () => {
  env = await startRelayerEnv({ proxy: true, feeModel: 'arbitrum' });
  const proxy = env.proxy!;
  proxy.mapAnswers((call, result) => (call.method === 'eth_estimateGas' && typeof result === 'string' ? `0x${(BigInt(result) + node.estimate).toString(16)}` : undefined));
  proxy.addRule((call) => {
    if (call.method !== 'eth_sendRawTransaction') return undefined;
    const tx = parseTransaction(call.params[0] as Hex);
    if ((tx.gas ?? 0n) >= intrinsicGas(tx.data ?? '0x') + node.send) return undefined;
    node.refused++;
    // The node's estimates now see the L1 price it refused at.
    node.estimate = node.send;
    return { kind: 'fail', message: 'intrinsic gas too low' };
  });
  await sponsor(env, 'CONTRACT', env.token);
  users = await deployWallets(env, 3);
}, 120_000);
afterAll(async () => {
  await env?.close();
});

const { key, user, mint } = feeKit(() => env);
const stored = async (id: string) => (await env.services.db.query<Record<string, any>>('SELECT * FROM meta_txns WHERE id = $1', [id.replace(/^0x/, '').toLowerCase()])).rows[0];
const final = (id: string) =>
  waitFor(`${id} final`, async () => {
    const r = await env.call('GetMetaTxnReceipt', { metaTxID: id }, key());
    return ['SUCCEEDED', 'FAILED', 'PARTIALLY_FAILED', 'DROPPED'].includes(r.body.receipt?.status) ? r.body.receipt : undefined;
  });
async function sendMint(u: User) {
  const [item] = await mintBundles(env, [u], 1);
  const r = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: item.bundle.entrypoint, input: item.bundle.input } }, key());
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return String(r.body.txnHash);
}

describe('Arbitrum: the gas limit holds the L1 component', () => {
  it('FeeOptions prices it', async () => {
    const u = user();
    await mint(u.wallet.address, 10n ** 12n);
    const fee = { to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [PAYEE, 1n] }) };
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [fee], deployed: false });
    const gasPrice = await env.public.getGasPrice();
    // Keyless: the project's rule does not apply, the bundle pays.
    const q = await env.call('FeeOptions', { wallet: u.wallet.address, to: b.entrypoint, data: b.input });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const fusd = q.body.options.find((o: any) => o.token.symbol === 'FUSD');
    expect(BigInt(fusd.value) * WEI_PER_FUSD_UNIT).toBeGreaterThanOrEqual(L1_GAS * gasPrice);
  });

  it('intake sizes the limit with the node estimate, and the node takes it the first time', async () => {
    const refusedBefore = node.refused;
    const id = await sendMint(users[0]);
    const row = await stored(id);
    expect(BigInt(row.gas_limit)).toBeGreaterThan(L1_GAS + intrinsicGas(row.input));
    expect((await final(id)).status).toBe('SUCCEEDED');
    expect(node.refused).toBe(refusedBefore);
    const mined = await env.public.getTransactionReceipt({ hash: (await stored(id)).txn_hash });
    expect(mined.status).toBe('success');
  }, 120_000);
});

describe('Arbitrum: "intrinsic gas too low" re-sizes instead of re-sending the same limit', () => {
  it('an L1 rise the sponsor hold still covers: refused once, re-estimated, sent with the larger limit and mined', async () => {
    node.estimate = L1_GAS;
    // Past the 1.25 margin intake left, within the sponsor's hold (the limit at twice the price).
    node.send = L1_GAS + 800_000n;
    const refusedBefore = node.refused;
    const id = await sendMint(users[1]);
    const limitAtIntake = BigInt((await stored(id)).gas_limit);
    expect((await final(id)).status).toBe('SUCCEEDED');
    expect(node.refused).toBe(refusedBefore + 1);
    const row = await stored(id);
    expect(BigInt(row.gas_limit)).toBeGreaterThan(limitAtIntake);
    const tx = await env.public.getTransaction({ hash: row.txn_hash });
    expect(tx.gas).toBe(BigInt(row.gas_limit));
    expect(tx.gas).toBeGreaterThanOrEqual(intrinsicGas(row.input) + node.send);
  }, 120_000);

  it('an L1 rise past what the sponsor hold covers: refused once, then DROPPED with the reason; nothing mined', async () => {
    node.estimate = L1_GAS;
    node.send = 10_000_000n;
    const refusedBefore = node.refused;
    const id = await sendMint(users[2]);
    const receipt = await final(id);
    expect(receipt.status).toBe('DROPPED');
    expect(receipt.revertReason).toMatch(/no longer covers/);
    expect(node.refused).toBe(refusedBefore + 1);
    expect((await stored(id)).block_number).toBeNull();
    const attempts = await env.services.db.query<{ status: string }>('SELECT status FROM relay_txs WHERE meta_txn_id = $1', [id.replace(/^0x/, '')]);
    expect(attempts.rows.map((a) => a.status)).toEqual(['FAILED']);
    node.send = L1_GAS;
    node.estimate = L1_GAS;
  }, 120_000);

  it('the refusal is recognised, and a resize is bounded by the cover at the price priced', () => {
    expect(classifySendError({ code: -32000, message: 'intrinsic gas too low' })).toBe('intrinsicGasTooLow');
    const row = { gas_limit: 100, cover_wei: '300', gas_price_priced: '1' };
    expect(resizeWithinCover(row, 200n, 1.25, 15_000_000)).toEqual({ ok: true, gasLimit: 250n });
    expect(resizeWithinCover(row, 300n, 1.25, 15_000_000).ok).toBe(false);
  });
});

describe('the legacy fee model', () => {
  it('prices with a legacy gas price on a chain whose node reports a base fee', async () => {
    const policy = { capWei: 10n ** 12n, minPriorityWei: 1n, bumpPercent: 10 };
    expect((await marketFees(env.public as never, policy)).type).toBe('eip1559');
    const legacy = await marketFees(env.public as never, { ...policy, legacy: true });
    expect(legacy).toEqual({ type: 'legacy', gasPrice: await env.public.getGasPrice() });
  });
});
