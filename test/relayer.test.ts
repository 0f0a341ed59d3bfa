import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeAbiParameters, encodeFunctionData, parseAbi, parseAbiParameters, type Address, type Hex } from 'viem';
import { TRANSACTION_TUPLE } from '../src/relayer/abi.ts';
import { signQuote } from '../src/relayer/intake/quote.ts';
import { PAYEE, QUOTE_SECRET, erc20, sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { newSigner, signedBundle, walletFor, type SequenceTx } from './support/sequence-wallet.ts';

let env: RelayerEnv;

beforeAll(async () => {
  env = await startRelayerEnv();
}, 120_000);
afterAll(async () => {
  await env?.close();
});

const key = () => ({ 'x-access-key': env.accessKey });

function user() {
  const s = newSigner();
  return { key: s.privateKey, wallet: walletFor(s.address) };
}

async function mint(to: Address, amount: bigint) {
  await env.chain.send([{ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [to, amount] }]);
}

const balance = (token: Address, owner: Address) => env.public.readContract({ address: token, abi: erc20, functionName: 'balanceOf', args: [owner] });

const transfer = (to: Address, amount: bigint, extra: Partial<SequenceTx> = {}): SequenceTx => ({
  to: env.token,
  data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [to, amount] }),
  ...extra,
});

async function send(b: { entrypoint: Address; input: Hex }, wallet: Address, headers: Record<string, string> = key(), quote?: string) {
  return env.call('SendMetaTxn', { call: { walletAddress: wallet, contract: b.entrypoint, input: b.input }, ...(quote ? { quote } : {}) }, headers);
}

async function receipt(id: string) {
  for (let i = 0; i < 40; i++) {
    const r = await env.call('GetMetaTxnReceipt', { metaTxID: id });
    expect(r.status).toBe(200);
    if (['SUCCEEDED', 'FAILED', 'PARTIALLY_FAILED', 'DROPPED'].includes(r.body.receipt.status)) return r.body.receipt;
  }
  throw new Error(`meta-transaction ${id} never reached a final status`);
}

describe('relayer: sponsored meta-transactions', () => {
  it('deploys an undeployed wallet holding no native token and runs its ERC20 transfer, sponsored by contract', async () => {
    await sponsor(env, 'CONTRACT', env.token);
    const u = user();
    const to = newSigner().address;
    await mint(u.wallet.address, 1_000n);
    expect(await env.public.getBalance({ address: u.wallet.address })).toBe(0n);
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [transfer(to, 250n)], deployed: false });

    const sent = await send(b, u.wallet.address);
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    expect(sent.body).toEqual({ status: true, txnHash: b.id.slice(2).toLowerCase() });

    const r = await receipt(b.id);
    expect(r.status).toBe('SUCCEEDED');
    expect(r.revertReason).toBeNull();
    const chainReceipt = JSON.parse(r.txnReceipt);
    expect(chainReceipt.transactionHash).toBe(r.txnHash);
    expect(BigInt(chainReceipt.blockNumber).toString()).toBe(r.blockNumber);
    expect(r.receipts).toHaveLength(1);
    expect(r.receipts[0].id).toBe(b.walletId.slice(2).toLowerCase());
    expect(await balance(env.token, to)).toBe(250n);
    expect(await env.public.getCode({ address: u.wallet.address })).not.toBe('0x');

    // Findable under the inner wallet bundle's id too, with or without 0x, any case.
    const byInner = await env.call('GetMetaTxnStatus', { metaTxID: b.walletId.slice(2).toUpperCase() });
    expect(byInner.body.status).toBe('SUCCEEDED');
  });

  it('treats the same bundle sent twice as one meta-transaction, broadcast once', async () => {
    const u = user();
    await mint(u.wallet.address, 100n);
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [transfer(PAYEE, 1n)], deployed: false });
    const [one, two] = await Promise.all([send(b, u.wallet.address), send(b, u.wallet.address)]);
    expect(one.body.txnHash).toBe(two.body.txnHash);
    await receipt(b.id);
    const again = await send(b, u.wallet.address);
    expect(again.body.txnHash).toBe(one.body.txnHash);
    const r = await env.services.db.query<{ n: string }>('SELECT count(*) AS n FROM relay_txs WHERE meta_txn_id = $1', [one.body.txnHash]);
    expect(Number(r.rows[0].n)).toBe(1);
  });

  it('refuses a bundle nobody sponsors and that pays no fee with InsufficientFee', async () => {
    const u = user();
    const other = '0x00000000000000000000000000000000000b0b00' as Address;
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [{ to: other, data: '0x12345678' }], deployed: false });
    const noKey = await send(b, u.wallet.address, {});
    expect(noKey.status).toBe(402);
    expect(noKey.body).toMatchObject({ error: 'InsufficientFee', code: 3004 });
    const withKey = await send(b, u.wallet.address);
    expect(withKey.status).toBe(402);
    expect(withKey.body.cause).toMatch(/no sponsorship covers the call/);
    const missing = await env.call('GetMetaTxnStatus', { metaTxID: b.id });
    expect(missing.body).toMatchObject({ error: 'NotFound', code: 3000 });
  });

  it('refuses a bundle whose signature does not verify with SimulationFailed, sending nothing', async () => {
    const u = user();
    const impostor = newSigner();
    await mint(u.wallet.address, 10n);
    const b = await signedBundle({ signerKey: impostor.privateKey, wallet: u.wallet, chainId: env.chainId, txs: [transfer(PAYEE, 1n)], deployed: false });
    const r = await send(b, u.wallet.address);
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: 'SimulationFailed', code: 3006 });
    expect(r.body.cause).toMatch(/InvalidSignature|reverted/);
    const rows = await env.services.db.query('SELECT 1 FROM meta_txns WHERE id = $1', [b.id.slice(2)]);
    expect(rows.rowCount).toBe(0);
  });

  it('refuses a wallet-form bundle for a wallet that is not deployed (it would do nothing and still be paid for)', async () => {
    const u = user();
    await mint(u.wallet.address, 10n);
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [transfer(PAYEE, 1n)], deployed: true });
    const r = await send(b, u.wallet.address);
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: 'SimulationFailed', code: 3006 });
    expect(r.body.cause).toMatch(/not deployed/);
  });

  it('rejects input that is not a wallet or guest-module execute with InvalidArgument', async () => {
    const u = user();
    const r = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: u.wallet.address, input: '0xdeadbeef' } }, key());
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: 'InvalidArgument', code: 2001 });
    const elsewhere = await env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: PAYEE, input: '0x7a9a1628' } }, key());
    expect(elsewhere.body.code).toBe(2001);
  });
});

describe('relayer: fees and quotes', () => {
  async function quoted(u: ReturnType<typeof user>, txs: SequenceTx[]) {
    // The unsigned form a client sends to FeeOptions: execute(txs, nonce, stub) through the guest module.
    const stub = await signedBundle({ signerKey: newSigner().privateKey, wallet: u.wallet, chainId: env.chainId, txs, deployed: false });
    const r = await env.call('FeeOptions', { wallet: u.wallet.address, to: stub.entrypoint, data: stub.input });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body as { options: { token: { contractAddress: string | null; symbol: string }; to: string; value: string; gasLimit: number }[]; sponsored: boolean; quote: string };
  }

  it('lists the fee tokens and payment address', async () => {
    const r = await env.call('FeeTokens', {});
    expect(r.body.isFeeRequired).toBe(true);
    expect(r.body.paymentAddress.toLowerCase()).toBe(PAYEE);
    expect(r.body.tokens[0]).toMatchObject({ chainId: env.chainId, symbol: 'FUSD', type: 'ERC20_TOKEN', decimals: 6 });
    expect(r.body.tokens[0].contractAddress).toMatch(/^0x[0-9a-fA-F]{40}$/);
    expect(r.body.tokens[0].contractAddress).not.toBe(r.body.tokens[0].contractAddress.toLowerCase());
  });

  it('relays a bundle that pays the quoted fee in the ERC20; the payment address receives it', async () => {
    const u = user();
    const to = newSigner().address;
    await mint(u.wallet.address, 10_000_000n);
    const q = await quoted(u, [transfer(to, 7n)]);
    expect(q.sponsored).toBe(false);
    const option = q.options.find((o) => o.token.symbol === 'FUSD')!;
    expect(BigInt(option.value)).toBeGreaterThan(0n);
    const before = await balance(env.token, PAYEE);
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [transfer(to, 7n), transfer(PAYEE, BigInt(option.value))], deployed: false });
    const sent = await send(b, u.wallet.address, {}, q.quote);
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    expect((await receipt(b.id)).status).toBe('SUCCEEDED');
    expect((await balance(env.token, PAYEE)) - before).toBe(BigInt(option.value));
    expect(await balance(env.token, to)).toBe(7n);
  });

  it('refuses a fee below the quote, an altered quote, an expired quote and a quote for other transactions', async () => {
    const u = user();
    await mint(u.wallet.address, 10_000_000n);
    const q = await quoted(u, [transfer(PAYEE, 0n)]);
    const value = BigInt(q.options[0].value);
    const bundle = (fee: bigint, txs: SequenceTx[] = [transfer(PAYEE, 0n)]) =>
      signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [...txs, transfer(PAYEE, fee)], deployed: false });

    const low = await send(await bundle(value - 1n), u.wallet.address, {}, q.quote);
    expect(low.status).toBe(402);
    expect(low.body.cause).toMatch(/too low/);

    const [body, mac] = q.quote.split('.');
    const payload = JSON.parse(Buffer.from(body, 'base64url').toString());
    const altered = `${Buffer.from(JSON.stringify({ ...payload, o: { ...payload.o, [Object.keys(payload.o)[0]]: '1' } })).toString('base64url')}.${mac}`;
    const alt = await send(await bundle(1n), u.wallet.address, {}, altered);
    expect(alt.status).toBe(402);
    expect(alt.body.cause).toMatch(/altered/);

    const expired = signQuote(QUOTE_SECRET, { ...payload, e: Math.floor(Date.now() / 1000) - 5 });
    const exp = await send(await bundle(value), u.wallet.address, {}, expired);
    expect(exp.status).toBe(402);
    expect(exp.body.cause).toMatch(/expired/);

    const other = await send(await bundle(value, [transfer(newSigner().address, 1n)]), u.wallet.address, {}, q.quote);
    expect(other.status).toBe(402);
    expect(other.body.cause).toMatch(/different transactions/);

    // The same quote, honestly used, passes (v3 clients JSON-encode it a second time).
    const ok = await send(await bundle(value), u.wallet.address, {}, JSON.stringify(q.quote));
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
  });
});

describe('relayer: nonces and parallelism', () => {
  it('mines ten bundles of one wallet in ten nonce spaces sent at once', async () => {
    const u = user();
    await mint(u.wallet.address, 1_000n);
    const deploy = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [transfer(PAYEE, 1n)], deployed: false });
    expect((await send(deploy, u.wallet.address)).status).toBe(200);
    expect((await receipt(deploy.id)).status).toBe('SUCCEEDED');
    const bundles = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [transfer(PAYEE, BigInt(i + 1))], nonce: { space: BigInt(i + 1), n: 0n }, deployed: true }),
      ),
    );
    const sent = await Promise.all(bundles.map((b) => send(b, u.wallet.address)));
    for (const s of sent) expect(s.status, JSON.stringify(s.body)).toBe(200);
    const receipts = await Promise.all(bundles.map((b) => receipt(b.id)));
    expect(receipts.map((r) => r.status)).toEqual(Array(10).fill('SUCCEEDED'));
  });

  it('mines nonces n and n+1 of one space sent in reverse order, in order; GetMetaTxnNonce counts the queue', async () => {
    const u = user();
    await mint(u.wallet.address, 1_000n);
    const first = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [transfer(PAYEE, 1n)], deployed: false });
    expect((await send(first, u.wallet.address)).status).toBe(200);
    await receipt(first.id);
    const space = 42n;
    const n0 = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [transfer(PAYEE, 2n)], nonce: { space, n: 0n }, deployed: true });
    const n1 = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [transfer(PAYEE, 3n)], nonce: { space, n: 1n }, deployed: true });
    const late = await send(n1, u.wallet.address);
    expect(late.status, JSON.stringify(late.body)).toBe(200);
    // n+1 waits; the nonce to use next is still n.
    const next = await env.call('GetMetaTxnNonce', { walletContractAddress: u.wallet.address, space: '0x2a' });
    expect(BigInt(next.body.nonce)).toBe((space << 96n) | 0n);
    expect((await env.call('GetMetaTxnStatus', { metaTxID: n1.id })).body.status).toBe('QUEUED');
    expect((await send(n0, u.wallet.address)).status).toBe(200);
    const [r0, r1] = await Promise.all([receipt(n0.id), receipt(n1.id)]);
    expect([r0.status, r1.status]).toEqual(['SUCCEEDED', 'SUCCEEDED']);
    expect(Number(r0.blockNumber) < Number(r1.blockNumber) || (r0.blockNumber === r1.blockNumber && JSON.parse(r0.txnReceipt).transactionIndex < JSON.parse(r1.txnReceipt).transactionIndex)).toBe(
      true,
    );
    const after = await env.call('GetMetaTxnNonce', { walletContractAddress: u.wallet.address, space: '42' });
    expect(BigInt(after.body.nonce)).toBe((space << 96n) | 2n);
  });

  it('refuses a nonce already used on chain', async () => {
    const u = user();
    await mint(u.wallet.address, 10n);
    const a = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [transfer(PAYEE, 1n)], deployed: false });
    await send(a, u.wallet.address);
    await receipt(a.id);
    const reuse = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [transfer(PAYEE, 2n)], deployed: true });
    const r = await send(reuse, u.wallet.address);
    expect(r.status).toBe(400);
    expect(r.body.cause).toMatch(/BadNonce/);
  });
});

describe('relayer: results', () => {
  it('reports PARTIALLY_FAILED with the reason when a revertOnError=false transaction fails', async () => {
    const u = user();
    await mint(u.wallet.address, 5n);
    const b = await signedBundle({
      signerKey: u.key,
      wallet: u.wallet,
      chainId: env.chainId,
      txs: [transfer(PAYEE, 1n), transfer(PAYEE, 1_000n, { revertOnError: false }), transfer(PAYEE, 1n)],
      deployed: false,
    });
    expect((await send(b, u.wallet.address)).status).toBe(200);
    const r = await receipt(b.id);
    expect(r.status).toBe('PARTIALLY_FAILED');
    expect(r.revertReason).toMatch(/transaction 1 failed: ERC20InsufficientBalance|transaction 1 failed/);
    expect(await balance(env.token, u.wallet.address)).toBe(3n);
  });

  it('Simulate reports each transaction of an unsigned bundle', async () => {
    const u = user();
    await mint(u.wallet.address, 5n);
    const txs = [transfer(PAYEE, 1n), transfer(PAYEE, 99n)].map((t) => ({ delegateCall: false, revertOnError: true, gasLimit: 0n, target: t.to, value: 0n, data: t.data! }));
    const encoded = encodeAbiParameters(parseAbiParameters(`${TRANSACTION_TUPLE}[]`), [txs]);
    const r = await env.call('Simulate', { wallet: u.wallet.address, transactions: encoded });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.results.map((x: { succeeded: boolean }) => x.succeeded)).toEqual([true, false]);
    expect(r.body.results[0].gasUsed).toBeGreaterThan(0);
  });
});

describe('relayer: sponsorship rules, each with its negative', () => {
  let headers: Record<string, string>;
  let projectId: number;
  beforeAll(async () => {
    const p = await env.services.projects.create(`rules-${Math.random().toString(36).slice(2, 8)}`);
    projectId = p.id;
    headers = { 'x-access-key': (await env.services.accessKeys.create(p.id, 'rules')).key };
  });
  const approve = (spender: Address, amount: bigint): SequenceTx => ({
    to: env.token,
    data: encodeFunctionData({ abi: parseAbi(['function approve(address spender, uint256 amount) returns (bool)']), functionName: 'approve', args: [spender, amount] }),
  });
  async function attempt(u: ReturnType<typeof user>, txs: SequenceTx[]) {
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs, deployed: false });
    const r = await send(b, u.wallet.address, headers);
    if (r.status === 200) expect((await receipt(b.id)).status).toBe('SUCCEEDED');
    return r;
  }

  it('WALLET covers any bundle of that wallet, not of another', async () => {
    const [u, other] = [user(), user()];
    await sponsor(env, 'WALLET', u.wallet.address, projectId);
    const call: SequenceTx = { to: '0x00000000000000000000000000000000000c0de0', data: '0x12345678' };
    expect((await attempt(u, [call])).status).toBe(200);
    const refused = await attempt(other, [call]);
    expect(refused.status).toBe(402);
  });

  it('TOKEN covers moving that token, not approving it; CONTRACT covers any call to the contract', async () => {
    const u = user();
    await mint(u.wallet.address, 100n);
    const rule = await sponsor(env, 'TOKEN', env.token, projectId);
    expect((await attempt(u, [transfer(PAYEE, 1n)])).status).toBe(200);
    const u2 = user();
    const refused = await attempt(u2, [approve(PAYEE, 5n)]);
    expect(refused.status).toBe(402);
    expect(refused.body.cause).toMatch(/no sponsorship covers/);
    const contractRule = await sponsor(env, 'CONTRACT', env.token, projectId);
    expect((await attempt(u2, [approve(PAYEE, 5n)])).status).toBe(200);
    // Switched-off rules cover nothing: with both off, a transfer of the token is no longer sponsored.
    const admin = { authorization: `Bearer ${env.adminToken}` };
    for (const id of [rule.id, contractRule.id]) {
      const off = await env.call('UpdateGasSponsor', { projectId, id, active: false }, admin);
      expect(off.body.gasSponsor.active).toBe(false);
    }
    const u3 = user();
    await mint(u3.wallet.address, 10n);
    expect((await attempt(u3, [transfer(PAYEE, 1n)])).status).toBe(402);
  });

  it('ADDRESS covers native transfers to it, not to another address, nor contract calls to it', async () => {
    const u = user();
    const dest = '0x00000000000000000000000000000000000da7e0' as Address;
    await env.public.request({ method: 'anvil_setBalance' as never, params: [u.wallet.address, '0xde0b6b3a7640000'] as never });
    await sponsor(env, 'ADDRESS', dest, projectId);
    expect((await attempt(u, [{ to: dest, value: 1000n }])).status).toBe(200);
    expect(await env.public.getBalance({ address: dest })).toBe(1000n);
    const u2 = user();
    await env.public.request({ method: 'anvil_setBalance' as never, params: [u2.wallet.address, '0xde0b6b3a7640000'] as never });
    expect((await attempt(u2, [{ to: PAYEE, value: 1000n }])).status).toBe(402);
    expect((await attempt(u2, [{ to: dest, data: '0x12345678' }])).status).toBe(402);
  });

  it('sponsorships are managed with an admin token only, and a removed rule stops covering', async () => {
    const asKey = await env.call('AddGasSponsor', { projectId, address: PAYEE }, headers);
    expect(asKey.status).toBe(403);
    const anonymous = await env.call('ListGasSponsors', { projectId });
    expect(anonymous.status).toBe(401);
    const admin = { authorization: `Bearer ${env.adminToken}` };
    const u = user();
    const rule = await sponsor(env, 'WALLET', u.wallet.address, projectId);
    const dup = await env.call('AddGasSponsor', { projectId, address: u.wallet.address, kind: 'WALLET' }, admin);
    expect(dup.status).toBe(409);
    const listed = await env.call('ListGasSponsors', { projectId }, admin);
    expect(listed.body.gasSponsors.map((g: { id: number }) => g.id)).toContain(rule.id);
    expect((await env.call('RemoveGasSponsor', { projectId, id: rule.id }, admin)).body.status).toBe(true);
    expect((await attempt(u, [{ to: '0x00000000000000000000000000000000000c0de0', data: '0x' }])).status).toBe(402);
    expect((await env.call('GetGasSponsor', { projectId, id: rule.id }, admin)).status).toBe(404);
  });
});

describe('relayer: the probe', () => {
  it('ships exactly the runtime code that contracts/RelayProbe.sol compiles to', async () => {
    const { RELAY_PROBE_CODE } = await import('../src/relayer/intake/probe-code.ts');
    expect(env.chain.artifacts.RelayProbe?.deployedBytecode).toBe(RELAY_PROBE_CODE);
  });
});

describe('relayer: per-project listings', () => {
  it("lists the project's meta-transactions to its own key only", async () => {
    const mine = await env.call('GetMetaTransactions', { projectId: env.project.id, page: { pageSize: 100 } }, key());
    expect(mine.status, JSON.stringify(mine.body)).toBe(200);
    expect(mine.body.transactions.length).toBeGreaterThan(0);
    expect(mine.body.transactions[0]).toMatchObject({ chainId: env.chainId, projectId: env.project.id, txnStatus: expect.any(String), metaTxnID: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect((await env.call('GetMetaTransactions', { projectId: env.project.id + 1000 }, key())).status).toBe(403);
    expect((await env.call('GetMetaTransactions', { projectId: env.project.id })).status).toBe(401);
    const sent = await env.call('SentTransactions', {}, key());
    expect(sent.body.transactions.every((t: { status: string }) => t.status !== 'QUEUED')).toBe(true);
    expect((await env.call('PendingTransactions', {}, key())).status).toBe(200);
  });
});
