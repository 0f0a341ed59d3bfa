// A base fee that rises after intake, on a real anvil with three senders, blocks mined by the test (automine
// off while it matters) and judged by the chain: receipts' gasUsed × effectiveGasPrice against a
// sponsorship rule's budget, and blocks counted until a well-paid bundle is mined while minimum-fee
// bundles hold every sender's next nonce (docs/relayer-worst-case.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, parseAbi, type Address, type Hex } from 'viem';
import { mine, setAutomine, setNextBaseFee } from './support/anvil-control.ts';
import { deployWallets, waitFor, type User } from './support/relay-load.ts';
import { SENDER_KEYS, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { signedBundle } from './support/sequence-wallet.ts';

/** anvil's account 3: a third sender beside relayer-env's two. */
const THIRD_SENDER: Hex = '0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6';
const GWEI = 1_000_000_000n;
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

beforeAll(async () => {
  env = await startRelayerEnv({ relayer: { senderKeys: [...SENDER_KEYS, THIRD_SENDER] } });
  [griefer] = await env.chain.deploy([{ contract: 'TestGasGriefer' }]);
  // Armed: a call to it burns the gas its Sequence transaction gives it, in simulation and when mined alike.
  await env.chain.send([{ address: griefer, contract: 'TestGasGriefer', functionName: 'arm', args: [true] }]);
  users = await deployWallets(env, 16);
}, 180_000);
afterAll(async () => {
  await setAutomine(env.rpcUrl, true).catch(() => undefined);
  await env?.close();
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
