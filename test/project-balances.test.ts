// Project balances (gas tanks) end to end on a real anvil with the Sequence v2 contracts: the admin
// methods, a project at zero that is not sponsored (nothing queued, senders' ETH unchanged), 50
// concurrent sponsored bundles that never overdraw and whose debits add up to the chain's actual cost
// (receipts' gasUsed × effectiveGasPrice), a tank's markup, and a reorg that reverses a debit.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseEther, type Hex } from 'viem';
import { mine, revert, setAutomine, setNextBaseFee, snapshot, txpoolContent, txpoolHashes } from './support/anvil-control.ts';
import { sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { allFinal, deployWallets, mintBundles, waitFor, type LoadItem, type User } from './support/relay-load.ts';
import { holdAmount } from '../src/relayer/balances/index.ts';
import { balanceHolds } from '../src/relayer/balances/holds.ts';
import { openDb } from '../src/store/db.ts';
import { TEST_DB } from './support/env.ts';
import { rpc } from './support/service.ts';

let env: RelayerEnv;
let users: User[];
let nextUser = 0;
const admin = () => ({ authorization: `Bearer ${env.adminToken}` });

beforeAll(async () => {
  // Batches of up to 4: members share their transaction's gas, and the debits must still add up. A slot the
  // base fee outruns waits for it to fall here (unblocking a stuck nonce is relayer-base-fee-rise's).
  env = await startRelayerEnv({ relayer: { batchSize: 4, confirmations: 2, unblockAfterBlocks: 1_000 } });
  await sponsor(env, 'CONTRACT', env.token);
  users = await deployWallets(env, 70);
}, 180_000);

afterAll(async () => {
  await setAutomine(env.rpcUrl, true).catch(() => undefined);
  await env?.close();
});

const take = (n: number) => {
  const out = users.slice(nextUser, nextUser + n);
  nextUser += n;
  return out;
};

async function ledger(projectId = env.project.id) {
  const r = await env.services.db.query<{
    id: string;
    kind: string;
    amount_wei: string;
    balance_wei: string | null;
    meta_txn_id: string | null;
    cost_wei: string | null;
    txn_hash: string | null;
    reverses: string | null;
  }>(
    `SELECT id::text AS id, kind, amount_wei::text AS amount_wei, balance_wei::text AS balance_wei, meta_txn_id, cost_wei::text AS cost_wei, txn_hash, reverses::text AS reverses
       FROM gas_tank_ledger l WHERE project_id = $1 AND chain_id = $2 ORDER BY l.id`,
    [projectId, env.chainId],
  );
  return r.rows;
}

async function tankRow(projectId = env.project.id) {
  const r = await env.services.db.query<{ id: string; balance_wei: string; unlimited: boolean }>(
    'SELECT id::text AS id, balance_wei::text AS balance_wei, unlimited FROM gas_tanks WHERE project_id = $1 AND chain_id = $2',
    [projectId, env.chainId],
  );
  return r.rows[0];
}

async function holds() {
  return Number((await env.services.db.query<{ n: string }>('SELECT count(*)::text AS n FROM gas_tank_holds')).rows[0].n);
}

async function metaCount() {
  return Number((await env.services.db.query<{ n: string }>('SELECT count(*)::text AS n FROM meta_txns WHERE chain_id = $1', [env.chainId])).rows[0].n);
}

/** Sets the project's balance to exactly `wei` with one adjustment. */
async function setBalance(wei: bigint, projectId = env.project.id) {
  const now = BigInt((await env.call('GetProjectBalance', { projectId }, admin())).body.balanceWei);
  if (now === wei) return;
  const r = await env.call('AdjustProjectBalance', { projectId, amount: weiToDecimal(wei - now), identifier: `set-${Math.random()}` }, admin());
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  expect(r.body.balanceWei).toBe(wei.toString());
}

function weiToDecimal(wei: bigint): string {
  const neg = wei < 0n;
  const a = neg ? -wei : wei;
  const frac = (a % 10n ** 18n).toString().padStart(18, '0').replace(/0+$/, '');
  return `${neg ? '-' : ''}${a / 10n ** 18n}${frac ? `.${frac}` : ''}`;
}

const send = (item: LoadItem, key = env.accessKey) =>
  env.call('SendMetaTxn', { call: { walletAddress: item.user.wallet.address, contract: item.bundle.entrypoint, input: item.bundle.input } }, { 'x-access-key': key });

describe('project balances: admin methods', () => {
  it('are admin-token protected: no token and a project access key are refused', async () => {
    expect((await env.call('GetProjectBalance', { projectId: env.project.id })).status).toBe(401);
    const withKey = await env.call('AdjustProjectBalance', { projectId: env.project.id, amount: 1, identifier: 'x' }, { 'x-access-key': env.accessKey });
    expect([401, 403]).toContain(withKey.status);
    expect(await ledger()).toEqual([]);
  });

  it('AdjustProjectBalance credits exactly, once per identifier; bad amounts are clear errors that write nothing', async () => {
    const before = await env.call('GetProjectBalance', { projectId: env.project.id }, admin());
    expect(before.status).toBe(200);
    expect(before.body).toMatchObject({ balance: 0, balanceWei: '0', limited: false, gasTankId: null });

    const first = await env.call('AdjustProjectBalance', { projectId: env.project.id, amount: 0.1, identifier: 'invoice-1' }, admin());
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body).toMatchObject({ balance: 0.1, balanceWei: '100000000000000000', replay: false });
    const again = await env.call('AdjustProjectBalance', { projectId: env.project.id, amount: 0.1, identifier: 'invoice-1' }, admin());
    expect(again.body).toMatchObject({ balanceWei: '100000000000000000', replay: true });
    const clash = await env.call('AdjustProjectBalance', { projectId: env.project.id, amount: 0.2, identifier: 'invoice-1' }, admin());
    expect(clash.status).toBe(409);

    for (const amount of [1e-19, 'abc', 0, '1e400', -5]) {
      const r = await env.call('AdjustProjectBalance', { projectId: env.project.id, amount, identifier: `bad-${String(amount)}` }, admin());
      expect(r.status, `${amount}: ${JSON.stringify(r.body)}`).toBe(400);
      expect(r.body.cause ?? r.body.msg).toBeTruthy();
    }
    // A field the schema does not know is ignored (as Sequence's servers do) and named in the answer; a known one of a wrong type is refused (above).
    const unknownField = await env.call('AdjustProjectBalance', { projectId: env.project.id, amount: 0.1, identifier: 'invoice-1', currency: 'USD' }, admin());
    expect(unknownField.body).toMatchObject({ replay: true, ignoredFields: ['currency'] });
    expect((await env.call('AdjustProjectBalance', { projectId: 999_999, amount: 1, identifier: 'x' }, admin())).status).toBe(401);

    const rows = await ledger();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ kind: 'adjustment', amount_wei: '100000000000000000', balance_wei: '100000000000000000' });
    const now = await env.call('GetProjectBalance', { projectId: env.project.id }, admin());
    expect(now.body).toMatchObject({ balance: 0.1, limited: true });
  });

  it('gas-tank methods: AdjustGasTankBalance is idempotent by nonce, a nonce ahead or reused for another amount is refused', async () => {
    const p = await env.services.projects.create(`tank-${Math.random().toString(36).slice(2, 8)}`);
    const added = await env.call('AddGasTank', { name: 'p2', feeMarkupFactor: 1.5, projectId: p.id }, admin());
    expect(added.status, JSON.stringify(added.body)).toBe(200);
    const id = added.body.gasTank.id;
    expect(added.body.gasTank).toMatchObject({ chainId: env.chainId, name: 'p2', currentBalance: 0, unlimited: false, feeMarkupFactor: 1.5, projectId: p.id });
    expect((await env.call('AddGasTank', { name: 'dup', feeMarkupFactor: 1, projectId: p.id }, admin())).status).toBe(409);
    expect((await env.call('AddGasTank', { name: 'bad', feeMarkupFactor: 0 }, admin())).status).toBe(400);

    expect((await env.call('NextGasTankBalanceAdjustmentNonce', { id }, admin())).body).toEqual({ nonce: 0 });
    const a0 = await env.call('AdjustGasTankBalance', { id, nonce: 0, amount: 2 }, admin());
    expect(a0.status, JSON.stringify(a0.body)).toBe(200);
    expect(a0.body.adjustment).toMatchObject({ gasTankId: id, nonce: 0, amount: 2, totalBalance: 2 });
    const replay = await env.call('AdjustGasTankBalance', { id, nonce: 0, amount: 2 }, admin());
    expect(replay.body).toMatchObject({ status: true, replay: true, adjustment: { nonce: 0, totalBalance: 2 } });
    expect((await env.call('AdjustGasTankBalance', { id, nonce: 0, amount: 3 }, admin())).status).toBe(409);
    expect((await env.call('AdjustGasTankBalance', { id, nonce: 5, amount: 3 }, admin())).status).toBe(400);
    expect((await env.call('AdjustGasTankBalance', { id, nonce: 1, amount: -2.5 }, admin())).status).toBe(400); // below zero
    const a1 = await env.call('AdjustGasTankBalance', { id, nonce: 1, amount: '-0.5' }, admin());
    expect(a1.body.adjustment).toMatchObject({ nonce: 1, amount: -0.5, totalBalance: 1.5, totalBalanceWei: parseEther('1.5').toString() });

    // Ground truth: the stored balance and the ledger, whatever the answers said.
    expect((await tankRow(p.id)).balance_wei).toBe(parseEther('1.5').toString());
    expect((await ledger(p.id)).map((e) => e.amount_wei)).toEqual([parseEther('2').toString(), parseEther('-0.5').toString()]);

    expect((await env.call('GetGasTankBalanceAdjustment', { id, nonce: 1 }, admin())).body.adjustment).toMatchObject({ nonce: 1, amount: -0.5 });
    expect((await env.call('GetGasTankBalanceAdjustment', { id, nonce: 9 }, admin())).status).toBe(404); // NotFound 3000 is HTTP 404
    const list = await env.call('ListGasTankBalanceAdjustments', { id, page: { pageSize: 1 } }, admin());
    expect(list.body.adjustments.map((x: { nonce: number }) => x.nonce)).toEqual([1]);
    expect(list.body.page.more).toBe(true);
    const upd = await env.call('UpdateGasTank', { id, unlimited: true, name: 'renamed' }, admin());
    expect(upd.body.gasTank).toMatchObject({ unlimited: true, name: 'renamed', feeMarkupFactor: 1.5 });
    expect((await env.call('GetGasTank', { id }, admin())).body.gasTank).toMatchObject({ id, currentBalance: 1.5, unlimited: true });
    expect((await env.call('GetGasTank', { id: 987_654 }, admin())).status).toBe(404);
  });
});

describe('project balances: sponsorship', () => {
  it('a limited project at zero is not sponsored: FeeOptions says why, SendMetaTxn queues nothing, the senders spend nothing', async () => {
    await setBalance(0n);
    const [item] = await mintBundles(env, take(1), 1);
    const senders = env.services.relayers.get(env.chainId)!.senders;
    const before = await Promise.all(senders.map((a) => Promise.all([env.public.getBalance({ address: a }), env.public.getTransactionCount({ address: a })])));
    const queued = await metaCount();

    const fo = await env.call('FeeOptions', { wallet: item.user.wallet.address, to: item.bundle.entrypoint, data: item.bundle.input }, { 'x-access-key': env.accessKey });
    expect(fo.status, JSON.stringify(fo.body)).toBe(200);
    expect(fo.body.sponsored).toBe(false);
    expect(fo.body.sponsorship).toMatchObject({ sponsored: false, stoppedBy: { limit: 'projectBalance' } });
    expect(fo.body.sponsorship.reason).toMatch(/balance on this network is 0 /);

    const r = await send(item);
    expect(r.status).toBe(402);
    expect(r.body.cause ?? r.body.msg).toMatch(/not sponsored: project \d+'s balance/);
    expect(await metaCount()).toBe(queued);
    expect(await holds()).toBe(0);
    const after = await Promise.all(senders.map((a) => Promise.all([env.public.getBalance({ address: a }), env.public.getTransactionCount({ address: a })])));
    expect(after).toEqual(before);
  }, 60_000);

  it("50 concurrent sponsored bundles never overdraw, and the debits are exactly the receipts' gasUsed share × effectiveGasPrice", async () => {
    const started = new Date(Date.now() - 1000);
    const items = await mintBundles(env, take(50), 1);
    // No blocks during intake: the gas price, and so each bundle's hold, stays put.
    await setAutomine(env.rpcUrl, false);
    let results: { status: number; body: any }[];
    let gasPrice = 0n;
    let funding = 0n;
    try {
      // About 20 bundles' holds (a gas limit near 120 000 at twice the gas price, as intake sizes them).
      gasPrice = await env.public.getGasPrice();
      funding = holdAmount(120_000n, gasPrice, { feeMarkupFactor: '1' }) * 20n;
      await setBalance(funding);
      results = await Promise.all(items.map((it) => send(it)));
    } finally {
      await setAutomine(env.rpcUrl, true);
    }
    const accepted = results.filter((r) => r.status === 200).map((r) => String(r.body.txnHash));
    const refused = results.filter((r) => r.status !== 200);
    for (const r of refused) {
      expect(r.status).toBe(402);
      expect(r.body.cause ?? r.body.msg).toMatch(/balance on this network/);
    }
    expect(accepted.length).toBeGreaterThan(0);
    expect(refused.length).toBeGreaterThan(0);
    // Intake never held more than the balance: the accepted bundles' holds (gas limit at twice the gas
    // price, which no block moved during intake) add up to at most the funding.
    const limits = await env.services.db.query<{ gas_limit: string }>('SELECT gas_limit::text AS gas_limit FROM meta_txns WHERE chain_id = $1 AND id = ANY($2)', [
      env.chainId,
      accepted.map((x) => x.replace(/^0x/, '')),
    ]);
    expect(limits.rows).toHaveLength(accepted.length);
    const heldAtIntake = limits.rows.reduce((a, r) => a + holdAmount(BigInt(r.gas_limit), gasPrice, { feeMarkupFactor: '1' }), 0n);
    expect(heldAtIntake).toBeLessThanOrEqual(funding);

    // Drive the chain until every accepted one is mined and final (anvil mines a block per transaction).
    await allFinal(env, accepted, 120_000);
    const settled = await env.services.db.query<{ id: string; status: string; txn_hash: Hex; batch_index: number | null; gas_estimated: string; sponsored: boolean }>(
      'SELECT id, status, txn_hash, batch_index, gas_estimated::text AS gas_estimated, sponsored FROM meta_txns WHERE chain_id = $1 AND id = ANY($2)',
      [env.chainId, accepted.map((x) => x.replace(/^0x/, ''))],
    );
    expect(settled.rows.every((r) => r.status === 'SUCCEEDED' && r.sponsored)).toBe(true);
    await waitFor('holds released', async () => (await holds()) === 0, 20_000, 100);

    // The chain's cost: per mined transaction, its gasUsed × effectiveGasPrice, from the node's receipt.
    const byTx = new Map<Hex, typeof settled.rows>();
    for (const r of settled.rows) byTx.set(r.txn_hash, [...(byTx.get(r.txn_hash) ?? []), r]);
    expect([...byTx.values()].some((ms) => ms.length > 1)).toBe(true); // some were batched
    let chainCost = 0n;
    const rows = await ledger();
    const debitOf = new Map(rows.filter((e) => e.kind === 'debit').map((e) => [e.meta_txn_id!, -BigInt(e.amount_wei)]));
    for (const [hash, members] of byTx) {
      const rc = await env.public.getTransactionReceipt({ hash });
      const txCost = rc.gasUsed * rc.effectiveGasPrice;
      chainCost += txCost;
      // Every member of the transaction is sponsored here: their debits add up to the transaction exactly.
      expect(members.reduce((a, m) => a + debitOf.get(m.id)!, 0n)).toBe(txCost);
    }
    const debits = rows.filter((e) => e.kind !== 'adjustment' && e.meta_txn_id && accepted.includes(e.meta_txn_id)).reduce((a, e) => a - BigInt(e.amount_wei), 0n);
    expect(debits).toBe(chainCost);

    // Never overdrawn: the balance after every entry stayed at or above zero, and it is the funding less the cost.
    for (const e of rows) expect(BigInt(e.balance_wei!)).toBeGreaterThanOrEqual(0n);
    // A running balance, in the order written (ids), though a status write posts many entries at once.
    for (let i = 1; i < rows.length; i++) expect(BigInt(rows[i]!.balance_wei!), rows[i]!.id).toBe(BigInt(rows[i - 1]!.balance_wei!) + BigInt(rows[i]!.amount_wei));
    const tank = await tankRow();
    const credited = BigInt(rows.filter((e) => e.kind === 'adjustment').reduce((a, e) => a + BigInt(e.amount_wei), 0n));
    const allDebits = rows.filter((e) => e.kind !== 'adjustment').reduce((a, e) => a + BigInt(e.amount_wei), 0n);
    expect(BigInt(tank.balance_wei)).toBe(credited + allDebits);
    expect(BigInt(tank.balance_wei)).toBeGreaterThanOrEqual(0n);

    // GetTransactionCost over the run is the sum of its debits; over an earlier day, nothing.
    const cost = await env.call('GetTransactionCost', { projectId: env.project.id, from: started.toISOString(), to: new Date(Date.now() + 60_000).toISOString() }, admin());
    expect(cost.status, JSON.stringify(cost.body)).toBe(200);
    expect(BigInt(cost.body.costWei)).toBe(chainCost);
    expect(cost.body.transactions).toBe(accepted.length);
    const before = await env.call('GetTransactionCost', { projectId: env.project.id, from: '2020-01-01T00:00:00Z', to: '2020-01-02T00:00:00Z' }, admin());
    expect(before.body).toMatchObject({ cost: 0, costWei: '0' });
    expect((await env.call('GetTransactionCost', { projectId: env.project.id, from: 'yesterday', to: '2020-01-02' }, admin())).status).toBe(400);
  }, 240_000);

  it("a tank's markup: the debit is the gas cost times its factor, rounded up; the cost before markup is kept beside it", async () => {
    const p = await env.services.projects.create(`markup-${Math.random().toString(36).slice(2, 8)}`);
    const key = (await env.services.accessKeys.create(p.id, 'k')).key;
    await sponsor(env, 'CONTRACT', env.token, p.id);
    const added = await env.call('AddGasTank', { name: 'marked up', feeMarkupFactor: '1.5', projectId: p.id }, admin());
    await env.call('AdjustGasTankBalance', { id: added.body.gasTank.id, nonce: 0, amount: 1 }, admin());
    const [item] = await mintBundles(env, take(1), 1);
    const r = await send(item, key);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    await allFinal(env, [r.body.txnHash]);
    const row = (await env.services.metaTxns.find(env.chainId, r.body.txnHash))!;
    const rc = await env.public.getTransactionReceipt({ hash: row.txn_hash as Hex });
    const cost = BigInt(row.gas_used!) * rc.effectiveGasPrice;
    const [, debit] = await ledger(p.id);
    expect(debit).toMatchObject({ kind: 'debit', cost_wei: cost.toString(), amount_wei: (-((cost * 3n + 1n) / 2n)).toString() });
    expect((await tankRow(p.id)).balance_wei).toBe((parseEther('1') - (cost * 3n + 1n) / 2n).toString());
  }, 60_000);

  it('a reorg that drops the mined transaction reverses its debit; mined again, it is debited again, once', async () => {
    await setBalance(parseEther('1'));
    const dispatcher = env.services.dispatchers[0];
    const head = async () => Number(await env.public.getBlockNumber({ cacheTime: 0 }));
    const mineAndSweep = async () => {
      await mine(env.rpcUrl, 1);
      const h = await head();
      await waitFor(`the sweep of block ${h}`, async () => dispatcher.head >= h, 20_000, 10);
    };
    await setAutomine(env.rpcUrl, false);
    try {
      const snap = await snapshot(env.rpcUrl);
      const [item] = await mintBundles(env, take(1), 1);
      const r = await send(item);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      const id = String(r.body.txnHash).replace(/^0x/, '');
      const meta = async () => (await env.services.metaTxns.find(env.chainId, id))!;
      await waitFor('the broadcast', async () => (await meta()).status === 'SENT' && txpoolHashes(await txpoolContent(env.rpcUrl)).includes((await meta()).txn_hash!), 20_000);
      await mineAndSweep();
      await waitFor('SUCCEEDED', async () => (await meta()).status === 'SUCCEEDED', 20_000);
      const mined = await meta();
      const cost = BigInt(mined.gas_used!) * BigInt(mined.gas_price!);
      const mine1 = (await ledger()).filter((e) => e.meta_txn_id === id);
      expect(mine1.map((e) => [e.kind, e.amount_wei])).toEqual([['debit', (-cost).toString()]]);
      const afterDebit = BigInt((await tankRow()).balance_wei);

      await revert(env.rpcUrl, snap);
      await waitFor('the reorg seen (back to SENT)', async () => (await meta()).status === 'SENT', 20_000);
      const reversed = (await ledger()).filter((e) => e.meta_txn_id === id);
      expect(reversed.map((e) => [e.kind, e.amount_wei])).toEqual([
        ['debit', (-cost).toString()],
        ['reversal', cost.toString()],
      ]);
      expect(reversed[1].reverses).toBe(reversed[0].id);
      expect(BigInt((await tankRow()).balance_wei)).toBe(afterDebit + cost);
      // While it waits to be mined again, what it cost stays held.
      expect(await holds()).toBe(1);

      const hash = (await meta()).txn_hash!;
      await waitFor('the re-broadcast', async () => txpoolHashes(await txpoolContent(env.rpcUrl)).includes(hash), 20_000);
      await mineAndSweep();
      await waitFor('SUCCEEDED again', async () => (await meta()).status === 'SUCCEEDED', 20_000);
      const again = await meta();
      const rc = await env.public.getTransactionReceipt({ hash: again.txn_hash as Hex });
      const cost2 = rc.gasUsed * rc.effectiveGasPrice; // a single meta-transaction has its transaction's gas
      const final = (await ledger()).filter((e) => e.meta_txn_id === id);
      expect(final.map((e) => e.kind)).toEqual(['debit', 'reversal', 'debit']);
      expect(final.reduce((a, e) => a + BigInt(e.amount_wei), 0n)).toBe(-cost2);
      expect(BigInt((await tankRow()).balance_wei)).toBe(afterDebit + cost - cost2);
      expect(await holds()).toBe(0);
    } finally {
      await setAutomine(env.rpcUrl, true);
    }
  }, 120_000);
});

describe('project balances: a base fee that climbs between intake and inclusion', () => {
  const GWEI = 1_000_000_000n;
  const dispatcher = () => env.services.dispatchers[0];
  const senders = () => env.services.relayers.get(env.chainId)!.senders;
  const nonces = () => Promise.all(senders().map((a) => env.public.getTransactionCount({ address: a, blockTag: 'pending' })));
  /** The next block's base fee pinned, then a block mined (anvil lowers it again after every near-empty block). */
  const pinBaseFee = async (wei: bigint) => {
    await setNextBaseFee(env.rpcUrl, wei);
    await mine(env.rpcUrl);
  };
  const attempts = async (id: string) =>
    (
      await env.services.db.query<{ max_fee: string | null; gas_price: string | null; gas_limit: string }>(
        `SELECT t.max_fee::text AS max_fee, t.gas_price::text AS gas_price, t.gas_limit::text AS gas_limit FROM relay_txs t
           JOIN meta_txns m ON m.chain_id = t.chain_id AND m.sender = t.sender AND m.txn_nonce = t.nonce WHERE m.chain_id = $1 AND m.id = $2`,
        [env.chainId, id],
      )
    ).rows;
  /** Ground truth on the balance: every ledger entry's balance after, and the tank's, at or above zero; the debit within the hold. */
  async function neverOverdrawn(id: string, hold: bigint) {
    const rows = await ledger();
    for (const e of rows) expect(BigInt(e.balance_wei!)).toBeGreaterThanOrEqual(0n);
    expect(BigInt((await tankRow()).balance_wei)).toBeGreaterThanOrEqual(0n);
    const debit = rows.filter((e) => e.meta_txn_id === id && e.kind === 'debit').reduce((a, e) => a - BigInt(e.amount_wei), 0n);
    expect(debit).toBeGreaterThan(0n);
    expect(debit).toBeLessThanOrEqual(hold);
  }

  it('a bundle whose hold no longer pays for its gas limit at the base fee is not signed until it does; the debit stays within the hold', async () => {
    await pinBaseFee(GWEI);
    const [item] = await mintBundles(env, take(1), 1);
    await dispatcher().stop();
    let id = '';
    let row: Awaited<ReturnType<typeof env.services.metaTxns.find>>;
    const before = await nonces();
    try {
      const gasPrice = await env.public.getGasPrice();
      // Just this bundle's hold: nothing else in the balance to overdraw quietly.
      await setBalance(holdAmount(200_000n, gasPrice, { feeMarkupFactor: '1' }));
      const r = await send(item);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      id = String(r.body.txnHash).replace(/^0x/, '');
      row = (await env.services.metaTxns.find(env.chainId, id))!;
      // The base fee climbs to three times what the hold pays per gas of its limit.
      await pinBaseFee((BigInt(row.cover_wei!) / BigInt(row.gas_limit)) * 3n);
    } finally {
      dispatcher().start();
    }
    const ceiling = BigInt(row!.cover_wei!) / BigInt(row!.gas_limit);
    const hold = BigInt(row!.cover_wei!);
    const waiting = await waitFor('the wait to be recorded', async () => {
      const m = await env.services.metaTxns.find(env.chainId, id);
      return m?.stalled ? m : undefined;
    });
    expect(waiting.status).toBe('QUEUED');
    expect(waiting.stalled).toMatch(/pays for at most .* gwei per gas over its gas limit, below the base fee of .* gwei: it waits for the base fee to fall/);
    // Nothing signed: no sender's nonce moved, no attempt recorded, the hold still set aside.
    expect(await nonces()).toEqual(before);
    expect(await attempts(id)).toEqual([]);
    expect(await holds()).toBe(1);

    // The base fee falls back under what the hold pays for: it goes, within it.
    await pinBaseFee(GWEI);
    await allFinal(env, [id], 60_000);
    const mined = (await env.services.metaTxns.find(env.chainId, id))!;
    expect(mined.status).toBe('SUCCEEDED');
    for (const a of await attempts(id)) expect(BigInt(a.max_fee ?? a.gas_price!)).toBeLessThanOrEqual(ceiling);
    const rc = await env.public.getTransactionReceipt({ hash: mined.txn_hash as Hex });
    expect(rc.gasUsed * rc.effectiveGasPrice).toBeLessThanOrEqual(hold);
    expect(mined.shortfall_wei).toBeNull();
    await neverOverdrawn(id, hold);
  }, 120_000);

  it('a signed bundle the base fee outruns is replaced up to what its hold pays for and no further: never mined at a loss, the balance never below zero', async () => {
    await pinBaseFee(GWEI);
    const [item] = await mintBundles(env, take(1), 1);
    const gasPrice = await env.public.getGasPrice();
    await setBalance(holdAmount(200_000n, gasPrice, { feeMarkupFactor: '1' }));
    await setAutomine(env.rpcUrl, false);
    const head = async () => Number(await env.public.getBlockNumber({ cacheTime: 0 }));
    const blockAt = async (baseFee: bigint) => {
      await pinBaseFee(baseFee);
      const h = await head();
      await waitFor(`the sweep of block ${h}`, async () => dispatcher().head >= h, 20_000, 10);
    };
    try {
      const r = await send(item);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      const id = String(r.body.txnHash).replace(/^0x/, '');
      const meta = async () => (await env.services.metaTxns.find(env.chainId, id))!;
      await waitFor('the first attempt in the pool', async () => (await meta()).status === 'SENT' && txpoolHashes(await txpoolContent(env.rpcUrl)).includes((await meta()).txn_hash!), 20_000);
      const row = await meta();
      const ceiling = BigInt(row.cover_wei!) / BigInt(row.gas_limit);
      const hold = BigInt(row.cover_wei!);
      const [first] = await attempts(id);
      expect(BigInt(first.max_fee!)).toBeLessThan(ceiling);

      // The base fee at four times what the hold pays per gas, for four times as many blocks as a
      // replacement waits (resubmitAfterBlocks = 3): the market price is far above the ceiling, and a
      // replacement would have to offer it to be mined. Nothing above the ceiling is signed; it waits.
      for (let i = 0; i < 12; i++) await blockAt(ceiling * 4n);
      for (const a of await attempts(id)) expect(BigInt(a.max_fee!) * BigInt(a.gas_limit)).toBeLessThanOrEqual(hold);
      expect((await meta()).status).toBe('SENT');
      expect((await meta()).stalled).toMatch(/what its fee or sponsorship pays for over its gas limit/);

      // Every later nonce of the stalled slot's sender would wait behind it: bundles that pay for today's
      // base fee go to the other sender and are mined while the stalled one still waits. Eight at once:
      // by load alone, some of them would go to the stalled sender.
      const stuck = row.sender!.toLowerCase();
      const later = await mintBundles(env, take(8), 1);
      await setBalance(BigInt((await tankRow()).balance_wei) + holdAmount(200_000n, await env.public.getGasPrice(), { feeMarkupFactor: '1' }) * 8n);
      const laterIds = (await Promise.all(later.map((it) => send(it)))).map((r) => {
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        return String(r.body.txnHash).replace(/^0x/, '');
      });
      const laterRows = () => Promise.all(laterIds.map(async (x) => (await env.services.metaTxns.find(env.chainId, x))!));
      for (let i = 0; i < 15 && (await laterRows()).some((m) => m.status !== 'SUCCEEDED'); i++) await blockAt(ceiling * 4n);
      for (const m of await laterRows()) {
        expect(m.status).toBe('SUCCEEDED');
        expect(m.sender!.toLowerCase()).not.toBe(stuck);
      }
      expect((await meta()).status).toBe('SENT');

      // Between the first attempt's max fee and the ceiling: replaced at no more than the ceiling, and mined.
      const between = (BigInt(first.max_fee!) + ceiling) / 2n;
      for (let i = 0; i < 6 && (await meta()).status === 'SENT'; i++) await blockAt(between);
      await setAutomine(env.rpcUrl, true);
      await mine(env.rpcUrl);
      await allFinal(env, [id], 60_000);
      const tried = await attempts(id);
      expect(tried.length).toBeGreaterThan(1);
      for (const a of tried) expect(BigInt(a.max_fee!)).toBeLessThanOrEqual(ceiling);
      const mined = await meta();
      expect(mined.status).toBe('SUCCEEDED');
      const rc = await env.public.getTransactionReceipt({ hash: mined.txn_hash as Hex });
      expect(rc.effectiveGasPrice).toBeGreaterThanOrEqual((between * 7n) / 8n); // mined at the raised base fee, not after it fell
      expect(rc.gasUsed * rc.effectiveGasPrice).toBeLessThanOrEqual(hold);
      await neverOverdrawn(id, hold);
    } finally {
      await setAutomine(env.rpcUrl, true);
    }
  }, 180_000);
});

describe('project balances: holds under contention', () => {
  it('50 holds racing from two database clients (two processes) take exactly what the balance covers, and give it all back', async () => {
    const p = await env.services.projects.create(`race-${Math.random().toString(36).slice(2, 8)}`);
    const gasLimit = 100_000n;
    const gasPrice = 1_000_000_000n;
    const need = holdAmount(gasLimit, gasPrice, { feeMarkupFactor: '1' });
    const r = await env.call('AdjustProjectBalance', { projectId: p.id, amount: weiToDecimal(need * 10n), identifier: 'race' }, admin());
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    // PGlite is one process's database: there the second client is the same one.
    const other = TEST_DB === 'postgres' ? await openDb(env.testDb.location) : env.services.db;
    try {
      const clients = [balanceHolds(env.services.db), balanceHolds(other)];
      const cover = { sponsored: true, ruleIds: [1] };
      const out = await Promise.all(
        Array.from({ length: 50 }, (_, i) => clients[i % 2].hold(cover, async () => {}, { projectId: p.id, chainId: env.chainId, metaTxnId: `race-${i}`, gasLimit, gasPrice })),
      );
      const won = out.filter((o) => o.cover.sponsored);
      expect(won).toHaveLength(10);
      for (const o of out.filter((x) => !x.cover.sponsored)) expect(o.cover.reason).toMatch(/not enough for this bundle/);
      const held = await env.services.db.query<{ n: string; sum: string }>(
        'SELECT count(*)::text AS n, COALESCE(SUM(amount_wei), 0)::text AS sum FROM gas_tank_holds h JOIN gas_tanks t ON t.id = h.tank_id WHERE t.project_id = $1',
        [p.id],
      );
      expect(held.rows[0]).toEqual({ n: '10', sum: (need * 10n).toString() });
      await Promise.all(won.map((o) => o.refund()));
      expect((await env.services.db.query<{ n: string }>('SELECT count(*)::text AS n FROM gas_tank_holds h JOIN gas_tanks t ON t.id = h.tank_id WHERE t.project_id = $1', [p.id])).rows[0].n).toBe('0');
      // The balance itself never moved: holds set aside, only debits take.
      expect((await tankRow(p.id)).balance_wei).toBe((need * 10n).toString());
    } finally {
      if (other !== env.services.db) await other.close();
    }
  });
});

describe('project balances: the console', () => {
  const consoleCall = (method: string, body: unknown) => rpc(env.app, `/rpc/Console/${method}`, body, admin());

  it('shows the balance, the ledger of adjustments, debits and reversals, and spend per day, all as stored', async () => {
    const network = env.services.networks.list().find((c) => c.chainId === env.chainId)!.name;
    const bal = await consoleCall('GetProjectBalances', { projectId: env.project.id });
    expect(bal.status, JSON.stringify(bal.body)).toBe(200);
    const tank = await tankRow();
    expect(bal.body.balances).toEqual([expect.objectContaining({ chainId: env.chainId, limited: true, tank: expect.objectContaining({ balanceWei: tank.balance_wei }) })]);

    const stored = await ledger();
    const listed = await consoleCall('ListProjectLedger', { projectId: env.project.id, chainID: network, pageSize: 200 });
    expect(listed.body.entries.map((e: { id: number; amountWei: string }) => [String(e.id), e.amountWei])).toEqual(stored.map((e) => [e.id, e.amount_wei]).reverse());
    expect(new Set(listed.body.entries.map((e: { kind: string }) => e.kind))).toEqual(new Set(['adjustment', 'debit', 'reversal']));

    const spend = await consoleCall('ProjectSpendByDay', { projectId: env.project.id, chainID: network, days: 7 });
    const spentWei = spend.body.days.reduce((a: bigint, d: { spentWei: string }) => a + BigInt(d.spentWei), 0n);
    expect(spentWei).toBe(-stored.filter((e) => e.kind !== 'adjustment').reduce((a, e) => a + BigInt(e.amount_wei), 0n));

    // Adjusting from the console writes one ledger entry, once per identifier; nonsense writes none.
    const adj = await consoleCall('AdjustProjectBalance', { projectId: env.project.id, chainID: network, amount: '0.01', identifier: 'console-1' });
    expect(adj.status, JSON.stringify(adj.body)).toBe(200);
    await consoleCall('AdjustProjectBalance', { projectId: env.project.id, chainID: network, amount: '0.01', identifier: 'console-1' });
    expect((await consoleCall('AdjustProjectBalance', { projectId: env.project.id, chainID: network, amount: '0.01.5', identifier: 'console-2' })).status).toBe(400);
    expect((await ledger()).length).toBe(stored.length + 1);
    expect(BigInt((await tankRow()).balance_wei)).toBe(BigInt(tank.balance_wei) + parseEther('0.01'));
    expect((await rpc(env.app, '/rpc/Console/GetProjectBalances', { projectId: env.project.id })).status).toBe(401);
  });
});
