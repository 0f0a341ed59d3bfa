// The OP stack's fee model on a real anvil: the sender pays gasUsed × effectiveGasPrice plus an L1 data fee.
// The GasPriceOracle predeploy is a test contract placed at 0x4200…000F (anvil_setCode) with a settable
// per-byte fee; the receipts' `l1Fee` is added by a JSON-RPC proxy between the relayer and anvil, as an
// OP node's receipts carry it. anvil does not really take the L1 fee from the sender, so the ground truth
// here is what arrived on chain (the fee token at the payment address, the receipts' gas) against the
// L1 fee the receipts report, and the stored ledger and charge rows.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, type Hex } from 'viem';
import { rpcCall } from '../src/devchain/rpc.ts';
import { GAS_PRICE_ORACLE, gasPriceOracleAbi, hexBytes, unsignedTxSize } from '../src/relayer/fee-model.ts';
import { reconcileCost } from '../src/relayer/engine/reconcile.ts';
import { feeKit } from './support/fee-kit.ts';
import { deployWallets, mintBundles, waitFor } from './support/relay-load.ts';
import { PAYEE, erc20, sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { signedBundle, type SequenceTx } from './support/sequence-wallet.ts';

let env: RelayerEnv;
/** The fee token's fixed price in the test relayer: 0.0004 ETH per whole FUSD (6 decimals). */
const WEI_PER_FUSD_UNIT = 400_000_000n;
/** The oracle's L1 price: large against the gas (about 10^16 wei for a bundle), as L1 data dominates an L2 fee. */
const PER_BYTE = 10n ** 13n;
/** The L1 fee every receipt reports (below the oracle's bound for any bundle here). */
const L1_FEE = 3n * 10n ** 15n;
const admin = () => ({ authorization: `Bearer ${env.adminToken}` });

beforeAll(async () => {
  env = await startRelayerEnv({ proxy: true, feeModel: 'opStack' });
  await rpcCall(env.rpcUrl, 'anvil_setCode', [GAS_PRICE_ORACLE, env.chain.artifacts.TestGasPriceOracle!.deployedBytecode]);
  await env.chain.send([{ address: GAS_PRICE_ORACLE, contract: 'TestGasPriceOracle', functionName: 'setPerByte', args: [PER_BYTE] }]);
  // An OP node's receipts carry the L1 data fee the sender paid.
  const withL1 = (r: unknown) => (r && typeof r === 'object' ? { ...r, l1Fee: `0x${L1_FEE.toString(16)}` } : r);
  env.proxy!.mapAnswers((call, result) => {
    if (call.method === 'eth_getTransactionReceipt') return withL1(result);
    if (call.method === 'eth_getBlockReceipts' && Array.isArray(result)) return result.map(withL1);
    return undefined;
  });
  await sponsor(env, 'CONTRACT', env.token);
}, 120_000);
afterAll(async () => {
  await env?.close();
});

const { key, user, mint, balance } = feeKit(() => env);
const fee = (amount: bigint): SequenceTx => ({ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [PAYEE, amount] }) });
/** The oracle's bound for a transaction carrying `input`, as the test reads it from the chain. */
const bound = (input: Hex) => env.public.readContract({ address: GAS_PRICE_ORACLE, abi: gasPriceOracleAbi, functionName: 'getL1FeeUpperBound', args: [BigInt(unsignedTxSize(hexBytes(input)))] });
const stored = async (id: string) => (await env.services.db.query<Record<string, any>>('SELECT * FROM meta_txns WHERE id = $1', [id.replace(/^0x/, '').toLowerCase()])).rows[0];
const final = (id: string) =>
  waitFor(`${id} final`, async () => {
    const r = await env.call('GetMetaTxnReceipt', { metaTxID: id }, key());
    return ['SUCCEEDED', 'FAILED', 'PARTIALLY_FAILED', 'DROPPED'].includes(r.body.receipt?.status) ? r.body.receipt : undefined;
  });
/** The receipt as anvil itself gives it (no proxy): the gas really burnt and its price. */
const chainCost = async (hash: Hex) => {
  const r = await env.public.getTransactionReceipt({ hash });
  return r.gasUsed * r.effectiveGasPrice;
};

describe('OP stack: the L1 data fee is priced before signing', () => {
  it('FeeOptions quotes it, SendMetaTxn refuses a fee that pays only the gas, and the fee that arrives covers gas + the receipt l1Fee', async () => {
    const u = user();
    await mint(u.wallet.address, 10n ** 12n);
    const txs = (f: bigint) => [fee(f)];
    const probe = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: txs(1n), deployed: false });
    const l1Bound = await bound(probe.input as Hex);
    expect(l1Bound).toBeGreaterThan(L1_FEE);

    // Keyless: the project's rule (it sponsors the fee token's calls) does not apply.
    const q = await env.call('FeeOptions', { wallet: u.wallet.address, to: probe.entrypoint, data: probe.input });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const fusd = q.body.options.find((o: any) => o.token.symbol === 'FUSD');
    // The quote covers the L1 bound on top of the gas.
    expect(BigInt(fusd.value) * WEI_PER_FUSD_UNIT).toBeGreaterThanOrEqual(l1Bound);

    // The least fee accepted, from the refusal's own words.
    const refused = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: probe.entrypoint, input: probe.input } });
    expect(refused.status).toBe(402);
    const required = BigInt(/required (\d+)/.exec(refused.body.cause)![1]);
    expect(required * WEI_PER_FUSD_UNIT).toBeGreaterThanOrEqual(l1Bound);
    // Half of it still pays the gas many times over (the L1 bound is most of it), and is refused.
    const half = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: txs(required / 2n), deployed: false });
    const low = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: half.entrypoint, input: half.input } });
    expect(low.status, JSON.stringify(low.body)).toBe(402);

    const paid = (required * 101n) / 100n;
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: txs(paid), deployed: false });
    const before = await balance(PAYEE);
    const sent = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input } });
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    const row0 = await stored(b.id);
    expect(BigInt(row0.cover_wei)).toBeGreaterThanOrEqual(BigInt(row0.gas_limit) * BigInt(row0.gas_price_priced) + l1Bound);
    const receipt = await final(b.id);
    expect(receipt.status).toBe('SUCCEEDED');

    // Ground truth: what arrived at the payment address against the gas burnt and the L1 fee reported.
    const row = await stored(b.id);
    const gas = await chainCost(row.txn_hash);
    const arrived = ((await balance(PAYEE)) - before) * WEI_PER_FUSD_UNIT;
    expect(arrived).toBeGreaterThanOrEqual(gas + L1_FEE);
    expect(row.l1_fee_wei).toBe(L1_FEE.toString());
    expect(row.shortfall_wei).toBeNull();
  }, 120_000);
});

describe('OP stack: sponsored bundles hold the L1 bound and are debited the L1 fee', () => {
  it('a tank that covers the gas but not the L1 bound does not sponsor; a larger one holds it, and the debit and the settled charge are gas + l1Fee', async () => {
    const [u] = await deployWallets(env, 1);
    const [item] = await mintBundles(env, [u], 1);
    const l1Bound = await bound(item.bundle.input as Hex);
    const gasPrice = await env.public.getGasPrice();
    const send = () => env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: item.bundle.entrypoint, input: item.bundle.input } }, key());
    const setBalance = async (wei: bigint) => {
      const now = BigInt((await env.call('GetProjectBalance', { projectId: env.project.id }, admin())).body.balanceWei);
      const d = wei - now;
      const amount = `${d < 0n ? '-' : ''}${(d < 0n ? -d : d) / 10n ** 18n}.${((d < 0n ? -d : d) % 10n ** 18n).toString().padStart(18, '0')}`;
      const r = await env.call('AdjustProjectBalance', { projectId: env.project.id, amount, identifier: `set-${Math.random()}` }, admin());
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    };

    // Room for a 500 000 gas limit at four times the gas price: the gas alone, not the L1 bound.
    const gasOnly = 500_000n * gasPrice * 4n;
    expect(gasOnly).toBeLessThan(l1Bound);
    await setBalance(gasOnly);
    const refused = await send();
    expect(refused.status, JSON.stringify(refused.body)).toBe(402);
    expect(refused.body.cause).toMatch(/not sponsored: project \d+'s balance/);

    await setBalance(10n ** 17n);
    // The dispatcher waits while the hold is read (it is released once mined).
    const dispatcher = env.services.dispatchers[0];
    await dispatcher.stop();
    let id: string;
    try {
      const ok = await send();
      expect(ok.status, JSON.stringify(ok.body)).toBe(200);
      id = String(ok.body.txnHash);
      const held = await env.services.db.query<{ amount_wei: string }>('SELECT amount_wei::text AS amount_wei FROM gas_tank_holds WHERE meta_txn_id = $1', [id]);
      expect(held.rows).toHaveLength(1);
      expect(BigInt(held.rows[0].amount_wei)).toBeGreaterThanOrEqual(2n * l1Bound);
    } finally {
      dispatcher.start();
    }
    expect((await final(id)).status).toBe('SUCCEEDED');

    const row = await stored(id);
    const cost = (await chainCost(row.txn_hash)) + L1_FEE;
    const debit = await waitFor('the debit', async () => {
      const r = await env.services.db.query<{ amount_wei: string; cost_wei: string }>(
        "SELECT amount_wei::text AS amount_wei, cost_wei::text AS cost_wei FROM gas_tank_ledger WHERE meta_txn_id = $1 AND kind = 'debit'",
        [id],
      );
      return r.rows[0];
    });
    expect(BigInt(debit.cost_wei)).toBe(cost);
    expect(-BigInt(debit.amount_wei)).toBe(cost);
    expect(BigInt((await env.call('GetProjectBalance', { projectId: env.project.id }, admin())).body.balanceWei)).toBe(10n ** 17n - cost);
    const charge = await env.services.db.query<{ wei: string }>('SELECT wei::text AS wei FROM sponsor_charges WHERE meta_txn_id = $1', [id]);
    expect(charge.rows.map((c) => BigInt(c.wei))).toEqual([cost]);
    // The cost report counts the L1 fee.
    const list = await env.call('GetMetaTransactions', { projectId: env.project.id, page: { pageSize: 100 } }, key());
    const listed = list.body.transactions.find((t: any) => t.metaTxnID === id.replace(/^0x/, ''));
    expect(BigInt(listed.cost)).toBe(cost);
  }, 120_000);
});

describe('OP stack: the reconcile counts the L1 fee', () => {
  it('an L1 fee past the cover is a price shortfall, not a gas one', () => {
    const m = { cover_wei: '1000', gas_price_priced: '1' };
    expect(reconcileCost(m, 900n, 1n)).toEqual({ shortfallWei: null, kind: null });
    expect(reconcileCost(m, 900n, 1n, 300n)).toEqual({ shortfallWei: 200n, kind: 'price' });
    expect(reconcileCost(m, 1100n, 1n, 300n)).toEqual({ shortfallWei: 400n, kind: 'gas' });
  });
});
