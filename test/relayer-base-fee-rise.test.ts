// A base fee that rises after intake, on a real anvil with three senders, blocks mined by the test (automine
// off while it matters) and judged by the chain: receipts' gasUsed × effectiveGasPrice against a
// sponsorship rule's budget, and blocks counted until a well-paid bundle is mined while minimum-fee
// bundles hold every sender's next nonce (docs/relayer-worst-case.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, parseAbi, type Address, type Hex } from 'viem';
import { privateKeyToAddress } from 'viem/accounts';
import { mine, setAutomine, setNextBaseFee, txpoolContent, txpoolHashes } from './support/anvil-control.ts';
import { feeKit } from './support/fee-kit.ts';
import { deployWallets, waitFor, type User } from './support/relay-load.ts';
import { PAYEE, SENDER_KEYS, erc20, sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { signedBundle } from './support/sequence-wallet.ts';

/** anvil's account 3: a third sender beside relayer-env's two. */
const THIRD_SENDER: Hex = '0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6';
const GWEI = 1_000_000_000n;
const UNBLOCK_AFTER = 4;
const grieferAbi = parseAbi(['function arm(bool on)', 'function goArmed(uint256 need, uint256 reserve)']);

let env: RelayerEnv;
let griefer: Address;
let users: User[];
let nextUser = 0;
const admin = () => ({ authorization: `Bearer ${env.adminToken}` });
const dispatcher = () => env.services.dispatchers[0];
const take = (n: number) => {
  const out = users.slice(nextUser, nextUser + n);
  nextUser += n;
  return out;
};

const opened: RelayerEnv[] = [];
/** A relayer with three senders on its own anvil: a stuck slot is freed after UNBLOCK_AFTER blocks under the base fee. */
async function start(reserveSenders: number) {
  env = await startRelayerEnv({ relayer: { senderKeys: [...SENDER_KEYS, THIRD_SENDER], unblockAfterBlocks: UNBLOCK_AFTER, reserveSenders } });
  opened.push(env);
  users = await deployWallets(env, 12);
  nextUser = 0;
}

beforeAll(async () => {
  // One sender of the three is the reserve (the default).
  await start(1);
  [griefer] = await env.chain.deploy([{ contract: 'TestGasGriefer' }]);
  // Armed: a call to it burns the gas its Sequence transaction gives it, in simulation and when mined alike.
  await env.chain.send([{ address: griefer, contract: 'TestGasGriefer', functionName: 'arm', args: [true] }]);
}, 180_000);
afterAll(async () => {
  for (const e of opened) {
    await setAutomine(e.rpcUrl, true).catch(() => undefined);
    await e.close();
  }
});

async function stored(id: string) {
  const r = await env.services.db.query<Record<string, any>>('SELECT * FROM meta_txns WHERE id = $1', [id.replace(/^0x/, '').toLowerCase()]);
  return r.rows[0];
}

/** The next block at `wei` base fee, mined, and the dispatcher's sweep of it done. */
async function blockAt(wei: bigint) {
  await setNextBaseFee(env.rpcUrl, wei);
  await mine(env.rpcUrl);
  const h = Number(await env.public.getBlockNumber({ cacheTime: 0 }));
  await waitFor(`the sweep of block ${h}`, async () => dispatcher().head >= h, 30_000, 10);
  return h;
}

describe('sponsorship caps are charged at the max fee an attempt may pay', () => {
  it('a rule with a small total budget, the base fee raised after intake: its meta-transactions never cost more on chain than the budget, and its spend settles to what they cost', async () => {
    await setNextBaseFee(env.rpcUrl, GWEI);
    await mine(env.rpcUrl);
    const p = await env.services.projects.create(`budget-${Math.random().toString(36).slice(2, 8)}`);
    const { key } = await env.services.accessKeys.create(p.id, 'k');
    const added = await env.call('AddGasSponsor', { projectId: p.id, address: griefer, kind: 'CONTRACT' }, admin());
    expect(added.status, JSON.stringify(added.body)).toBe(200);
    const rule = added.body.gasSponsor.id as number;
    // Each bundle burns about its whole simulated gas (1 M given to the griefer), so what it costs follows
    // the price it is mined at, not luck in what the limit's margin leaves unused.
    const bundleOf = (u: User) =>
      signedBundle({
        signerKey: u.signer.privateKey,
        wallet: u.wallet,
        chainId: env.chainId,
        deployed: true,
        txs: [{ to: griefer, data: encodeFunctionData({ abi: grieferAbi, functionName: 'goArmed', args: [0n, 30_000n] }), gasLimit: 1_000_000n }],
      });
    const send = async (u: User) => {
      const b = await bundleOf(u);
      return { id: b.id.replace(/^0x/, ''), r: await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input } }, { 'x-access-key': key }) };
    };
    const [first, ...rest] = take(10);
    await setAutomine(env.rpcUrl, false);
    try {
      // The first one sizes the budget: room for four of it at the gas price of intake (gas limit × price).
      const one = await send(first);
      expect(one.r.status, JSON.stringify(one.r.body)).toBe(200);
      const row = await stored(one.id);
      const budget = BigInt(row.gas_limit) * BigInt(row.gas_price_priced) * 4n + (BigInt(row.gas_limit) * BigInt(row.gas_price_priced)) / 2n;
      const set = await env.call('UpdateGasSponsor', { projectId: p.id, id: rule, totalBudgetWei: budget.toString() }, admin());
      expect(set.status, JSON.stringify(set.body)).toBe(200);
      const ids = [one.id];
      for (const u of rest) {
        const x = await send(u);
        if (x.r.status === 200) ids.push(x.id);
        else expect(x.r.body.cause, JSON.stringify(x.r.body)).toMatch(/total budget/);
      }
      expect(ids.length).toBeLessThan(10);
      await waitFor('every accepted one signed', async () => (await Promise.all(ids.map(stored))).every((m) => m.status === 'SENT'), 30_000);

      // The base fee rises after intake to just under what each cover pays per gas of its limit: every
      // attempt is replaced up to that and mined there, far above the price it was charged at intake.
      const covers = await Promise.all(ids.map(stored));
      const ceiling = covers.reduce((m, x) => {
        const c = BigInt(x.cover_wei) / BigInt(x.gas_limit);
        return c < m ? c : m;
      }, 2n ** 255n);
      const high = (ceiling * 19n) / 20n;
      for (let i = 0; i < 20 && (await Promise.all(ids.map(stored))).some((m) => m.status === 'SENT'); i++) await blockAt(high);
      const mined = await Promise.all(ids.map(stored));
      for (const m of mined) expect(m.status).toBe('SUCCEEDED');

      // Ground truth: what the rule's meta-transactions cost on chain, summed over their receipts.
      const hashes = [...new Set(mined.map((m) => m.txn_hash as Hex))];
      const receipts = await Promise.all(hashes.map((hash) => env.public.getTransactionReceipt({ hash })));
      const onChain = receipts.reduce((s, r) => s + r.gasUsed * r.effectiveGasPrice, 0n);
      for (const r of receipts) expect(r.effectiveGasPrice).toBeGreaterThan(BigInt(row.gas_price_priced)); // mined at the raised base fee
      expect(onChain, `${ids.length} meta-transactions cost ${onChain} wei on chain against a budget of ${budget} wei`).toBeLessThanOrEqual(budget);
      // Settled, the charges are what the chain says they cost: the difference to the max fee was given back.
      const spent = (await env.call('GetGasSponsor', { projectId: p.id, id: rule }, admin())).body.gasSponsor;
      expect(BigInt(spent.spentTotalWei)).toBe(onChain);
    } finally {
      await setAutomine(env.rpcUrl, true);
    }
  }, 180_000);
});

describe('senders stay live while the base fee rises', () => {
  const { user, mint } = feeKit(() => env);
  const fee = (amount: bigint) => ({ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [PAYEE, amount] }) });
  const senders = [...SENDER_KEYS, THIRD_SENDER].map((k) => privateKeyToAddress(k).toLowerCase());
  const low = 10n * GWEI;
  const high = 3n * low;
  const statusOf = async (ids: string[]) => Promise.all(ids.map(stored));

  beforeAll(async () => {
    await sponsor(env, 'CONTRACT', env.token);
  });

  /**
   * Three fresh wallets' bundles, each paying exactly the least fee the relayer accepts (as FeeOptions
   * quotes it), sent at a 10 gwei base fee with automine off: signed and in the pool, not mined.
   */
  async function minimumFeeBundles(): Promise<string[]> {
    const payers = [user(), user(), user()];
    for (const u of payers) await mint(u.wallet.address, 10n ** 12n);
    await setNextBaseFee(env.rpcUrl, low);
    await mine(env.rpcUrl);
    const cheap = await Promise.all(
      payers.map(async (u) => {
        const probe = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [fee(1n)], deployed: false });
        const r = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: probe.entrypoint, input: probe.input } });
        expect(r.status, JSON.stringify(r.body)).toBe(402);
        const required = (BigInt(/required (\d+)/.exec(r.body.cause)![1]) * 101n) / 100n;
        return signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [fee(required)], deployed: false });
      }),
    );
    await setAutomine(env.rpcUrl, false);
    for (const [i, b] of cheap.entries()) {
      const r = await env.call('SendMetaTxn', { call: { walletAddress: payers[i].wallet.address, contract: b.entrypoint, input: b.input } });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    }
    const ids = cheap.map((b) => b.id.replace(/^0x/, ''));
    await waitFor('the minimum-fee bundles in the pool', async () => {
      const pool = txpoolHashes(await txpoolContent(env.rpcUrl));
      return (await statusOf(ids)).every((m) => m.status === 'SENT' && pool.includes(m.txn_hash));
    });
    return ids;
  }

  /** A sponsored bundle that pays today's price (its sponsor's cover at the raised base fee), sent now. */
  async function wellPaid(): Promise<string> {
    const [u] = take(1);
    const b = await signedBundle({
      signerKey: u.signer.privateKey,
      wallet: u.wallet,
      chainId: env.chainId,
      deployed: true,
      txs: [{ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'mint', args: [u.wallet.address, 1n] }) }],
    });
    const r = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input } }, { 'x-access-key': env.accessKey });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return b.id.replace(/^0x/, '');
  }

  /** Mines blocks at the high base fee until every stuck bundle is settled; checks they were freed, and the senders' nonces and ledger. */
  async function freed(cheapIds: string[], rise: number, nonces: number[], others: number) {
    let last = rise;
    for (let i = 0; i < UNBLOCK_AFTER + 3 && (await statusOf(cheapIds)).some((m) => m.status === 'SENT'); i++) last = await blockAt(high);
    // Within unblockAfterBlocks of the rise, and the block that mines the self-transfers.
    expect(last - rise).toBeLessThanOrEqual(UNBLOCK_AFTER + 2);
    for (const m of await statusOf(cheapIds)) {
      expect(m.status).toBe('DROPPED');
      expect(m.revert_reason).toMatch(/stalled: .* nonce \d+ was freed by a zero-value self-transfer \(0x[0-9a-f]{64}\) the relayer paid for/);
    }
    // The base fee stayed high throughout: every block since the rise was mined at it.
    for (let b = rise; b <= last; b++) expect((await env.public.getBlock({ blockNumber: BigInt(b) })).baseFeePerGas).toBe(high);
    // The senders' nonces moved on by one per stuck slot and per other transaction, no slot is left open,
    // and each sender's ledger agrees with the chain.
    const after = await Promise.all(senders.map((a) => env.public.getTransactionCount({ address: a as Address })));
    expect(after.reduce((a, b) => a + b, 0) - nonces.reduce((a, b) => a + b, 0)).toBe(cheapIds.length + others);
    expect((await env.services.db.query("SELECT hash FROM relay_txs WHERE chain_id = $1 AND status = 'PENDING'", [env.chainId])).rows).toEqual([]);
    for (const [i, a] of senders.entries()) {
      const ledger = await env.services.db.query<{ next_nonce: string }>('SELECT next_nonce::text AS next_nonce FROM relay_senders WHERE chain_id = $1 AND address = $2', [env.chainId, a]);
      expect(Number(ledger.rows[0].next_nonce)).toBe(after[i]);
    }
  }

  it('minimum-fee bundles on the senders and the base fee tripled: a well-paid sponsored bundle is mined in the next block on the reserve sender, and every stuck nonce is freed within unblockAfterBlocks, its bundle DROPPED with the reason', async () => {
    try {
      const cheapIds = await minimumFeeBundles();
      const nonces = await Promise.all(senders.map((a) => env.public.getTransactionCount({ address: a as Address })));
      // The base fee triples: over what each minimum fee pays per gas of its limit, for as long as the test runs.
      for (const m of await statusOf(cheapIds)) expect(BigInt(m.cover_wei) / BigInt(m.gas_limit)).toBeLessThan(high);
      const rise = await blockAt(high);
      for (const m of await statusOf(cheapIds)) expect(m.status).toBe('SENT');
      // The senders holding a stuck nonce take no new work: the sweep says why.
      const stuckSenders = new Set((await statusOf(cheapIds)).map((m) => m.sender));
      const read = await env.services.db.query<{ address: string; stalled: string | null }>('SELECT address, stalled FROM relay_senders WHERE chain_id = $1', [env.chainId]);
      for (const r of read.rows.filter((x) => stuckSenders.has(x.address))) expect(r.stalled).toMatch(/below the next base fee/);

      // A bundle that pays today's price goes on a sender no stuck nonce holds and is mined in the next
      // block or the one after, while the base fee stays high.
      const goodId = await wellPaid();
      await waitFor('the sponsored bundle signed', async () => (await stored(goodId))?.status === 'SENT');
      for (let i = 0; i < 2 && (await stored(goodId)).status === 'SENT'; i++) await blockAt(high);
      const mined = await stored(goodId);
      expect(mined.status, `the sponsored bundle is ${mined.status} two blocks after the rise, on ${mined.sender}`).toBe('SUCCEEDED');
      expect(Number(mined.block_number) - rise).toBeLessThanOrEqual(2);
      expect(stuckSenders.has(mined.sender)).toBe(false);
      await freed(cheapIds, rise, nonces, 1);
    } finally {
      await setAutomine(env.rpcUrl, true);
    }
  }, 180_000);

  it('with no reserve (reserveSenders: 0) and a minimum-fee bundle on every sender: nothing is signed behind a stuck nonce, and the well-paid bundle is mined within unblockAfterBlocks + 2 blocks of the rise', async () => {
    // A relayer of its own, with no sender kept in reserve.
    await start(0);
    await sponsor(env, 'CONTRACT', env.token);
    try {
      const cheapIds = await minimumFeeBundles();
      expect(new Set((await statusOf(cheapIds)).map((m) => m.sender)).size).toBe(3);
      const nonces = await Promise.all(senders.map((a) => env.public.getTransactionCount({ address: a as Address })));
      const rise = await blockAt(high);
      const goodId = await wellPaid();
      let minedAt: number | null = null;
      for (let i = 0; i < UNBLOCK_AFTER + 3 && minedAt == null; i++) {
        const h = await blockAt(high);
        // Once a stuck slot is freed its sender takes work again, in the pass after this block's sweep.
        if ((await statusOf(cheapIds)).some((c) => c.status === 'DROPPED')) await waitFor('the well-paid bundle signed on a freed sender', async () => (await stored(goodId)).status !== 'QUEUED');
        const m = await stored(goodId);
        // Never signed while every sender's next nonce is stuck: it waits queued, not behind one of them.
        if (m.status === 'SENT') expect((await statusOf(cheapIds)).some((c) => c.sender === m.sender && c.status === 'SENT' && c.txn_nonce < m.txn_nonce)).toBe(false);
        if (m.status === 'SUCCEEDED') minedAt = h;
      }
      expect(minedAt, 'the well-paid bundle mined while the base fee stays high').not.toBeNull();
      expect(minedAt! - rise).toBeLessThanOrEqual(UNBLOCK_AFTER + 2);
      await freed(cheapIds, rise, nonces, 1);
    } finally {
      await setAutomine(env.rpcUrl, true);
    }
  }, 180_000);
});
