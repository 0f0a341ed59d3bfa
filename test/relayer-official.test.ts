// The acceptance tests of the relayer: the official sequence.js v2 clients (Wallet + RpcRelayer),
// unchanged, pointed at metarelay on a real anvil with the real v2 wallet contracts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, type Address } from 'viem';
import { PAYEE, erc20, sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { newSigner, officialWallet } from './support/sequence-wallet.ts';

let env: RelayerEnv;
beforeAll(async () => {
  env = await startRelayerEnv();
}, 120_000);
afterAll(async () => {
  await env?.close();
});

const balance = (owner: Address) => env.public.readContract({ address: env.token, abi: erc20, functionName: 'balanceOf', args: [owner] });
const transfer = (to: Address, amount: bigint) => ({ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [to, amount] }) });
const mint = (to: Address, amount: bigint) => env.chain.send([{ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [to, amount] }]);

describe('official sequence.js v2 clients against metarelay', () => {
  it('a new wallet with no native token sends an ERC20 transfer, sponsored by the project: deployed and transferred', async () => {
    await sponsor(env, 'CONTRACT', env.token);
    const w = officialWallet({ signerKey: newSigner().privateKey, rpcUrl: env.rpcUrl, chainId: env.chainId, relayerUrl: env.relayerUrl, projectAccessKey: env.accessKey });
    try {
      const to = newSigner().address;
      await mint(w.address, 1_000n);
      expect(await env.public.getBalance({ address: w.address })).toBe(0n);
      expect(await w.isDeployed()).toBe(false);
      const sent = await w.sendTransaction([transfer(to, 400n)]);
      expect(sent.hash).toMatch(/^0x[0-9a-f]{64}$/);
      expect(await w.isDeployed()).toBe(true);
      expect(await balance(to)).toBe(400n);
      const status = await env.call('GetMetaTxnStatus', { metaTxID: sent.id });
      expect(status.body.status).toBe('SUCCEEDED');
      // A second transaction of the now-deployed wallet goes straight to it.
      await w.sendTransaction([transfer(to, 100n)]);
      expect(await balance(to)).toBe(500n);
    } finally {
      w.close();
    }
  });

  it('a wallet pays the fee in the ERC20 through FeeOptions and the quote; the payment address receives it', async () => {
    const w = officialWallet({ signerKey: newSigner().privateKey, rpcUrl: env.rpcUrl, chainId: env.chainId, relayerUrl: env.relayerUrl });
    try {
      const to = newSigner().address;
      await mint(w.address, 50_000_000n);
      const txs = [transfer(to, 3n)];
      const { options, quote } = await w.getFeeOptions(txs);
      const option = options.find((o) => o.token.symbol === 'FUSD');
      expect(option, JSON.stringify(options)).toBeDefined();
      expect(quote).toBeDefined();
      const before = await balance(PAYEE);
      await w.sendTransaction(txs, { quote, fee: option });
      expect((await balance(PAYEE)) - before).toBe(BigInt(option!.value));
      expect(await balance(to)).toBe(3n);
    } finally {
      w.close();
    }
  });

  it('without a sponsorship or a fee the official client gets InsufficientFee, and its err.message says why (a spent sponsorship budget, no fee paid)', async () => {
    const w = officialWallet({ signerKey: newSigner().privateKey, rpcUrl: env.rpcUrl, chainId: env.chainId, relayerUrl: env.relayerUrl });
    const capped = officialWallet({ signerKey: newSigner().privateKey, rpcUrl: env.rpcUrl, chainId: env.chainId, relayerUrl: env.relayerUrl, projectAccessKey: env.accessKey });
    try {
      await mint(w.address, 10n);
      await expect(w.sendTransaction([transfer(PAYEE, 1n)])).rejects.toThrow(/^Insufficient fee: the fee paid is too/);
      // Sponsored, but by a rule whose budget (1 wei) cannot pay any transaction: what a client that
      // prints err.message shows must be that reason, not only "Insufficient fee".
      const r = await env.call(
        'AddGasSponsor',
        { projectId: env.project.id, address: capped.address, kind: 'WALLET', name: 'one wei', totalBudgetWei: '1' },
        { authorization: `Bearer ${env.adminToken}` },
      );
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      // A call the project's CONTRACT rule on the token (the first test's) does not sponsor: only the capped WALLET rule applies.
      const err = await capped.sendTransaction([{ to: PAYEE, data: '0x' }]).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(err?.message).toMatch(/^Insufficient fee: .*total budget/);
    } finally {
      w.close();
      capped.close();
    }
  });

  it('ten bundles of one wallet in ten nonce spaces sent at once are all mined; n and n+1 sent in reverse order are mined in order', async () => {
    const w = officialWallet({ signerKey: newSigner().privateKey, rpcUrl: env.rpcUrl, chainId: env.chainId, relayerUrl: env.relayerUrl, projectAccessKey: env.accessKey });
    try {
      await mint(w.address, 1_000n);
      await w.sendTransaction([transfer(PAYEE, 1n)]);
      const spaces = Array.from({ length: 10 }, (_, i) => BigInt(1000 + i));
      const sent = await Promise.all(spaces.map((space, i) => w.sendTransaction([transfer(PAYEE, BigInt(i + 1))], { nonce: { space } })));
      expect(new Set(sent.map((x) => x.hash)).size).toBe(10);
      expect(await balance(w.address)).toBe(1_000n - 1n - 55n);

      // Nonces n and n+1 of one space: the later one is relayed first and waits for its predecessor.
      const space = 77n;
      const n = BigInt((await w.relayer.getNonce(w.address, space)).toString());
      const later = w.sendTransaction([transfer(PAYEE, 3n)], { nonce: n + 1n });
      await new Promise((r) => setTimeout(r, 300));
      const earlier = w.sendTransaction([transfer(PAYEE, 2n)], { nonce: n });
      const [a, b] = await Promise.all([earlier, later]);
      const [ra, rb] = await Promise.all([env.public.getTransactionReceipt({ hash: a.hash }), env.public.getTransactionReceipt({ hash: b.hash })]);
      expect(ra.blockNumber < rb.blockNumber || (ra.blockNumber === rb.blockNumber && ra.transactionIndex < rb.transactionIndex)).toBe(true);
    } finally {
      w.close();
    }
  });

  it('a batch with a failing revertOnError=false transaction is reported PARTIALLY_FAILED with the reason', async () => {
    const w = officialWallet({ signerKey: newSigner().privateKey, rpcUrl: env.rpcUrl, chainId: env.chainId, relayerUrl: env.relayerUrl, projectAccessKey: env.accessKey });
    try {
      await mint(w.address, 5n);
      const failing = { ...transfer(PAYEE, 1_000n), revertOnError: false };
      const err = await w.sendTransaction([transfer(PAYEE, 1n), failing, transfer(PAYEE, 1n)]).then(
        () => undefined,
        (e: unknown) => e as { receipt?: { status: string; revertReason: string | null } },
      );
      expect(err?.receipt?.status).toBe('PARTIALLY_FAILED');
      expect(err?.receipt?.revertReason).toMatch(/transaction 1 failed/);
      expect(await balance(w.address)).toBe(3n);
    } finally {
      w.close();
    }
  });
});
