// What strangers can cost the relayer when a bundle takes its fee back, tried as an attacker would and
// judged by the chain: the senders' ETH, the payment address's fee-token balance, receipts, stored rows
// and bars. A bundle `[fee, taker.go(t)]` pays in every simulation and reverts whole when mined (a time
// bomb, or a switch its owner flips in the same block ahead of the relayer's transaction): a fee the
// bundle can undo is not a fee. So what such bundles may cost is a budget, counted before signing
// (docs/relayer-worst-case.md), and a fee put first with bounded calls after it is final.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, parseAbi, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { mine, setAutomine, txpoolContent, txpoolHashes } from './support/anvil-control.ts';
import { feeKit } from './support/fee-kit.ts';
import { waitFor } from './support/relay-load.ts';
import { PAYEE, SENDER_KEYS, erc20, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { signedBundle, type SequenceTx } from './support/sequence-wallet.ts';

let env: RelayerEnv;
const SENDERS = SENDER_KEYS.slice(0, 2).map((k) => privateKeyToAccount(k).address);
/** The fee token's fixed price in the test relayer: 0.0004 ETH per whole FUSD (6 decimals). */
const WEI_PER_FUSD_UNIT = 400_000_000n;
const takerAbi = parseAbi(['function arm(bool on)', 'function go(uint256 notBefore)', 'function bomb(uint256 notBefore, uint256 size)']);
/** A time that never comes in these tests unless a test moves the chain's clock there. */
const FAR = 4_000_000_000n;
/** The keyless budget, in gas at the price of the moment: about three keyless bundles of this file. */
const KEYLESS_GAS = 800_000;

beforeAll(async () => {
  env = await startRelayerEnv({
    relayer: {
      senderKeys: SENDER_KEYS.slice(0, 2),
      lossBudget: {
        keylessGas: KEYLESS_GAS,
        perKeyGas: 400_000_000,
        perWalletGas: 20_000_000,
        perClientGas: 40_000_000,
        perKeyClientGas: 40_000_000,
        ipv4Prefix: 24,
        ipv6Prefix: 48,
        keyBarAfterNetworks: 2,
      },
    },
  });
}, 120_000);
afterAll(async () => {
  await setAutomine(env.rpcUrl, true).catch(() => undefined);
  await env?.close();
});

const { key, user, mint, balance } = feeKit(() => env);
const fee = (amount: bigint): SequenceTx => ({ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [PAYEE, amount] }) });
const takerCall = (taker: Address, notBefore: bigint): SequenceTx => ({ to: taker, data: encodeFunctionData({ abi: takerAbi, functionName: 'go', args: [notBefore] }) });

/** SendMetaTxn from a client address of the test's choosing (the HTTP layer's view of the caller). */
async function sendFrom(ip: string, wallet: Address, contract: Address, input: Hex, headers: Record<string, string> = {}) {
  const r = await env.app.inject({
    method: 'POST',
    url: `${new URL(env.relayerUrl).pathname}/rpc/Relayer/SendMetaTxn`,
    headers: { 'content-type': 'application/json', ...headers },
    payload: JSON.stringify({ call: { walletAddress: wallet, contract, input } }),
    remoteAddress: ip,
  });
  return { status: r.statusCode, body: r.json() };
}

async function feeOptionsFrom(ip: string, wallet: Address, to: Address, data: Hex, headers: Record<string, string> = {}) {
  const r = await env.app.inject({
    method: 'POST',
    url: `${new URL(env.relayerUrl).pathname}/rpc/Relayer/FeeOptions`,
    headers: { 'content-type': 'application/json', ...headers },
    payload: JSON.stringify({ wallet, to, data }),
    remoteAddress: ip,
  });
  return { status: r.statusCode, body: r.json() };
}

const stored = async (id: string) => (await env.services.db.query<Record<string, any>>('SELECT * FROM meta_txns WHERE chain_id = $1 AND id = $2', [env.chainId, id.replace(/^0x/, '')])).rows[0];

/** Ground truth: the senders' ETH and what the payment address holds (fee-token units). */
async function books() {
  const eth = (await Promise.all(SENDERS.map((a) => env.public.getBalance({ address: a })))).reduce((a, b) => a + b, 0n);
  return { eth, fusd: await balance(PAYEE) };
}

/** The least fee the relayer takes for a bundle (its 402 says it), with 1 % on top for the fee's own calldata. */
async function leastFee(u: ReturnType<typeof user>, txs: (f: bigint) => SequenceTx[], ip: string, headers: Record<string, string> = {}): Promise<bigint> {
  const probe = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: txs(1n), deployed: false });
  const r = await sendFrom(ip, u.wallet.address, probe.entrypoint, probe.input, headers);
  expect(r.status, JSON.stringify(r.body)).toBe(402);
  const m = /required (\d+)/.exec(r.body.cause);
  expect(m, r.body.cause).not.toBeNull();
  return (BigInt(m![1]) * 101n) / 100n;
}

/** A fresh wallet with fee tokens, and its signed bundle of `txs(fee)` at the least fee. */
async function shot(txs: (f: bigint) => SequenceTx[], ip: string, headers: Record<string, string> = {}) {
  const u = user();
  await mint(u.wallet.address, 10n ** 12n);
  const f = await leastFee(u, txs, ip, headers);
  return { u, f, b: await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: txs(f), deployed: false }) };
}

/** With automine off: waits until each accepted id is broadcast, then moves the clock to `at` and mines one block. */
async function mineAt(ids: string[], at: bigint) {
  await waitFor('the broadcasts', async () => {
    const rows = await Promise.all(ids.map(stored));
    const pool = txpoolHashes(await txpoolContent(env.rpcUrl));
    return rows.every((r) => r.status === 'SENT' && pool.includes(r.txn_hash));
  });
  await env.public.request({ method: 'evm_setNextBlockTimestamp' as never, params: [Number(at)] as never });
  await mine(env.rpcUrl, 1);
}

/** Sends one signed bundle from `ip` with automine off, mines it in a block at time `at`, and waits for its final row. */
async function relayAt(ip: string, wallet: Address, b: { id: string; entrypoint: Address; input: Hex }, at: bigint, headers: Record<string, string> = {}) {
  await setAutomine(env.rpcUrl, false);
  try {
    const r = await sendFrom(ip, wallet, b.entrypoint, b.input, headers);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    await mineAt([b.id], at);
  } finally {
    await setAutomine(env.rpcUrl, true);
  }
  return final(b.id);
}

const final = (id: string) =>
  waitFor(`${id} final`, async () => {
    const r = await stored(id);
    return r && ['SUCCEEDED', 'FAILED', 'PARTIALLY_FAILED', 'DROPPED'].includes(r.status) ? r : undefined;
  });

async function deployTaker(): Promise<Address> {
  const [taker] = await env.chain.deploy([{ contract: 'TestFeeTaker' }]);
  return taker;
}

async function now(): Promise<bigint> {
  return (await env.public.getBlock({ blockTag: 'latest' })).timestamp;
}

describe('a fee the bundle can undo is not a fee', () => {
  it('six keyless shots from one client: one in flight until a fee arrives; the one mined without its fee bars the client, its wallet and the contract, and costs no more than it counted', async () => {
    const taker = await deployTaker();
    const t = (await now()) + 1_000n;
    const shots = await Promise.all(Array.from({ length: 6 }, () => shot((f) => [fee(f), takerCall(taker, t)], '198.51.100.7')));
    const before = await books();
    await setAutomine(env.rpcUrl, false);
    let accepted: string[] = [];
    try {
      const results = await Promise.all(shots.map((s, i) => sendFrom(`198.51.100.${10 + i}`, s.u.wallet.address, s.b.entrypoint, s.b.input)));
      accepted = shots.filter((_, i) => results[i].status === 200).map((s) => s.b.id);
      // One accepted; the other five refused before any node work was signed for them.
      expect(results.map((r) => r.status).sort()).toEqual([200, 429, 429, 429, 429, 429]);
      for (const r of results.filter((x) => x.status === 429)) expect(r.body.cause).toMatch(/one at a time until one does/);
      await mineAt(accepted, t);
    } finally {
      await setAutomine(env.rpcUrl, true);
    }
    const row = await final(accepted[0]);
    expect(row.status).toBe('FAILED');
    expect(String(row.fee_received)).toBe('0');
    const after = await books();
    // Ground truth: the relayer paid the gas and got no fee; what it paid is within what it counted.
    expect(after.fusd).toBe(before.fusd);
    const spent = before.eth - after.eth;
    expect(spent).toBeGreaterThan(0n);
    expect(spent).toBeLessThanOrEqual(BigInt(row.exposure_wei));
    expect(row.fee_final).toBe(false);
    // Barred where it came from: the client's /24 and its wallet (keyless), and the contract it called.
    const bars = await env.services.bars.list();
    expect(bars.map((b) => `${b.kind} ${b.value}`).sort()).toEqual([`contract ${taker.toLowerCase()}`, 'key-client none|198.51.100.0/24', `key-wallet none|${row.fee_payer}`].sort());
    // The next bundle from that network is refused before any node work, and so is its FeeOptions.
    const next = await shot((f) => [fee(f)], '203.0.113.1');
    const again = await sendFrom('198.51.100.99', next.u.wallet.address, next.b.entrypoint, next.b.input);
    expect(again.status).toBe(403);
    const quote = await feeOptionsFrom('198.51.100.99', next.u.wallet.address, next.u.wallet.address, next.b.walletInput);
    expect(quote.status, JSON.stringify(quote.body)).toBe(403);
    expect(quote.body.cause).toMatch(/barred/);
    // The contract is barred for every caller: from another network, a bundle calling it is refused too.
    const v = user();
    const call = await signedBundle({ signerKey: v.key, wallet: v.wallet, chainId: env.chainId, txs: [fee(next.f * 10n), takerCall(taker, FAR)], deployed: false });
    const elsewhere = await sendFrom('203.0.113.1', v.wallet.address, call.entrypoint, call.input);
    expect(elsewhere.status).toBe(403);
    expect(elsewhere.body.cause).toMatch(new RegExp(`contract ${taker.toLowerCase()}`));
    for (const b of bars) await env.services.bars.lift(b.kind, b.value);
  });

  it('keyless strangers from many networks, with many wallets and contracts, cost at most the keyless budget', async () => {
    const gasPrice = await env.public.getGasPrice();
    const t = (await now()) + 1_000n;
    // Eight attackers, each from a /24 of its own with its own wallet and its own contract.
    const takers = await env.chain.deploy(Array.from({ length: 8 }, () => ({ contract: 'TestFeeTaker' })));
    const shots = await Promise.all(takers.map((taker, i) => shot((f) => [fee(f), takerCall(taker, t)], `192.0.${i + 2}.1`)));
    const before = await books();
    const ids: string[] = [];
    await setAutomine(env.rpcUrl, false);
    try {
      const results = [];
      for (const [i, s] of shots.entries()) results.push(await sendFrom(`192.0.${i + 2}.1`, s.u.wallet.address, s.b.entrypoint, s.b.input));
      for (const [i, r] of results.entries()) {
        if (r.status === 200) ids.push(shots[i].b.id);
        else {
          expect(r.status, JSON.stringify(r.body)).toBe(429);
          expect(r.body.cause).toMatch(/loss budget for callers without an access key is full/);
        }
      }
      expect(ids.length).toBeGreaterThan(0);
      expect(ids.length).toBeLessThan(8);
      await mineAt(ids, t);
    } finally {
      await setAutomine(env.rpcUrl, true);
    }
    const rows = await Promise.all(ids.map(final));
    expect(rows.map((r) => r.status)).toEqual(ids.map(() => 'FAILED'));
    const after = await books();
    expect(after.fusd).toBe(before.fusd);
    // Ground truth: what they made the relayer spend is within what their exposure counted, and so within
    // the keyless budget at the price it was judged at (the base fee did not climb: one block was mined).
    const spent = before.eth - after.eth;
    expect(spent).toBeLessThanOrEqual(rows.reduce((a, r) => a + BigInt(r.exposure_wei), 0n));
    expect(spent).toBeLessThanOrEqual(BigInt(KEYLESS_GAS) * gasPrice);
    for (const b of await env.services.bars.list()) await env.services.bars.lift(b.kind, b.value);
  });
});

describe('bars hit the attacker, not the dapp', () => {
  it("one attacker's unpaid fee bars its network and wallet under the key, not the key: another user of the dapp still relays; several networks bar the key", async () => {
    const taker = await deployTaker();
    const hit = async (ip: string) => {
      const t = (await now()) + 1_000n;
      const s = await shot((f) => [fee(f), takerCall(taker, t)], ip, key());
      const row = await relayAt(ip, s.u.wallet.address, s.b, t, key());
      expect(row.status).toBe('FAILED');
      return row;
    };
    await hit('10.9.1.1');
    // The contract's bar is lifted to let the same attacker try again from elsewhere.
    await env.services.bars.lift('contract', taker);
    const keyId = (await env.services.db.query<{ key_id: string }>('SELECT key_id FROM meta_txns WHERE key_id IS NOT NULL LIMIT 1')).rows[0].key_id;
    const bars = (await env.services.bars.list()).map((b) => `${b.kind} ${b.value}`);
    expect(bars).toContain(`key-client ${keyId}|10.9.1.0/24`);
    expect(bars).not.toContain(`key ${keyId}`);

    // An honest user of the same dapp from another network pays and relays.
    const honest = await shot((f) => [fee(f)], '10.20.30.40', key());
    const ok = await sendFrom('10.20.30.40', honest.u.wallet.address, honest.b.entrypoint, honest.b.input, key());
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect((await final(honest.b.id)).status).toBe('SUCCEEDED');
    // The attacker's network is refused, whichever address of it.
    const blocked = await shot((f) => [fee(f)], '10.77.0.1', key());
    expect((await sendFrom('10.9.1.200', blocked.u.wallet.address, blocked.b.entrypoint, blocked.b.input, key())).status).toBe(403);

    // A second network does it too (keyBarAfterNetworks 2 here): the key is barred whole, and the operator is told.
    const metric = async () => Number(/metarelay_relayer_key_bars_total\{[^}]*\} (\d+)/.exec(await env.services.metrics.registry.metrics())?.[1] ?? 0);
    const alerts = await metric();
    await hit('10.9.2.1');
    expect((await env.services.bars.list()).map((b) => `${b.kind} ${b.value}`)).toContain(`key ${keyId}`);
    expect(await metric()).toBe(alerts + 1);
    const later = await sendFrom('10.77.0.3', blocked.u.wallet.address, blocked.b.entrypoint, blocked.b.input, key());
    expect(later.status).toBe(403);
    expect(later.body.cause).toMatch(/this access key is barred/);
    for (const b of await env.services.bars.list()) await env.services.bars.lift(b.kind, b.value);
  });
});

describe('a fee put first is final', () => {
  it('[fee, bomb] with revertOnError=false and a gas limit of its own: the bomb goes off when mined, the fee still arrives and pays for the gas', async () => {
    const taker = await deployTaker();
    const t = (await now()) + 1_000n;
    // 256 KB of revert data once the clock passes t: the wallet copies and logs it.
    const bomb: SequenceTx = { to: taker, data: encodeFunctionData({ abi: takerAbi, functionName: 'bomb', args: [t, 262_144n] }), revertOnError: false, gasLimit: 400_000n };
    const s = await shot((f) => [fee(f), bomb], '100.64.1.1', key());
    const before = await books();
    const row = await relayAt('100.64.1.1', s.u.wallet.address, s.b, t, key());
    // The bomb's call failed (logged), the bundle did not: the fee arrived.
    expect(row.status).toBe('PARTIALLY_FAILED');
    expect(row.fee_final).toBe(true);
    expect(String(row.fee_received)).toBe(s.f.toString());
    const after = await books();
    expect(after.fusd - before.fusd).toBe(s.f);
    // Ground truth: the fee's worth covers the gas the relayer paid.
    const spent = before.eth - after.eth;
    expect(spent).toBeLessThanOrEqual(s.f * WEI_PER_FUSD_UNIT);
    // Only the part before the fee counted against the loss budgets.
    expect(BigInt(row.exposure_wei)).toBeLessThan(BigInt(row.cover_wei) / 4n);
  });

  it('the same bomb behind a fee sent last, or with no gas limit of its own, is not final: counted whole against the budgets', async () => {
    const taker = await deployTaker();
    const last = await shot(
      (f) => [{ to: taker, data: encodeFunctionData({ abi: takerAbi, functionName: 'bomb', args: [FAR, 262_144n] }), revertOnError: false, gasLimit: 400_000n }, fee(f)],
      '100.64.2.1',
      key(),
    );
    const r = await sendFrom('100.64.2.1', last.u.wallet.address, last.b.entrypoint, last.b.input, key());
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const row = await final(last.b.id);
    expect(row.fee_final).toBe(false);
    expect(BigInt(row.exposure_wei)).toBeGreaterThanOrEqual(BigInt(row.gas_limit) * BigInt(row.gas_price_priced));
  });
});
