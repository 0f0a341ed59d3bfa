// SendMetaTxn.preconditions: a meta-transaction that waits in PENDING_PRECONDITION until on-chain
// conditions hold, then is admitted as if sent at that moment — or is dropped. Judged by the chain (the
// recipients' balances, the senders' nonces, the payment address) and the stored rows and events.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, parseEther, zeroAddress, type Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { proto } from '@0xsequence/relayer';
import { ANVIL_DEPLOYER_KEY } from '../src/devchain/index.ts';
import { multicall } from '../src/chain/multicall.ts';
import { checkPreconditions, holds, readsOf, type PreconditionInput } from '../src/relayer/preconditions/conditions.ts';
import { PAYEE, SENDER_KEYS, erc20, sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { newSigner, signedBundle, walletFor, type SequenceTx } from './support/sequence-wallet.ts';
import { finalReceipt } from './support/meta-final.ts';

const SENDERS = SENDER_KEYS.map((k) => privateKeyToAccount(k).address);
const DEPLOYER = privateKeyToAccount(ANVIL_DEPLOYER_KEY).address;
const key = (env: RelayerEnv) => ({ 'x-access-key': env.accessKey });
const user = () => {
  const s = newSigner();
  return { key: s.privateKey, wallet: walletFor(s.address) };
};

/** What the senders have sent (and paid gas for), on chain. */
const sent = async (env: RelayerEnv) => (await Promise.all(SENDERS.map((address) => env.public.getTransactionCount({ address })))).reduce((a, b) => a + b, 0);
const balanceOf = (env: RelayerEnv, token: Address, owner: Address) => env.public.readContract({ address: token, abi: erc20, functionName: 'balanceOf', args: [owner] });
const mint = (env: RelayerEnv, token: Address, to: Address, amount: bigint) => env.chain.send([{ address: token, contract: 'DevERC20', functionName: 'mint', args: [to, amount] }]);
const tokenCall = (token: Address, fn: 'transfer' | 'approve', to: Address, amount: bigint): SequenceTx => ({
  to: token,
  data: encodeFunctionData({ abi: erc20, functionName: fn, args: [to, amount] }),
});
const erc20Balance = (env: RelayerEnv, owner: Address, token: Address, minAmount: bigint | string) => ({
  type: 'erc20-balance',
  chainId: env.chainId,
  ownerAddress: owner,
  tokenAddress: token,
  minAmount: minAmount.toString(),
});

async function stored(env: RelayerEnv, id: string) {
  const r = await env.services.db.query<Record<string, any>>('SELECT * FROM meta_txns WHERE id = $1', [id.replace(/^0x/, '').toLowerCase()]);
  return r.rows[0];
}

async function statuses(env: RelayerEnv, id: string): Promise<string[]> {
  const r = await env.services.db.query<{ payload: any }>(`SELECT payload FROM events WHERE type = 'metatxn.status' AND subject = $1 ORDER BY id`, [
    `metatxn:${env.chainId}:${id.replace(/^0x/, '').toLowerCase()}`,
  ]);
  return r.rows.map((x) => (typeof x.payload === 'string' ? JSON.parse(x.payload) : x.payload).status);
}

const final = (env: RelayerEnv, id: string) => finalReceipt(env, id);

/** Polls the stored row until `check` passes (the checker runs once per block and every few seconds without one). */
async function until(env: RelayerEnv, id: string, check: (row: Record<string, any>) => boolean) {
  for (let i = 0; i < 300; i++) {
    const row = await stored(env, id);
    if (row && check(row)) return row;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`meta-transaction ${id} never reached the expected state: ${JSON.stringify(await stored(env, id))}`);
}

describe('preconditions that come true later', () => {
  let env: RelayerEnv;
  let other: Address;

  beforeAll(async () => {
    env = await startRelayerEnv({ relayer: { maxQueuedPerWallet: 3, preconditionTimeoutSec: 600, maxPendingPreconditions: 6 } });
    [other] = await env.chain.deploy([{ contract: 'DevERC20', args: ['Other', 'OTH'] }]);
    await sponsor(env, 'CONTRACT', env.token);
  }, 120_000);
  afterAll(async () => {
    await env?.close();
  });

  it('waits in PENDING_PRECONDITION while an ERC20 balance is missing, and is relayed once it arrives (the official client encoding)', async () => {
    const u = user();
    const to = newSigner().address;
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [tokenCall(env.token, 'transfer', to, 500n)], deployed: false });
    const before = await sent(env);
    // The generated webrpc client of @0xsequence/relayer: minAmount is a bigint, sent as a decimal string.
    const client = new proto.Relayer(env.relayerUrl, fetch);
    const res = await client.sendMetaTxn(
      {
        call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input },
        preconditions: [{ type: 'erc20-balance', chainId: env.chainId, ownerAddress: u.wallet.address, tokenAddress: env.token, minAmount: 500n }],
      },
      key(env),
    );
    expect(res).toEqual({ status: true, txnHash: b.id.slice(2).toLowerCase() });

    const status = await env.call('GetMetaTxnStatus', { metaTxID: b.id });
    expect(status.body).toMatchObject({ status: 'PENDING_PRECONDITION', metaTxnEnqueued: true });
    expect(status.body.receipt).toBeUndefined();
    const receipt = await env.call('GetMetaTxnReceipt', { metaTxID: b.id });
    expect(receipt.body.receipt.status).toBe('PENDING_PRECONDITION');
    expect((await env.call('RuntimeStatus', {}, { 'x-access-key': env.accessKey })).body.status).toMatchObject({ queue: { queued: 0 }, waiting: 1 });

    // Blocks that do not change the condition change nothing; part of the balance is not enough.
    await mint(env, env.token, newSigner().address, 1_000n);
    await mint(env, env.token, u.wallet.address, 499n);
    await mint(env, env.token, newSigner().address, 1_000n);
    // A meta-transaction relayed meanwhile is a sync point: the dispatcher judged the waiting one at
    // every head it passed on the way (the checker runs before ready work is sent).
    const v = user();
    await mint(env, env.token, v.wallet.address, 1n);
    const plain = await signedBundle({ signerKey: v.key, wallet: v.wallet, chainId: env.chainId, txs: [tokenCall(env.token, 'transfer', to, 1n)], deployed: false });
    expect((await env.call('SendMetaTxn', { call: { walletAddress: v.wallet.address, contract: plain.entrypoint, input: plain.input } }, key(env))).status).toBe(200);
    expect((await final(env, plain.id)).status).toBe('SUCCEEDED');
    expect((await stored(env, b.id)).status).toBe('PENDING_PRECONDITION');
    expect(await sent(env)).toBe(before + 1);

    await mint(env, env.token, u.wallet.address, 1n);
    const r = await final(env, b.id);
    expect(r.status).toBe('SUCCEEDED');
    expect(await balanceOf(env, env.token, to)).toBe(501n);
    expect(await balanceOf(env, env.token, u.wallet.address)).toBe(0n);
    const row = await stored(env, b.id);
    expect(row.sponsored).toBe(true);
    expect(Number(row.gas_limit)).toBeGreaterThan(0);
    expect(await statuses(env, b.id)).toEqual(['PENDING_PRECONDITION', 'QUEUED', 'SENT', 'SUCCEEDED']);
  });

  it('refuses malformed preconditions with InvalidArgument naming the field, and stores nothing', async () => {
    const u = user();
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [tokenCall(env.token, 'transfer', PAYEE, 1n)], deployed: false });
    const good = erc20Balance(env, u.wallet.address, env.token, 1n);
    const cases: Array<[unknown, RegExp]> = [
      [[{ ...good, type: 'erc20-balances' }], /preconditions\.0\.type/],
      [[{ ...good, ownerAddress: 'nobody' }], /preconditions\.0\.ownerAddress/],
      [[{ ...good, tokenAddress: '0x1234' }], /preconditions\.0\.tokenAddress/],
      [[{ ...good, minAmount: '-1' }], /preconditions\.0\.minAmount/],
      [[{ ...good, minAmount: '1.5' }], /preconditions\.0\.minAmount/],
      [[{ ...good, minAmount: (1n << 256n).toString() }], /preconditions\[0\]\.minAmount: over uint256/],
      [[{ ...good, chainId: env.chainId + 1 }], /preconditions\[0\]\.chainId/],
      [[good, { ...good, tokenAddress: zeroAddress }], /preconditions\[1\]\.tokenAddress/],
      [[{ ...good, tokenID: '3' }], /preconditions\.0.*tokenID/],
      [[{ type: 'native-balance', chainId: env.chainId, ownerAddress: u.wallet.address }], /preconditions\.0\.minAmount/],
      [Array.from({ length: 9 }, () => good), /preconditions: at most 8/],
      [{ type: 'erc20-balance' }, /preconditions/],
      [['x'], /preconditions\.0/],
    ];
    for (const [preconditions, field] of cases) {
      const r = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input }, preconditions }, key(env));
      expect(r.status, JSON.stringify(preconditions)).toBe(400);
      expect(r.body.error, JSON.stringify(r.body)).toBe('InvalidArgument');
      expect(r.body.cause).toMatch(field);
    }
    expect(await stored(env, b.id)).toBeUndefined();
  });

  it('refuses at once a waiting bundle whose signature does not verify: that does not depend on any precondition', async () => {
    const u = user();
    const forged = await signedBundle({ signerKey: newSigner().privateKey, wallet: u.wallet, chainId: env.chainId, txs: [tokenCall(env.token, 'transfer', PAYEE, 1n)], deployed: false });
    const r = await env.call(
      'SendMetaTxn',
      { call: { walletAddress: u.wallet.address, contract: forged.entrypoint, input: forged.input }, preconditions: [erc20Balance(env, u.wallet.address, env.token, 1n)] },
      key(env),
    );
    expect(r.status).toBe(400);
    expect(r.body.error).toBe('SimulationFailed');
    expect(r.body.cause).toMatch(/InvalidSignature/);
    expect(await stored(env, forged.id)).toBeUndefined();
  });

  it('counts a waiting meta-transaction against the per-wallet limit and holds its nonce', async () => {
    const u = user();
    const before = await sent(env);
    const unmet = [erc20Balance(env, u.wallet.address, other, 10n ** 30n)];
    const bundle = (space: bigint) =>
      signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [tokenCall(env.token, 'approve', PAYEE, space)], nonce: { space, n: 0n }, deployed: false });
    for (const space of [1n, 2n, 3n]) {
      const b = await bundle(space);
      const r = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input }, preconditions: unmet }, key(env));
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    }
    // A fourth, waiting or not, is over the wallet's share of the queue (3 here).
    const fourth = await bundle(4n);
    for (const preconditions of [unmet, undefined]) {
      const r = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: fourth.entrypoint, input: fourth.input }, preconditions }, key(env));
      expect(r.status).toBe(409);
      expect(r.body.cause).toMatch(/already has 3 meta-transactions queued or in flight/);
    }
    expect(await stored(env, fourth.id)).toBeUndefined();
    // The nonce a waiting bundle holds is counted by GetMetaTxnNonce and cannot be taken by another bundle.
    const nonce = await env.call('GetMetaTxnNonce', { walletContractAddress: u.wallet.address, space: '0x1' });
    expect(BigInt(nonce.body.nonce)).toBe((1n << 96n) | 1n);
    const rival = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [tokenCall(env.token, 'approve', DEPLOYER, 9n)], nonce: { space: 1n, n: 0n }, deployed: false });
    const taken = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: rival.entrypoint, input: rival.input } }, key(env));
    expect(taken.status).toBe(409);
    expect(await sent(env)).toBe(before);
  });

  it('drops a waiting meta-transaction whose sponsorship was withdrawn before its preconditions held; nothing is sent', async () => {
    const u = user();
    const rule = await sponsor(env, 'WALLET', u.wallet.address);
    // Covered only by the WALLET rule: an approval on a token no CONTRACT rule covers.
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [tokenCall(other, 'approve', PAYEE, 7n)], deployed: false });
    const r = await env.call(
      'SendMetaTxn',
      { call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input }, preconditions: [erc20Balance(env, u.wallet.address, other, 5n)] },
      key(env),
    );
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const removed = await env.call('RemoveGasSponsor', { projectId: env.project.id, id: rule.id }, { authorization: `Bearer ${env.adminToken}` });
    expect(removed.status).toBe(200);
    const before = await sent(env);

    await mint(env, other, u.wallet.address, 5n);
    const receipt = await final(env, b.id);
    expect(receipt.status).toBe('DROPPED');
    expect(receipt.revertReason).toMatch(/preconditions hold, but it is not relayed: .*pays no fee/);
    expect(await sent(env)).toBe(before);
    expect(await env.public.getCode({ address: u.wallet.address })).toBeUndefined();
    expect(await statuses(env, b.id)).toEqual(['PENDING_PRECONDITION', 'DROPPED']);
  });

  it('drops a fee-paying waiting meta-transaction whose fee is gone when its preconditions hold; the payment address gets nothing', async () => {
    const u = user();
    const fee = parseEther('0.01');
    await env.public.request({ method: 'anvil_setBalance' as never, params: [u.wallet.address, '0xde0b6b3a7640000'] as never });
    const b = await signedBundle({
      signerKey: u.key,
      wallet: u.wallet,
      chainId: env.chainId,
      txs: [tokenCall(other, 'approve', DEPLOYER, 1n), { to: PAYEE, value: fee }],
      deployed: false,
    });
    // Without an access key: only its own fee can pay for it.
    const r = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input }, preconditions: [erc20Balance(env, u.wallet.address, other, 3n)] });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect((await stored(env, b.id)).fee_payer).toBe(u.wallet.address.toLowerCase());
    // The wallet's ether is spent elsewhere while it waits.
    await env.public.request({ method: 'anvil_setBalance' as never, params: [u.wallet.address, '0x0'] as never });
    const before = { sent: await sent(env), payee: await env.public.getBalance({ address: PAYEE }) };

    await mint(env, other, u.wallet.address, 3n);
    const receipt = await final(env, b.id);
    expect(receipt.status).toBe('DROPPED');
    expect(receipt.revertReason).toMatch(/preconditions hold, but it is not relayed/);
    expect(await sent(env)).toBe(before.sent);
    expect(await env.public.getBalance({ address: PAYEE })).toBe(before.payee);
  });

  it('caps the meta-transactions waiting on the chain (all are read every block): past maxPendingPreconditions, new ones are refused', async () => {
    const waiting = async () => Number((await env.services.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM meta_txns WHERE status = 'PENDING_PRECONDITION'`)).rows[0].n);
    const sendWaiting = async () => {
      const u = user();
      const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [tokenCall(env.token, 'approve', PAYEE, 1n)], deployed: false });
      const r = await env.call(
        'SendMetaTxn',
        { call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input }, preconditions: [erc20Balance(env, u.wallet.address, other, 10n ** 30n)] },
        key(env),
      );
      return { r, id: b.id };
    };
    for (let n = await waiting(); n < 6; n++) expect((await sendWaiting()).r.status).toBe(200);
    const over = await sendWaiting();
    expect(over.r.status).toBe(409);
    expect(over.r.body.cause).toMatch(/already has 6 meta-transactions waiting on preconditions/);
    expect(await stored(env, over.id)).toBeUndefined();
    expect(await waiting()).toBe(6);
  });

  it('refuses a 7702 authorization with a v2 wallet call on FeeOptions and SendMetaTxn with InvalidArgument naming the field', async () => {
    const u = user();
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [tokenCall(env.token, 'approve', PAYEE, 1n)], deployed: false });
    // EIP7702Authorization as the v2.3.50 client types it.
    const authorization = { chainId: env.chainId, implementation: '0xfBf8f1A5E00034762D928f46d438B947f5d4065d', nonce: 0, signature: `0x${'11'.repeat(65)}` };
    const fo = await env.call('FeeOptions', { wallet: u.wallet.address, to: b.entrypoint, data: b.input, authorization }, key(env));
    expect(fo.status).toBe(400);
    expect(fo.body.error).toBe('InvalidArgument');
    // Only the delegating EOA's own execute call can carry one (test/relayer-7702.test.ts relays those).
    expect(fo.body.cause).toMatch(/^authorization: only with a call of the delegating wallet itself/);
    const client = new proto.Relayer(env.relayerUrl, fetch);
    await expect(client.sendMetaTxn({ call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input, authorization } }, key(env))).rejects.toMatchObject({
      status: 400,
      cause: expect.stringMatching(/^authorization: only with a call of the delegating wallet itself/),
    });
    expect(await stored(env, b.id)).toBeUndefined();
    // null is "not sent" on the wire (the Go client sends every key).
    const ok = await env.call('FeeOptions', { wallet: u.wallet.address, to: b.entrypoint, data: b.input, authorization: null }, key(env));
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
  });
});

describe('the precondition pool under abuse (issue 29): real fees, and shares per project and for keyless callers', () => {
  let env: RelayerEnv;
  let other: Address;
  const FEE = 10_000_000n; // 10 FUSD: well over what the smallest bundle costs at the test price

  beforeAll(async () => {
    env = await startRelayerEnv({
      relayer: {
        maxPendingPreconditions: 10,
        maxPendingPreconditionsPerProject: 3,
        anonymousPendingPreconditionsPercent: 20,
        anonymousPreconditionTimeoutSec: 60,
        preconditionTimeoutSec: 600,
        // Every send here comes from one address: its network may hold a whole share (the parts: relayer-precondition-shares).
        pendingPreconditionsPerClientPercent: 100,
        pendingPreconditionsPerWalletPercent: 100,
      },
    });
    [other] = await env.chain.deploy([{ contract: 'DevERC20', args: ['Other', 'OTH'] }]);
    await sponsor(env, 'CONTRACT', other);
  }, 120_000);
  afterAll(async () => {
    await env?.close();
  });

  /** A bundle that waits for a balance that never comes, paying `fee` FUSD unless sponsored. */
  const waiter = async (fee: bigint | null, headers: Record<string, string> = {}) => {
    const u = user();
    const txs = [tokenCall(other, 'approve', DEPLOYER, 1n), ...(fee === null ? [] : [tokenCall(env.token, 'transfer', PAYEE, fee)])];
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs, deployed: false });
    const send = () =>
      env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input }, preconditions: [erc20Balance(env, u.wallet.address, other, 10n ** 30n)] }, headers);
    return { u, b, send };
  };

  it('refuses a keyless waiting bundle whose fee is a token unit, or that its wallet cannot pay now; stores nothing', async () => {
    const dust = await waiter(1n);
    await mint(env, env.token, dust.u.wallet.address, 1n);
    const r1 = await dust.send();
    expect(r1.status).toBe(402);
    expect(r1.body.cause).toMatch(/FUSD: paid 1, and even the smallest bundle costs \d+ now/);
    expect(await stored(env, dust.b.id)).toBeUndefined();

    const broke = await waiter(FEE);
    const r2 = await broke.send();
    expect(r2.status).toBe(402);
    expect(r2.body.cause).toMatch(/holds 0, less than the fee of 10000000/);
    expect(await stored(env, broke.b.id)).toBeUndefined();

    // The same bundle once its wallet holds the fee: accepted, and it waits the keyless (shorter) time.
    await mint(env, env.token, broke.u.wallet.address, FEE);
    const r3 = await broke.send();
    expect(r3.status, JSON.stringify(r3.body)).toBe(200);
    const w = await env.services.db.query<{ secs: number }>(
      `SELECT extract(epoch FROM w.deadline - m.queued_at)::float8 AS secs FROM meta_txn_waits w JOIN meta_txns m ON m.chain_id = w.chain_id AND m.id = w.meta_txn_id WHERE w.meta_txn_id = $1`,
      [broke.b.id.slice(2).toLowerCase()],
    );
    expect(w.rows[0].secs).toBeGreaterThan(50);
    expect(w.rows[0].secs).toBeLessThan(70);
  });

  it('keeps keyless callers to their share of the pool, and each project to its own: a full share leaves the others room', async () => {
    const waitingOf = async (projectId: number | null) =>
      Number(
        (await env.services.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM meta_txns WHERE status = 'PENDING_PRECONDITION' AND project_id IS NOT DISTINCT FROM $1::bigint`, [projectId]))
          .rows[0].n,
      );
    // The keyless share is 20 % of 10: 2 (one is held by the test above).
    for (let n = await waitingOf(null); n < 2; n++) {
      const k = await waiter(FEE);
      await mint(env, env.token, k.u.wallet.address, FEE);
      expect((await k.send()).status).toBe(200);
    }
    const overKeyless = await waiter(FEE);
    await mint(env, env.token, overKeyless.u.wallet.address, FEE);
    const r = await overKeyless.send();
    expect(r.status).toBe(409);
    expect(r.body.cause).toMatch(/callers without an access key already have 2 meta-transactions waiting/);
    expect(await stored(env, overKeyless.b.id)).toBeUndefined();

    // A project still gets its 3, sponsored; the fourth is refused; another project still gets room.
    for (let i = 0; i < 3; i++) expect((await (await waiter(null, key(env))).send()).status).toBe(200);
    const overProject = await waiter(null, key(env));
    const r4 = await overProject.send();
    expect(r4.status).toBe(409);
    expect(r4.body.cause).toMatch(/the project already has 3 meta-transactions waiting/);
    expect(await stored(env, overProject.b.id)).toBeUndefined();

    const second = await env.services.projects.create(`second-${Math.random().toString(36).slice(2, 8)}`);
    const { key: secondKey } = await env.services.accessKeys.create(second.id, 'test');
    await sponsor(env, 'CONTRACT', other, second.id);
    const s = await waiter(null, { 'x-access-key': secondKey });
    expect((await s.send()).status).toBe(200);
    expect((await stored(env, s.b.id)).project_id).toBe(second.id);
    expect([await waitingOf(null), await waitingOf(env.project.id), await waitingOf(second.id)]).toEqual([2, 3, 1]);
  });
});

describe('every precondition type, read with one Multicall3 call on a real chain', () => {
  let env: RelayerEnv;
  let nft: Address;
  let multi: Address;
  const operator = newSigner().address;
  const owner = DEPLOYER;

  beforeAll(async () => {
    env = await startRelayerEnv();
    [nft, multi] = await env.chain.deploy([
      { contract: 'DevERC721', args: ['Dev NFT', 'DNFT', 'http://127.0.0.1/', 'http://127.0.0.1/contract'] },
      { contract: 'DevERC1155', args: ['http://127.0.0.1/{id}'] },
    ]);
  }, 120_000);
  afterAll(async () => {
    await env?.close();
  });

  const input = (type: PreconditionInput['type'], token: Address, extra: Partial<PreconditionInput> = {}): PreconditionInput => ({
    type,
    chainId: env.chainId,
    ownerAddress: owner,
    tokenAddress: token,
    minAmount: 0n,
    ...extra,
  });

  async function judge(list: PreconditionInput[]): Promise<boolean[]> {
    const conditions = checkPreconditions(list, env.chainId, 64);
    const reads = conditions.map(readsOf);
    const results = await multicall(env.services.chains.get(env.chainId)!, reads.flat());
    let k = 0;
    return conditions.map((p, i) =>
      holds(
        p,
        reads[i].map(() => results[k++]),
      ),
    );
  }

  it('judges native, ERC20, ERC721 and ERC1155 balances, ownership and approvals before and after they change', async () => {
    const fresh = newSigner().address;
    const list = [
      input('native-balance', zeroAddress, { ownerAddress: fresh, minAmount: 10n }),
      input('erc20-balance', env.token, { ownerAddress: fresh, minAmount: 10n }),
      input('erc20-approval', env.token, { operator, minAmount: 100n }),
      input('erc721-ownership', nft, { tokenId: 7n }),
      input('erc721-approval', nft, { tokenId: 7n, operator }),
      input('erc1155-balance', multi, { tokenId: 3n, minAmount: 4n }),
      input('erc1155-approval', multi, { operator }),
      // Without the metarelay extensions: token id 0 and operator = owner, as the v3 client decodes.
      input('erc721-ownership', nft),
    ];
    // A token that does not exist yet (ownerOf reverts) reads as "does not hold", never as an error.
    expect(await judge(list)).toEqual([false, false, false, false, false, false, false, false]);

    await env.public.request({ method: 'anvil_setBalance' as never, params: [fresh, '0xa'] as never });
    await env.chain.send([
      { address: env.token, contract: 'DevERC20', functionName: 'mint', args: [fresh, 10n] },
      { address: env.token, contract: 'DevERC20', functionName: 'approve', args: [operator, 100n] },
      { address: nft, contract: 'DevERC721', functionName: 'mint', args: [owner, 7n] },
      { address: nft, contract: 'DevERC721', functionName: 'mint', args: [owner, 0n] },
      { address: nft, contract: 'DevERC721', functionName: 'approve', args: [operator, 7n] },
      { address: multi, contract: 'DevERC1155', functionName: 'mint', args: [owner, 3n, 4n] },
      { address: multi, contract: 'DevERC1155', functionName: 'setApprovalForAll', args: [operator, true] },
    ]);
    expect(await judge(list)).toEqual([true, true, true, true, true, true, true, true]);

    // One short of each amount does not hold; an approval for all counts as an ERC721 approval too.
    const short = [
      input('native-balance', zeroAddress, { ownerAddress: fresh, minAmount: 11n }),
      input('erc20-approval', env.token, { operator, minAmount: 101n }),
      input('erc1155-balance', multi, { tokenId: 3n, minAmount: 5n }),
      input('erc721-ownership', nft, { ownerAddress: operator, tokenId: 7n }),
      input('erc721-approval', nft, { tokenId: 0n, operator: newSigner().address }),
    ];
    expect(await judge(short)).toEqual([false, false, false, false, false]);
    await env.chain.send([{ address: nft, contract: 'DevERC721', functionName: 'setApprovalForAll', args: [operator, true] }]);
    expect(await judge([input('erc721-approval', nft, { tokenId: 0n, operator })])).toEqual([true]);
  });
});

describe('preconditions that never hold', () => {
  let env: RelayerEnv;

  beforeAll(async () => {
    env = await startRelayerEnv({ relayer: { preconditionTimeoutSec: 2 } });
  }, 120_000);
  afterAll(async () => {
    await env?.close();
  });

  it('drops the meta-transaction with the reason at its deadline; nothing is sent and the wallet keeps its ether', async () => {
    const u = user();
    const fee = parseEther('0.01');
    await env.public.request({ method: 'anvil_setBalance' as never, params: [u.wallet.address, '0xde0b6b3a7640000'] as never });
    const b = await signedBundle({
      signerKey: u.key,
      wallet: u.wallet,
      chainId: env.chainId,
      txs: [tokenCall(env.token, 'transfer', DEPLOYER, 5n), { to: PAYEE, value: fee }],
      deployed: false,
    });
    const before = { sent: await sent(env), payee: await env.public.getBalance({ address: PAYEE }) };
    const r = await env.call('SendMetaTxn', {
      call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input },
      preconditions: [erc20Balance(env, u.wallet.address, env.token, 5n)],
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect((await stored(env, b.id)).status).toBe('PENDING_PRECONDITION');

    const row = await until(env, b.id, (x) => x.status !== 'PENDING_PRECONDITION');
    expect(row.status).toBe('DROPPED');
    expect(row.revert_reason).toMatch(new RegExp(`preconditions not met by the deadline .*: erc20-balance of ${u.wallet.address.toLowerCase()} in ${env.token.toLowerCase()} ≥ 5`));
    const receipt = await final(env, b.id);
    expect(receipt.revertReason).toBe(row.revert_reason);
    expect(await statuses(env, b.id)).toEqual(['PENDING_PRECONDITION', 'DROPPED']);
    expect(await sent(env)).toBe(before.sent);
    expect(await env.public.getBalance({ address: u.wallet.address })).toBe(parseEther('1'));
    expect(await env.public.getBalance({ address: PAYEE })).toBe(before.payee);

    // The same bundle sent again later (now that it holds) starts over, and is relayed.
    await mint(env, env.token, u.wallet.address, 5n);
    const again = await env.call('SendMetaTxn', {
      call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input },
      preconditions: [erc20Balance(env, u.wallet.address, env.token, 5n)],
    });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect((await final(env, b.id)).status).toBe('SUCCEEDED');
    expect(await balanceOf(env, env.token, DEPLOYER)).toBeGreaterThanOrEqual(5n);
    expect(await env.public.getBalance({ address: PAYEE })).toBe(before.payee + fee);
  });
});
