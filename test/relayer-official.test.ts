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

  it('without a sponsorship or a fee the official client gets InsufficientFee', async () => {
    const w = officialWallet({ signerKey: newSigner().privateKey, rpcUrl: env.rpcUrl, chainId: env.chainId, relayerUrl: env.relayerUrl });
    try {
      await mint(w.address, 10n);
      await expect(w.sendTransaction([transfer(PAYEE, 1n)])).rejects.toThrow(/InsufficientFee|Insufficient fee/);
    } finally {
      w.close();
    }
  });
});
