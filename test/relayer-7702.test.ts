// EIP-7702 relayed end to end on an anvil running the prague hardfork: an EOA signs an authorization
// delegating to DelegatedWallet and a bundle for itself; the relayer carries both in a type-4
// transaction. Judged on chain: the EOA's code, token balances, the fee collector, the senders' nonces.
import { commons } from '@0xsequence/core';
import { RpcRelayerProto as proto } from '@0xsequence/relayer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWalletClient, encodeFunctionData, http, parseEther, parseTransaction, toHex, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, sign, signAuthorization } from 'viem/accounts';
import { deployDelegatedWallet } from '../src/devchain/index.ts';
import { authorizationsOf, sign as signAttempt } from '../src/relayer/engine/attempts.ts';
import { PAYEE, SENDER_KEYS, erc20, sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { startTokenChain, type TokenChain } from './support/token-chain.ts';
import type { SequenceTx } from './support/sequence-wallet.ts';
import { mine, setAutomine, setNextBaseFee, txpoolContent, txpoolHashes } from './support/anvil-control.ts';
import { waitFor } from './support/relay-load.ts';
import { runsBundle } from './support/provider-proxy.ts';
import type { RpcCall } from './support/rpc-proxy.ts';
import { finalReceipt } from './support/meta-final.ts';

let chain: TokenChain;
let env: RelayerEnv;
/** The accepted implementation, and a second deployment of the same code the relayer does not accept. */
let impl: Address;
let stranger: Address;

const SENDERS = SENDER_KEYS.map((k) => privateKeyToAccount(k).address);
const FEE = 10_000_000n; // 10 FUSD: well above the price of these bundles

beforeAll(async () => {
  chain = await startTokenChain({ anvilArgs: ['--hardfork', 'prague'] });
  impl = await deployDelegatedWallet(chain.anvil.rpcUrl, chain.artifacts);
  [stranger] = await chain.deploy([{ contract: 'DelegatedWallet' }]);
  // Through a provider-like proxy, without faults but for the tests of a node behind.
  env = await startRelayerEnv({ chain, relayer: { delegatedWallets: [impl] }, provider: {} });
}, 180_000);
afterAll(async () => {
  await env?.close();
  await chain?.stop();
});

const key = () => ({ 'x-access-key': env.accessKey });
const mint = (to: Address, amount: bigint) => env.chain.send([{ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [to, amount] }]);
const balance = (owner: Address) => env.public.readContract({ address: env.token, abi: erc20, functionName: 'balanceOf', args: [owner] });
const sent = async () => (await Promise.all(SENDERS.map((address) => env.public.getTransactionCount({ address })))).reduce((a, b) => a + b, 0);
const code = (a: Address) => env.public.getCode({ address: a });
const designatorOf = (a: Address) => `0xef0100${a.slice(2).toLowerCase()}`;
const transfer = (to: Address, amount: bigint): SequenceTx => ({ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [to, amount] }) });
const fee = (amount = FEE) => transfer(PAYEE, amount);

function eoa() {
  const privateKey = generatePrivateKey();
  return { privateKey, address: privateKeyToAccount(privateKey).address };
}
type Eoa = ReturnType<typeof eoa>;

/** The EOA's own bundle for itself, encoded and hashed by the official v2 client (@0xsequence/core). */
async function bundle(user: Eoa, txs: SequenceTx[], nonce = 0n, signer: Hex = user.privateKey): Promise<{ input: Hex; id: string }> {
  const transactions = txs.map((t) => ({
    to: t.to,
    value: t.value ?? 0n,
    data: t.data ?? '0x',
    gasLimit: t.gasLimit ?? 0n,
    delegateCall: t.delegateCall ?? false,
    revertOnError: t.revertOnError ?? true,
  }));
  const subdigest = commons.transaction.subdigestOfTransactions(user.address, env.chainId, nonce, transactions) as Hex;
  const signature = await sign({ hash: subdigest, privateKey: signer, to: 'hex' });
  const input = commons.transaction.encodeBundleExecData({
    entrypoint: user.address,
    transactions,
    nonce,
    signature,
    chainId: BigInt(env.chainId),
    intent: { id: subdigest, wallet: user.address },
  } as never) as Hex;
  return { input, id: subdigest.slice(2) };
}

/** EIP7702Authorization as the wire carries it; signed with viem's signAuthorization. */
async function authorize(user: Eoa, over: { implementation?: Address; chainId?: number; nonce?: number; signer?: Hex } = {}) {
  const implementation = over.implementation ?? impl;
  const chainId = over.chainId ?? env.chainId;
  const nonce = over.nonce ?? (await env.public.getTransactionCount({ address: user.address }));
  const signature = await signAuthorization({ address: implementation, chainId, nonce, privateKey: over.signer ?? user.privateKey, to: 'hex' });
  return { chainId, implementation, nonce, signature };
}

const client = () => new proto.Relayer(env.relayerUrl, fetch);

async function send(user: Eoa, input: Hex, authorization: unknown, headers: Record<string, string> = key(), extra: Record<string, unknown> = {}) {
  return env.call('SendMetaTxn', { call: { walletAddress: user.address, contract: user.address, input, authorization }, ...extra }, headers);
}

const final = (id: string) => finalReceipt(env, id, { headers: key(), tries: 40 });

async function stored(id: string) {
  const r = await env.services.db.query<Record<string, unknown>>('SELECT * FROM meta_txns WHERE id = $1', [id.replace(/^0x/, '').toLowerCase()]);
  return r.rows[0];
}

async function fund(user: Eoa, eth: bigint) {
  await env.public.request({ method: 'anvil_setBalance' as never, params: [user.address, toHex(eth)] as never });
}

describe('a delegating EOA, relayed in a type-4 transaction', () => {
  const user = eoa();
  const to = eoa().address;

  it('quotes with the authorization, relays bundle and delegation together, and the fee arrives', async () => {
    await mint(user.address, 100n * FEE);
    const authorization = await authorize(user);
    const unpaid = await bundle(user, [transfer(to, 1_000n)]);
    // The official client's webrpc encoding: MetaTxn.authorization passes through as the wire type has it.
    const quoted = await client().feeOptions({ wallet: user.address, to: user.address, data: unpaid.input, authorization } as never, key());
    const option = quoted.options.find((o) => o.token.symbol === 'FUSD')!;
    expect(BigInt(option.value)).toBeGreaterThan(0n);

    const before = { payee: await balance(PAYEE), sent: await sent() };
    const paid = await bundle(user, [transfer(to, 1_000n), fee(BigInt(option.value))]);
    const r = await client().sendMetaTxn({ call: { walletAddress: user.address, contract: user.address, input: paid.input, authorization }, quote: quoted.quote } as never, key());
    expect(r.status).toBe(true);
    const receipt = await final(r.txnHash);
    expect(receipt.status, JSON.stringify(receipt)).toBe('SUCCEEDED');

    expect(await code(user.address)).toBe(designatorOf(impl));
    expect(await balance(to)).toBe(1_000n);
    expect(await balance(PAYEE)).toBe(before.payee + BigInt(option.value));
    expect(await sent()).toBe(before.sent + 1);
    const tx = await env.public.getTransaction({ hash: receipt.txnHash });
    expect(tx.type).toBe('eip7702');
    expect(tx.authorizationList?.map((a) => [a.address.toLowerCase(), a.nonce])).toEqual([[impl.toLowerCase(), authorization.nonce]]);
  }, 60_000);

  it("relays the delegated EOA's next bundle without an authorization, in a plain transaction", async () => {
    const before = { payee: await balance(PAYEE), to: await balance(to) };
    const b = await bundle(user, [transfer(to, 2_000n), fee()], 1n);
    const r = await send(user, b.input, undefined);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const receipt = await final(r.body.txnHash);
    expect(receipt.status, JSON.stringify(receipt)).toBe('SUCCEEDED');
    expect(await balance(to)).toBe(before.to + 2_000n);
    expect(await balance(PAYEE)).toBe(before.payee + FEE);
    expect((await env.public.getTransaction({ hash: receipt.txnHash })).type).toBe('eip1559');
    expect(
      await env.public.readContract({
        address: user.address,
        abi: [{ type: 'function', name: 'readNonce', stateMutability: 'view', inputs: [{ type: 'uint256' }], outputs: [{ type: 'uint256' }] }],
        functionName: 'readNonce',
        args: [0n],
      }),
    ).toBe(2n);
    expect((await stored(r.body.txnHash))!.authorization).toBeNull();
  }, 60_000);

  it('an authorization sent again to the delegated EOA is not carried (it is already delegated)', async () => {
    const b = await bundle(user, [transfer(to, 1n), fee()], 2n);
    const r = await send(user, b.input, await authorize(user));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const receipt = await final(r.body.txnHash);
    expect(receipt.status).toBe('SUCCEEDED');
    expect((await env.public.getTransaction({ hash: receipt.txnHash })).type).toBe('eip1559');
  }, 60_000);
});

describe('authorizations that must not be relayed: refused at intake, nothing stored, nothing sent', () => {
  const cases: Array<[string, (u: Eoa) => Promise<unknown>, RegExp]> = [
    ['signed by another key', async (u) => authorize(u, { signer: eoa().privateKey }), /^authorization\.signature: signed by 0x[0-9a-fA-F]{40}, not by the wallet/],
    [
      'for an implementation the relayer does not accept',
      async (u) => authorize(u, { implementation: stranger }),
      /^authorization\.implementation: .* is not a wallet implementation this relayer accepts/,
    ],
    ['for another chain', async (u) => authorize(u, { chainId: env.chainId + 1 }), /^authorization\.chainId: \d+ is not this network's chain id/],
    ['for a stale account nonce', async (u) => authorize(u, { nonce: 0 }), /^authorization\.nonce: 0 is not the account nonce of .* \(1\)/],
    ['malformed', async () => ({ chainId: 1, implementation: 'nope', nonce: 0, signature: '0x' }), /^call\.authorization\.implementation: must be an address/],
  ];
  for (const [what, make, cause] of cases) {
    it(what, async () => {
      const u = eoa();
      await mint(u.address, 10n * FEE);
      // The stale case: the EOA has sent a transaction of its own since (its nonce is 1).
      if (what.includes('stale')) {
        await fund(u, parseEther('1'));
        const w = createWalletClient({ account: privateKeyToAccount(u.privateKey), transport: http(env.rpcUrl) });
        await env.public.waitForTransactionReceipt({ hash: await w.sendTransaction({ to: u.address, value: 0n, chain: null }) });
      }
      const before = await sent();
      const b = await bundle(u, [transfer(eoa().address, 1n), fee()]);
      const r = await send(u, b.input, await make(u));
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.error).toBe('InvalidArgument');
      expect(r.body.cause).toMatch(cause);
      const q = await env.call('FeeOptions', { wallet: u.address, to: u.address, data: b.input, authorization: await make(u) }, key());
      expect(q.status, JSON.stringify(q.body)).toBe(400);
      expect(await stored(b.id)).toBeUndefined();
      expect(await sent()).toBe(before);
      expect(await code(u.address)).toBeUndefined();
    }, 60_000);
  }

  it('an EOA that is not delegated and brings no authorization is not a wallet', async () => {
    const u = eoa();
    const b = await bundle(u, [transfer(eoa().address, 1n), fee()]);
    const r = await send(u, b.input, undefined);
    expect(r.status).toBe(400);
    expect(r.body.cause).toMatch(/is not deployed/);
    expect(await stored(b.id)).toBeUndefined();
  });
});

describe('an authorization voided between intake and dispatch', () => {
  it('the EOA sends a transaction of its own while the bundle is queued: dropped with the reason, nothing sent, no fee taken', async () => {
    const u = eoa();
    await mint(u.address, 10n * FEE);
    await fund(u, parseEther('1'));
    const dispatcher = env.services.dispatchers[0];
    await dispatcher.stop();
    const before = { sent: await sent(), payee: await balance(PAYEE), eth: 0n };
    let id: string;
    try {
      const b = await bundle(u, [transfer(eoa().address, 1n), fee()]);
      const r = await send(u, b.input, await authorize(u));
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      id = r.body.txnHash;
      expect((await stored(id))!.status).toBe('QUEUED');
      const w = createWalletClient({ account: privateKeyToAccount(u.privateKey), transport: http(env.rpcUrl) });
      await env.public.waitForTransactionReceipt({ hash: await w.sendTransaction({ to: u.address, value: 0n, chain: null }) });
      before.eth = await env.public.getBalance({ address: u.address });
    } finally {
      dispatcher.start();
    }
    const receipt = await final(id);
    expect(receipt.status).toBe('DROPPED');
    expect((await stored(id))!.revert_reason).toMatch(/EIP-7702 authorization is void: it is for account nonce 0 of .*, which is at 1/);
    expect(await sent()).toBe(before.sent);
    expect(await balance(PAYEE)).toBe(before.payee);
    expect(await env.public.getBalance({ address: u.address })).toBe(before.eth);
    expect(await code(u.address)).toBeUndefined();
  }, 60_000);

  it('the EOA re-delegates to another implementation while the bundle is queued: dropped, its delegation is its own', async () => {
    const u = eoa();
    await mint(u.address, 10n * FEE);
    await fund(u, parseEther('1'));
    const dispatcher = env.services.dispatchers[0];
    await dispatcher.stop();
    const before = { sent: await sent(), payee: await balance(PAYEE) };
    let id: string;
    try {
      const b = await bundle(u, [transfer(eoa().address, 1n), fee()]);
      const r = await send(u, b.input, await authorize(u));
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      id = r.body.txnHash;
      // Self-sponsored type-4: the authorization's nonce is the transaction's + 1.
      const account = privateKeyToAccount(u.privateKey);
      const w = createWalletClient({ account, transport: http(env.rpcUrl) });
      const auth = await w.signAuthorization({ account, contractAddress: stranger, chainId: env.chainId, nonce: 1 });
      await env.public.waitForTransactionReceipt({ hash: await w.sendTransaction({ to: u.address, data: '0x', authorizationList: [auth], chain: null }) });
      expect(await code(u.address)).toBe(designatorOf(stranger));
    } finally {
      dispatcher.start();
    }
    const receipt = await final(id);
    expect(receipt.status).toBe('DROPPED');
    expect(await sent()).toBe(before.sent);
    expect(await balance(PAYEE)).toBe(before.payee);
    expect(await code(u.address)).toBe(designatorOf(stranger));
  }, 60_000);
});

describe('what intake refuses with an authorization besides a bad one', () => {
  it('together with preconditions, or two different authorizations in one call', async () => {
    const u = eoa();
    await mint(u.address, 10n * FEE);
    const b = await bundle(u, [transfer(eoa().address, 1n), fee()]);
    const auth = await authorize(u);
    const preconditions = [{ type: 'erc20-balance', chainId: env.chainId, ownerAddress: u.address, tokenAddress: env.token, minAmount: '1' }];
    const withWait = await send(u, b.input, auth, key(), { preconditions });
    expect(withWait.status, JSON.stringify(withWait.body)).toBe(400);
    expect(withWait.body.cause).toMatch(/^authorization: not accepted together with preconditions/);
    const two = await send(u, b.input, auth, key(), { authorization: await authorize(u, { chainId: 0 }) });
    expect(two.status, JSON.stringify(two.body)).toBe(400);
    expect(two.body.cause).toMatch(/two different authorizations/);
    expect(await stored(b.id)).toBeUndefined();
    // chainId 0 (any chain) is accepted.
    const any = await send(u, b.input, await authorize(u, { chainId: 0 }));
    expect(any.status, JSON.stringify(any.body)).toBe(200);
    expect((await final(any.body.txnHash)).status).toBe('SUCCEEDED');
    expect(await code(u.address)).toBe(designatorOf(impl));
  }, 60_000);
});

describe('sponsorship of a delegating EOA follows the same rules as any wallet', () => {
  it('without a rule covering it a bundle that pays no fee is refused; with a WALLET rule it is relayed, no fee taken', async () => {
    const u = eoa();
    await mint(u.address, 10n * FEE);
    const to = eoa().address;
    const b = await bundle(u, [transfer(to, 5n)]);
    const refused = await send(u, b.input, await authorize(u));
    expect(refused.status, JSON.stringify(refused.body)).toBe(402);
    expect(await stored(b.id)).toBeUndefined();
    // A rule for another wallet does not cover it.
    await sponsor(env, 'WALLET', eoa().address);
    expect((await send(u, b.input, await authorize(u))).status).toBe(402);

    await sponsor(env, 'WALLET', u.address);
    const before = { payee: await balance(PAYEE), sent: await sent() };
    const r = await send(u, b.input, await authorize(u));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const receipt = await final(r.body.txnHash);
    expect(receipt.status).toBe('SUCCEEDED');
    expect((await stored(r.body.txnHash))!.sponsored).toBe(true);
    expect(await balance(to)).toBe(5n);
    expect(await balance(PAYEE)).toBe(before.payee);
    expect(await code(u.address)).toBe(designatorOf(impl));
    expect(await sent()).toBe(before.sent + 1);
  }, 60_000);
});

describe('DelegatedWallet on chain', () => {
  it('refuses delegatecall transactions and a signature of another key', async () => {
    const u = eoa();
    await mint(u.address, 10n * FEE);
    const sponsoredBefore = await sent();
    // Delegatecall: the simulation with the delegation applied reverts, so it is not accepted.
    const dc = await bundle(u, [{ ...transfer(eoa().address, 1n), delegateCall: true }, fee()]);
    const r1 = await send(u, dc.input, await authorize(u));
    expect(r1.status, JSON.stringify(r1.body)).toBe(400);
    expect(r1.body.cause).toMatch(/DelegateCallRefused/);
    const forged = await bundle(u, [transfer(eoa().address, 1n), fee()], 0n, eoa().privateKey);
    const r2 = await send(u, forged.input, await authorize(u));
    expect(r2.status, JSON.stringify(r2.body)).toBe(400);
    expect(r2.body.cause).toMatch(/InvalidSignature/);
    expect(await sent()).toBe(sponsoredBefore);
  }, 60_000);
});

describe('replacements keep the authorization', () => {
  it('a replacement of a type-4 attempt is type-4 with the same authorization list', async () => {
    const u = eoa();
    const auth = await authorize(u);
    const account = privateKeyToAccount(SENDER_KEYS[0]);
    const fees = { type: 'eip1559' as const, maxFeePerGas: 2_000_000_000n, maxPriorityFeePerGas: 1_000_000n };
    const first = await signAttempt(account, env.chainId, { nonce: 7, to: u.address, data: '0x1234', value: 0n, gas: 100_000n, fees, authorization: { ...auth, signature: auth.signature as Hex } });
    const again = await signAttempt(account, env.chainId, {
      nonce: 7,
      to: u.address,
      data: '0x1234',
      value: 0n,
      gas: 100_000n,
      fees: { ...fees, maxFeePerGas: 2_200_000_000n },
      authorization: authorizationsOf(first.raw),
    });
    const tx = parseTransaction(again.raw);
    expect(tx.type).toBe('eip7702');
    expect(tx.authorizationList).toEqual(parseTransaction(first.raw).authorizationList);
    expect(tx.authorizationList![0].address.toLowerCase()).toBe(impl.toLowerCase());
    expect(authorizationsOf((await signAttempt(account, env.chainId, { nonce: 8, to: u.address, data: '0x', value: 0n, gas: 21_000n, fees })).raw)).toBeUndefined();
  });
});

describe('a type-4 attempt priced out is replaced by a type-4 attempt with the same authorization (automine off)', () => {
  it('replaced after the base fee jumps, mined once, the EOA delegated', async () => {
    const u = eoa();
    await mint(u.address, 10n * FEE);
    const to = eoa().address;
    const b = await bundle(u, [transfer(to, 7n), fee()]);
    const auth = await authorize(u);
    await setAutomine(env.rpcUrl, false);
    const dispatcher = env.services.dispatchers[0];
    const head = async () => Number(await env.public.getBlockNumber({ cacheTime: 0 }));
    const mineAndSweep = async () => {
      await mine(env.rpcUrl, 1);
      const h = await head();
      await waitFor(`the sweep of block ${h}`, async () => dispatcher.head >= h, 20_000, 10);
      await new Promise((r) => setTimeout(r, 150));
    };
    const attempts = async (id: string) =>
      (
        await env.services.db.query<{ hash: Hex; raw: Hex; status: string; max_fee: string; broadcast_at: Date | null }>(
          `SELECT t.hash, t.raw, t.status, t.max_fee::text AS max_fee, t.broadcast_at FROM meta_txns m JOIN relay_txs t ON t.chain_id = m.chain_id AND t.sender = m.sender AND t.nonce = m.txn_nonce
           WHERE m.chain_id = $1 AND m.id = $2 ORDER BY t.id`,
          [env.chainId, id.replace(/^0x/, '')],
        )
      ).rows;
    try {
      const r = await send(u, b.input, auth);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      const id: string = r.body.txnHash;
      // Broadcast, not only signed: an attempt is recorded before it goes out, and one priced out before it
      // reaches the node is refused there (a new first attempt, maybe from another sender), not replaced.
      const [first] = await waitFor('the first broadcast', async () => {
        const a = await attempts(id);
        return a.length && a[0].broadcast_at ? a : undefined;
      });
      expect(txpoolHashes(await txpoolContent(env.rpcUrl))).toContain(first.hash);
      await setNextBaseFee(env.rpcUrl, BigInt(first.max_fee) * 3n);
      let all = await attempts(id);
      for (let i = 0; i < 8 && all.length < 2; i++) {
        await mineAndSweep();
        all = await attempts(id);
      }
      expect(all.length).toBeGreaterThanOrEqual(2);
      const [a, second] = all.map((x) => parseTransaction(x.raw));
      expect(a.type).toBe('eip7702');
      expect(second.type).toBe('eip7702');
      expect(second.nonce).toBe(a.nonce);
      expect(second.authorizationList).toEqual(a.authorizationList);
      expect(second.authorizationList![0].address.toLowerCase()).toBe(impl.toLowerCase());
      // Blocks are mined by hand here: one block may come before the last replacement's broadcast (a
      // busy machine), so a block is mined per look until the row is SUCCEEDED.
      await waitFor(
        'SUCCEEDED',
        async () => {
          if ((await stored(id))?.status === 'SUCCEEDED') return true;
          await mineAndSweep();
          return false;
        },
        60_000,
        10,
      );
      expect((await attempts(id)).filter((x) => x.status === 'MINED' || x.status === 'CONFIRMED').length).toBe(1);
    } finally {
      await setAutomine(env.rpcUrl, true);
    }
    expect(await code(u.address)).toBe(designatorOf(impl));
    expect(await balance(to)).toBe(7n);
  }, 120_000);
});

describe('a race lost to the EOA after the last check (automine off)', () => {
  it('an EOA re-delegating to gas-burning code in the same block costs the relayer the whole gas limit; the signer is barred from further delegated calls', async () => {
    const u = eoa();
    await mint(u.address, 10n);
    await fund(u, parseEther('1'));
    await sponsor(env, 'WALLET', u.address);
    // Code that burns every gas it is given (INVALID), for the EOA to delegate to.
    const burner = eoa().address;
    await env.public.request({ method: 'anvil_setCode' as never, params: [burner, '0xfe'] as never });
    const b = await bundle(u, [transfer(eoa().address, 1n)]);
    const head = async () => Number(await env.public.getBlockNumber({ cacheTime: 0 }));
    const dispatcher = env.services.dispatchers[0];
    await setAutomine(env.rpcUrl, false);
    let id: string;
    let raw: Hex;
    try {
      const r = await send(u, b.input, await authorize(u));
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      id = r.body.txnHash;
      // In the node's pool before the EOA's own transaction is sent: the race is for the block, not the pool.
      raw = await waitFor('the broadcast', async () => {
        const a = await env.services.db.query<{ raw: Hex; hash: Hex }>(
          'SELECT t.raw, t.hash FROM meta_txns m JOIN relay_txs t ON t.chain_id = m.chain_id AND t.sender = m.sender AND t.nonce = m.txn_nonce WHERE m.chain_id = $1 AND m.id = $2 AND t.broadcast_at IS NOT NULL',
          [env.chainId, id],
        );
        const row = a.rows[0];
        return row && txpoolHashes(await txpoolContent(env.rpcUrl)).includes(row.hash) ? row.raw : undefined;
      });
      // The EOA's own type-4 transaction, tipped to go first in the block: it re-delegates to the burner
      // (its authorization nonce is its transaction's + 1), which also voids the relayer's authorization.
      const account = privateKeyToAccount(u.privateKey);
      const w = createWalletClient({ account, transport: http(env.rpcUrl) });
      const auth = await w.signAuthorization({ account, contractAddress: burner, chainId: env.chainId, nonce: 1 });
      await w.sendTransaction({
        to: u.address,
        data: '0x',
        authorizationList: [auth],
        gas: 100_000n,
        maxFeePerGas: parseEther('0.0000001'),
        maxPriorityFeePerGas: parseEther('0.00000005'),
        chain: null,
      });
      for (let i = 0; i < 6 && (await stored(id))!.status !== 'FAILED'; i++) {
        await mine(env.rpcUrl, 1);
        const h = await head();
        await waitFor(`the sweep of block ${h}`, async () => dispatcher.head >= h, 20_000, 10);
      }
    } finally {
      await setAutomine(env.rpcUrl, true);
    }
    await waitFor('FAILED', async () => (await stored(id))?.status === 'FAILED', 30_000);
    // On chain: the EOA delegates to the burner, and the relayer's transaction burned its whole gas limit.
    expect(await code(u.address)).toBe(designatorOf(burner));
    const tx = parseTransaction(raw);
    const receipt = await env.public.getTransactionReceipt({ hash: (await env.services.db.query<{ hash: Hex }>(`SELECT hash FROM relay_txs WHERE raw = $1`, [raw])).rows[0].hash });
    expect(receipt.gasUsed).toBe(tx.gas);
    expect(receipt.gasUsed).toBeGreaterThan(46_000n);
    // Counted against its signer: a wallet bar with what it cost, and its next delegated call is refused.
    const bars = await env.services.db.query<{ kind: string; value: string; fee_token: string | null; owed: string }>(
      'SELECT kind, value, fee_token, owed::text AS owed FROM relay_bars WHERE meta_txn_id = $1',
      [id],
    );
    expect(bars.rows).toEqual([{ kind: 'wallet', value: u.address.toLowerCase(), fee_token: 'eip7702', owed: (receipt.gasUsed * receipt.effectiveGasPrice).toString() }]);
    const again = await bundle(u, [transfer(eoa().address, 1n)], 1n);
    const refused = await send(u, again.input, await authorize(u));
    expect(refused.status).toBe(403);
    expect(refused.body.cause).toMatch(/barred from relaying: its EIP-7702 call .* reached no wallet/);
  }, 120_000);
});

describe("an EOA's account answered by a node a block behind (load-balanced providers): a void authorization is never carried", () => {
  const dispatcher = () => env.services.dispatchers[0];
  const TAGS = [undefined, 'latest', 'pending'];
  /** The EOA's nonce and code read at a tag (not pinned to a block): what a pool of nodes behind answers. */
  const accountOf = (who: Address) => (call: RpcCall) =>
    (call.method === 'eth_getTransactionCount' || call.method === 'eth_getCode') && String(call.params[0]).toLowerCase() === who.toLowerCase() && TAGS.includes(call.params[1] as string);
  const lastSigned = async () => Number((await env.services.db.query<{ n: string }>('SELECT coalesce(max(id), 0)::text AS n FROM relay_txs')).rows[0].n);

  /**
   * Ground truth of the relayer's money: what the payee's fee-token balance rose by in the block of each
   * transaction the relayer signed after `mark` (each mined in a block of its own: automine).
   */
  async function feesOfSigned(mark: number): Promise<bigint[]> {
    const txs = await env.services.db.query<{ hash: Hex }>(`SELECT hash FROM relay_txs WHERE id > $1 AND kind <> 'filler' ORDER BY id`, [mark]);
    const at = (blockNumber: bigint) => env.public.readContract({ address: env.token, abi: erc20, functionName: 'balanceOf', args: [PAYEE], blockNumber });
    const out: bigint[] = [];
    for (const t of txs.rows) {
      const r = await env.public.waitForTransactionReceipt({ hash: t.hash, timeout: 20_000 });
      out.push((await at(r.blockNumber)) - (await at(r.blockNumber - 1n)));
    }
    return out;
  }

  /** An EOA with fee tokens and ether whose authorization (for nonce 0) it voids with a transaction of its own; `between` runs after signing. */
  async function voided(between?: (u: Eoa, auth: Awaited<ReturnType<typeof authorize>>) => Promise<void>) {
    const u = eoa();
    await mint(u.address, 10n * FEE);
    await fund(u, parseEther('1'));
    const auth = await authorize(u);
    await between?.(u, auth);
    const w = createWalletClient({ account: privateKeyToAccount(u.privateKey), transport: http(env.rpcUrl) });
    const { blockNumber } = await env.public.waitForTransactionReceipt({ hash: await w.sendTransaction({ to: u.address, value: 0n, chain: null }) });
    expect(await env.public.getTransactionCount({ address: u.address })).toBe(1);
    return { u, auth, block: Number(blockNumber) };
  }

  afterAll(() => env?.provider?.set({}));

  it('intake: refused as a stale nonce, though the node behind still counts the EOA at the signed one', async () => {
    const { u, auth, block } = await voided();
    // The relayer has seen the block of the EOA's transaction (its dispatcher's head).
    await waitFor(`the relayer at block ${block}`, async () => dispatcher().head >= block, 20_000);
    const mark = await lastSigned();
    const hits = env.provider!.hits.lag ?? 0;
    env.provider!.set({ lag: { blocks: 1, only: accountOf(u.address) } });
    let r: Awaited<ReturnType<typeof send>>;
    try {
      r = await send(u, (await bundle(u, [transfer(eoa().address, 1n), fee()])).input, auth);
      if (r.status === 200) await final(r.body.txnHash);
    } finally {
      env.provider!.set({});
    }
    expect(env.provider!.hits.lag ?? 0).toBeGreaterThan(hits);
    // Every transaction signed paid its fee, or none was signed.
    expect(await feesOfSigned(mark)).toEqual([]);
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body.cause).toMatch(/^authorization\.nonce: 0 is not the account nonce of .* \(1\)/);
  }, 60_000);

  /** A meta-transaction queued (dispatcher stopped) whose authorization the EOA then voids; its id. */
  async function queueVoided(): Promise<string> {
    let id = '';
    await voided(async (u, auth) => {
      const r = await send(u, (await bundle(u, [transfer(eoa().address, 1n), fee()])).input, auth);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      id = r.body.txnHash;
    });
    return id;
  }

  it('dispatch: voided while queued, dropped with the reason, though the node behind still counts the EOA at the signed one', async () => {
    let id = '';
    const mark = await lastSigned();
    await dispatcher().stop();
    try {
      id = await queueVoided();
      const u = (await stored(id))!.wallet as Address;
      env.provider!.set({ lag: { blocks: 1, only: accountOf(u) } });
    } finally {
      dispatcher().start();
    }
    const hits = env.provider!.hits.lag ?? 0;
    try {
      const receipt = await final(id);
      expect(env.provider!.hits.lag ?? 0).toBeGreaterThan(hits);
      expect(await feesOfSigned(mark)).toEqual([]);
      expect(receipt.status).toBe('DROPPED');
      expect((await stored(id))!.revert_reason).toMatch(/EIP-7702 authorization is void: it is for account nonce 0 of .*, which is at 1/);
    } finally {
      env.provider!.set({});
    }
  }, 60_000);

  it('dispatch: a run before signing that places the delegation is checked against the nonce at its own block; nothing signed while the node behind answers every other read', async () => {
    let id = '';
    let from = 0;
    const mark = await lastSigned();
    await dispatcher().stop();
    try {
      id = await queueVoided();
      // Every read but the runs of bundles goes to the pool behind: the dispatcher's head, so the block
      // it has seen, is the one before the EOA's transaction, where the authorization still holds. Only
      // the run before signing reaches the head, where the delegation placed by override hides that it does not.
      env.provider!.set({ lag: { blocks: 1, only: (call) => !runsBundle(call) } });
      from = env.provider!.proxy.calls.length;
    } finally {
      dispatcher().start();
    }
    try {
      await waitFor('a run of the bundle', async () => env.provider!.proxy.calls.slice(from).some(runsBundle), 20_000);
      await new Promise((r) => setTimeout(r, 1_500));
      expect(await feesOfSigned(mark)).toEqual([]);
      expect((await stored(id))!.status).toBe('QUEUED');
    } finally {
      env.provider!.set({});
    }
    // The node caught up: the authorization is seen void and the meta-transaction dropped, nothing sent.
    expect((await final(id)).status).toBe('DROPPED');
    expect(await feesOfSigned(mark)).toEqual([]);
  }, 60_000);
});
