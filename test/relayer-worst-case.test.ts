// The relayer's worst case, tried as an attacker would, judged by the chain: what the senders spent in
// gas (their ETH), what the payment address received (its fee-token balance, worth wei at the fee token's
// fixed price), receipts, sender nonces and the stored rows. A simulation is evidence, never a guarantee:
// each attacker here looks cheap to every simulation and is dear when mined.
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { encodeFunctionData, parseAbi, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { mine, setNextBaseFee } from './support/anvil-control.ts';
import { deployWallets, waitFor, type User } from './support/relay-load.ts';
import { feeKit } from './support/fee-kit.ts';
import { PAYEE, SENDER_KEYS, erc20, sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { signedBundle, type SequenceTx } from './support/sequence-wallet.ts';
import { finalReceiptNow } from './support/meta-final.ts';

let env: RelayerEnv;
let griefer: Address;
const SENDER = privateKeyToAccount(SENDER_KEYS[0]).address;
/** The fee token's fixed price in the test relayer: 0.0004 ETH per whole FUSD (6 decimals). */
const WEI_PER_FUSD_UNIT = 400_000_000n;
const GWEI = 1_000_000_000n;

const grieferAbi = parseAbi([
  'function arm(bool on)',
  'function go(uint256 need, uint256 reserve)',
  'function goArmed(uint256 need, uint256 reserve)',
  'function heavyWhenArmed(uint256 need, uint256 reserve)',
]);

beforeAll(async () => {
  // One sender and batching on: what may share a transaction, and what must not, is seen on one sender.
  env = await startRelayerEnv({ relayer: { senderKeys: [SENDER_KEYS[0]], batchSize: 8 } });
  [griefer] = await env.chain.deploy([{ contract: 'TestGasGriefer' }]);
  // The project sponsors calls of the fee token (keyless calls are never sponsored).
  await sponsor(env, 'CONTRACT', env.token);
}, 120_000);
afterAll(async () => {
  await env?.close();
});

const { key, user, mint, balance } = feeKit(() => env);
const fee = (amount: bigint): SequenceTx => ({ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [PAYEE, amount] }) });
const griefCall = (fn: 'go' | 'goArmed' | 'heavyWhenArmed', need: bigint, reserve = 30_000n): SequenceTx => ({
  to: griefer,
  data: encodeFunctionData({ abi: grieferAbi, functionName: fn, args: [need, reserve] }),
});
const arm = (on: boolean) => env.chain.send([{ address: griefer, contract: 'TestGasGriefer', functionName: 'arm', args: [on] }]);

/**
 * The base fee of the next block set to `wei` (anvil lowers it after every near-empty block). At most a few
 * gwei: the test chain's own transactions (mints, arming) are signed with a fixed max fee of ~4 gwei.
 */
async function pinBaseFee(wei: bigint) {
  await setNextBaseFee(env.rpcUrl, wei);
  await mine(env.rpcUrl);
}

/** Ground truth: the relayer's gas spent (its sender's ETH) and what the payment address received, worth in wei. */
async function books() {
  const [eth, fusd] = await Promise.all([env.public.getBalance({ address: SENDER }), balance(PAYEE)]);
  return { eth, fusd };
}
function loss(before: { eth: bigint; fusd: bigint }, after: { eth: bigint; fusd: bigint }) {
  const spent = before.eth - after.eth;
  const earned = (after.fusd - before.fusd) * WEI_PER_FUSD_UNIT;
  return { spent, earned, unpaid: spent - earned };
}
const sentCount = () => env.public.getTransactionCount({ address: SENDER });

async function send(wallet: Address, contract: Address, input: Hex, headers: Record<string, string> = {}) {
  return env.call('SendMetaTxn', { call: { walletAddress: wallet, contract, input } }, headers);
}
const final = (id: string) => waitFor(`${id} final`, () => finalReceiptNow(env, id, key()));
async function stored(id: string) {
  const r = await env.services.db.query<Record<string, any>>('SELECT * FROM meta_txns WHERE id = $1', [id.replace(/^0x/, '').toLowerCase()]);
  return r.rows[0];
}
/** The smallest fee the relayer accepts for this bundle shape, as an attacker finds it: from the refusal's own words. */
async function minimumFee(u: ReturnType<typeof user>, txs: (f: bigint) => SequenceTx[], headers: Record<string, string> = {}, space = 0n): Promise<bigint> {
  const probe = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: txs(1n), deployed: false, nonce: { space, n: 0n } });
  const r = await send(u.wallet.address, probe.entrypoint, probe.input, headers);
  expect(r.status, JSON.stringify(r.body)).toBe(402);
  const m = /required (\d+)/.exec(r.body.cause);
  expect(m, r.body.cause).not.toBeNull();
  // A larger fee is a few more calldata bytes (a little more intrinsic gas): 1 % on top.
  return (BigInt(m![1]) * 101n) / 100n;
}
const dispatcher = () => env.services.dispatchers[0];

describe('a paid fee covers the whole gas limit that is signed', () => {
  it('a bundle cheap in every simulation and dear when mined (gas price 0 tells them apart): never costs the relayer more than it was paid', async () => {
    await pinBaseFee(2n * GWEI);
    const u = user();
    await mint(u.wallet.address, 10n ** 12n);
    const txs = (f: bigint) => [fee(f), griefCall('go', 2_000_000n, 20_000n)];
    const before = { books: await books(), sent: await sentCount() };
    // The attacker pays the least the relayer says it accepts, keyless, three times.
    for (let i = 0; i < 3; i++) {
      const r = await (async () => {
        const m = await minimumFee(u, txs).catch(() => null);
        if (m == null) return null;
        const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: txs(m), deployed: i > 0, nonce: { space: 0n, n: BigInt(i) } });
        const sent = await send(u.wallet.address, b.entrypoint, b.input);
        return sent.status === 200 ? final(b.id) : null;
      })();
      if (r == null) break;
    }
    const after = await books();
    const l = loss(before.books, after);
    // Simulated at the real gas price, the burn shows: the bundle cannot be priced within the keyless cap.
    expect(l.unpaid <= 0n, `relayer spent ${l.spent} wei in gas, fees worth ${l.earned} wei arrived`).toBe(true);
    expect(await sentCount()).toBe(before.sent);
  });

  it('a bundle its owner switches to burning after intake burns at most the limit its fee priced; the fee covers it', async () => {
    await pinBaseFee(2n * GWEI);
    const u = user();
    await mint(u.wallet.address, 10n ** 12n);
    // Needs 1 M gas to pass (the trial at what it used fails, eth_estimateGas sizes the limit); cheap until armed.
    const txs = (f: bigint) => [fee(f), griefCall('goArmed', 1_000_000n)];
    const required = await minimumFee(u, txs);
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: txs(required), deployed: false });
    await dispatcher().stop();
    const before = await books();
    try {
      const r = await send(u.wallet.address, b.entrypoint, b.input);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      const row = await stored(b.id);
      // The fee was priced on the limit it will be signed with, and recorded as its cover.
      expect(BigInt(row.cover_wei)).toBeGreaterThanOrEqual(BigInt(row.gas_limit) * BigInt(row.gas_price_priced));
      await arm(true);
    } finally {
      dispatcher().start();
    }
    const receipt = await final(b.id);
    await arm(false);
    expect(receipt.status).toBe('SUCCEEDED');
    const mined = await env.public.getTransactionReceipt({ hash: receipt.txnHash });
    const row = await stored(b.id);
    // It did burn (nearly) its whole limit…
    expect(mined.gasUsed).toBeGreaterThan((BigInt(row.gas_limit) * 9n) / 10n);
    // …and the relayer was paid for it: the ground truth, not the service's word.
    const l = loss(before, await books());
    expect(l.unpaid <= 0n, `relayer spent ${l.spent} wei in gas, fees worth ${l.earned} wei arrived`).toBe(true);
    expect(row.shortfall_wei).toBeNull();
  });
});

describe('the dispatcher never raises a gas limit', () => {
  it('a sponsored bundle that needs more gas after intake than it was priced and held for is dropped, not sent with a larger limit', async () => {
    const rule = await sponsor(env, 'CONTRACT', griefer);
    onTestFinished(async () => {
      await env.call('RemoveGasSponsor', { projectId: env.project.id, id: rule.id }, { authorization: `Bearer ${env.adminToken}` });
    });
    const u = user();
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [griefCall('heavyWhenArmed', 3_000_000n)], deployed: false });
    await dispatcher().stop();
    const sent = await sentCount();
    try {
      const r = await send(u.wallet.address, b.entrypoint, b.input, key());
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      await arm(true);
    } finally {
      dispatcher().start();
    }
    const receipt = await final(b.id);
    await arm(false);
    expect(receipt.status).toBe('DROPPED');
    expect(receipt.revertReason).toMatch(/more than the gas limit of \d+ it was accepted and priced with/);
    // Ground truth: nothing was signed or sent for it.
    expect(await sentCount()).toBe(sent);
    const attempts = await env.services.db.query('SELECT 1 FROM relay_txs WHERE meta_txn_id = $1', [b.id.replace(/^0x/, '')]);
    expect(attempts.rows).toHaveLength(0);
  });
});

describe('batches never mix payers', () => {
  it("two projects' sponsored bundles ready together go in separate transactions; one project's still share one", async () => {
    const other = await env.services.projects.create(`griefer-${Math.random().toString(36).slice(2, 8)}`);
    const { key: otherKey } = await env.services.accessKeys.create(other.id, 'griefer');
    await sponsor(env, 'CONTRACT', griefer, other.id);
    // Deployed wallets: their bundles are batchable (a deploying call goes alone).
    const [u1, u2, g] = await deployWallets(env, 3);
    const signed = (u: User, txs: SequenceTx[]) => signedBundle({ signerKey: u.signer.privateKey, wallet: u.wallet, chainId: env.chainId, deployed: true, txs });
    const mints = await Promise.all(
      [u1, u2].map((u) => signed(u, [{ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'mint', args: [u.wallet.address, 1n] }) }]).then((b) => ({ u, b }))),
    );
    const grief = await signed(g, [griefCall('goArmed', 0n)]);
    await dispatcher().stop();
    try {
      for (const { u, b } of mints) expect((await send(u.wallet.address, b.entrypoint, b.input, key())).status).toBe(200);
      expect((await send(g.wallet.address, grief.entrypoint, grief.input, { 'x-access-key': otherKey })).status).toBe(200);
      await arm(true);
    } finally {
      dispatcher().start();
    }
    for (const id of [...mints.map((m) => m.b.id), grief.id]) expect((await final(id)).status).toBe('SUCCEEDED');
    await arm(false);
    const [a, b2] = await Promise.all(mints.map((m) => stored(m.b.id)));
    const c = await stored(grief.id);
    // One project's two mints share a transaction; the other project's burner is never in it.
    expect(a.txn_hash).toBe(b2.txn_hash);
    expect(c.txn_hash).not.toBe(a.txn_hash);
    // Ground truth: the burner burnt (nearly) its own whole limit in its own transaction, and the mints'
    // transaction never called it.
    const minted = await env.public.getTransactionReceipt({ hash: a.txn_hash });
    const burnt = await env.public.getTransactionReceipt({ hash: c.txn_hash });
    expect(burnt.gasUsed).toBeGreaterThan(BigInt(c.gas_limit) - 40_000n); // all but its reserve
    expect(burnt.gasUsed).toBeLessThanOrEqual(BigInt(c.gas_limit));
    expect(minted.logs.some((l) => l.address.toLowerCase() === griefer.toLowerCase())).toBe(false);
  });
});

describe("a fee-paying bundle's balance cannot be moved under it", () => {
  it("the same wallet's sponsored bundle in another nonce space is refused while a fee-paying one is live, and the other way round; the fee arrives", async () => {
    const u = user();
    const FEE = 10_000_000n;
    await mint(u.wallet.address, FEE);
    const drain = encodeFunctionData({ abi: erc20, functionName: 'transfer', args: ['0x000000000000000000000000000000000000dEaD', FEE] });
    const paying = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [fee(FEE)], nonce: { space: 1n, n: 0n }, deployed: false });
    const draining = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [{ to: env.token, data: drain }], nonce: { space: 2n, n: 0n }, deployed: false });
    const payee = await balance(PAYEE);
    await dispatcher().stop();
    try {
      expect((await send(u.wallet.address, paying.entrypoint, paying.input)).status).toBe(200);
      const refused = await send(u.wallet.address, draining.entrypoint, draining.input, key());
      expect(refused.status, JSON.stringify(refused.body)).toBe(409);
      expect(refused.body.cause).toMatch(/has a fee-paying meta-transaction in flight/);
    } finally {
      dispatcher().start();
    }
    expect((await final(paying.id)).status).toBe('SUCCEEDED');
    expect(await balance(PAYEE)).toBe(payee + FEE);

    // The other order: a live sponsored bundle of the wallet first, then a fee-paying one is refused.
    const v = user();
    await mint(v.wallet.address, FEE);
    const first = await signedBundle({ signerKey: v.key, wallet: v.wallet, chainId: env.chainId, txs: [{ to: env.token, data: drain }], nonce: { space: 2n, n: 0n }, deployed: false });
    const then = await signedBundle({ signerKey: v.key, wallet: v.wallet, chainId: env.chainId, txs: [fee(FEE)], nonce: { space: 1n, n: 0n }, deployed: false });
    await dispatcher().stop();
    try {
      expect((await send(v.wallet.address, first.entrypoint, first.input, key())).status).toBe(200);
      const refused = await send(v.wallet.address, then.entrypoint, then.input);
      expect(refused.status, JSON.stringify(refused.body)).toBe(409);
      expect(refused.body.cause).toMatch(/another meta-transaction in flight .* that runs a bundle of it/);
    } finally {
      dispatcher().start();
    }
    expect((await final(first.id)).status).toBe('SUCCEEDED');
    expect(await stored(then.id)).toBeUndefined();
  });
});

describe('bounded before signing: no attempt offers more per gas than its cover pays for over its gas limit', () => {
  it('a fee that no longer pays for the gas limit at the base fee is not signed until it does: nothing unpaid, no shortfall, no bar', async () => {
    await pinBaseFee(GWEI / 10n);
    const u = user();
    await mint(u.wallet.address, 10n ** 12n);
    const txs = (f: bigint) => [fee(f)];
    const required = await minimumFee(u, txs);
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: txs(required), deployed: false });
    const before = await books();
    const nonce = await sentCount();
    await dispatcher().stop();
    try {
      expect((await send(u.wallet.address, b.entrypoint, b.input)).status).toBe(200);
      // Gas becomes 30 times dearer before it is sent: far above what the fee pays per gas of its limit.
      await pinBaseFee(3n * GWEI);
    } finally {
      dispatcher().start();
    }
    const waiting = await waitFor('the wait recorded', async () => {
      const r = await stored(b.id);
      return r?.stalled ? r : undefined;
    });
    expect(waiting.status).toBe('QUEUED');
    expect(waiting.stalled).toMatch(/pays for at most .* gwei per gas over its gas limit, below the base fee of .* gwei/);
    const ceiling = BigInt(waiting.cover_wei) / BigInt(waiting.gas_limit);
    expect(ceiling).toBeLessThan(3n * GWEI);
    expect(await sentCount()).toBe(nonce);

    // The base fee falls back: it goes, and the relayer spends no more than the fee brought.
    await pinBaseFee(GWEI / 10n);
    expect((await final(b.id)).status).toBe('SUCCEEDED');
    const row = await stored(b.id);
    expect(BigInt(row.gas_used) * BigInt(row.gas_price)).toBeLessThanOrEqual(BigInt(row.cover_wei));
    expect(row.shortfall_wei).toBeNull();
    const { unpaid } = loss(before, await books());
    expect(unpaid).toBeLessThanOrEqual(0n);
    const metric = await env.services.metrics.registry.getSingleMetricAsString('metarelay_relayer_cost_shortfalls_total');
    expect(metric).not.toMatch(/kind="price"\} [1-9]/);
    expect(await env.services.bars.list()).toEqual([]);
  });

  it('a base fee that climbs within feePriceRoom (1.25) does not hold a fee-paying bundle back: the least fee paid for that room', async () => {
    await pinBaseFee(GWEI / 10n);
    const u = user();
    await mint(u.wallet.address, 10n ** 12n);
    const txs = (f: bigint) => [fee(f)];
    const required = await minimumFee(u, txs);
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: txs(required), deployed: false });
    const before = await books();
    await dispatcher().stop();
    let priced = 0n;
    try {
      expect((await send(u.wallet.address, b.entrypoint, b.input)).status).toBe(200);
      priced = BigInt((await stored(b.id)).gas_price_priced);
      // The next base fee a little over the price it was priced at, within the room the fee paid for.
      await pinBaseFee((priced * 9n) / 8n);
    } finally {
      dispatcher().start();
    }
    expect((await final(b.id)).status).toBe('SUCCEEDED');
    const row = await stored(b.id);
    expect(BigInt(row.gas_price)).toBeGreaterThan(priced); // mined above the price it was priced at
    expect(BigInt(row.cover_wei)).toBeGreaterThanOrEqual((BigInt(row.gas_limit) * priced * 5n) / 4n);
    expect(BigInt(row.gas_used) * BigInt(row.gas_price)).toBeLessThanOrEqual(BigInt(row.cover_wei));
    expect(loss(before, await books()).unpaid).toBeLessThanOrEqual(0n);
  });

  it('a meta-transaction whose cover cannot pay for its gas limit at the base fee (as a relayer without worst-case pricing stored them) is never signed, and is dropped after queueTimeoutSec', async () => {
    await pinBaseFee(2n * GWEI);
    const u = user();
    await mint(u.wallet.address, 10n ** 12n);
    await arm(true);
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [fee(1_000n), griefCall('goArmed', 0n)], deployed: false });
    const id = b.id.replace(/^0x/, '');
    const nonce = await sentCount();
    const eth = await env.public.getBalance({ address: SENDER });
    // A cover of 4 × 10^11 wei for a 400 000 gas limit: 10^6 wei (0.001 gwei) per gas, against a base fee of 2 gwei.
    await env.services.metaTxns.insert({
      chainId: env.chainId,
      id,
      projectId: env.project.id,
      wallet: u.wallet.address.toLowerCase() as Address,
      entrypoint: b.entrypoint.toLowerCase() as Address,
      input: b.input.toLowerCase() as Hex,
      gasLimit: 400_000n,
      gasEstimated: 100_000n,
      sponsored: false,
      sponsorId: null,
      feeToken: env.token.toLowerCase(),
      feeValue: 1_000n,
      feePayer: u.wallet.address.toLowerCase() as Address,
      gasPricePriced: 2n * GWEI,
      coverWei: 1_000n * WEI_PER_FUSD_UNIT,
      keyId: 4242,
      clientIp: '198.51.100.7',
      bundles: [{ id, wallet: u.wallet.address.toLowerCase() as Address, space: 0n, nonce: 0n }],
    });
    dispatcher().nudge();
    const waiting = await waitFor('the wait recorded', async () => {
      const r = await stored(id);
      return r?.stalled ? r : undefined;
    });
    expect(waiting.status).toBe('QUEUED');
    expect(waiting.stalled).toMatch(/pays for at most 0\.001 gwei per gas over its gas limit, below the base fee/);
    // Past its queue time, it is dropped with the reason; the relayer signed nothing and spent nothing.
    await env.services.db.query(`UPDATE meta_txns SET queued_at = now() - interval '1 hour' WHERE id = $1`, [id]);
    dispatcher().nudge();
    const dropped = await final(id);
    await arm(false);
    expect(dropped.status).toBe('DROPPED');
    expect((await stored(id)).revert_reason).toMatch(/not sent within \d+ s: its fee or sponsorship pays for at most .*; send it again to have it priced anew/);
    expect(await sentCount()).toBe(nonce);
    expect(await env.public.getBalance({ address: SENDER })).toBe(eth);
    expect(await env.services.bars.list()).toEqual([]);
  });
});
