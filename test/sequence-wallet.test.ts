import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BaseError, decodeErrorResult, decodeFunctionData, encodeFunctionData, getAddress, parseAbi, parseEventLogs, type Address, type Hex, type TransactionReceipt } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import {
  ANVIL_DEPLOYER_KEY,
  SEQUENCE_V2_CONTEXT,
  deploySequenceV2Context,
  devPublicClient,
  devWalletClient,
  sequenceNonceSlot,
  startAnvil,
  type AnvilHandle,
  type DeployedSequenceV2Context,
} from '../src/devchain/index.ts';
import { newSigner, officialWallet, sequenceFactoryAbi, sequenceWalletAbi, signedBundle, walletFor, type SignedBundle } from './support/sequence-wallet.ts';

// anvil's second default account: relays for LocalRelayer, so raw sends from account 0 never share its nonces.
const LOCAL_RELAYER_KEY: Hex = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d';
const OUTER_GAS = 3_000_000n;

const utilsAbi = parseAbi(['function callChainId() view returns (uint256)']);
// A real contract call for bundles (SequenceUtils has no fallback, so an empty call would revert).
const callChainId = encodeFunctionData({ abi: utilsAbi, functionName: 'callChainId' });

let anvil: AnvilHandle;
let ctx: DeployedSequenceV2Context;
let pub: ReturnType<typeof devPublicClient>;
let sender: ReturnType<typeof devWalletClient>;

beforeAll(async () => {
  anvil = await startAnvil({ blockTime: null });
  ctx = await deploySequenceV2Context(anvil.rpcUrl);
  pub = devPublicClient(anvil.rpcUrl, anvil.chainId);
  sender = devWalletClient(anvil.rpcUrl, anvil.chainId, privateKeyToAccount(ANVIL_DEPLOYER_KEY));
});

afterAll(async () => {
  await anvil?.stop();
});

async function sendRaw(bundle: SignedBundle): Promise<TransactionReceipt> {
  const hash = await sender.sendTransaction({ to: bundle.entrypoint, data: bundle.input, gas: OUTER_GAS });
  return pub.waitForTransactionReceipt({ hash });
}

function executedIds(receipt: TransactionReceipt, emitter: Address) {
  return parseEventLogs({ abi: sequenceWalletAbi, logs: receipt.logs, eventName: 'TxExecuted' })
    .filter((l) => l.address.toLowerCase() === emitter.toLowerCase())
    .map((l) => ({ tx: l.args._tx, index: l.args._index }));
}

function decodeExecute(data: Hex) {
  const decoded = decodeFunctionData({ abi: sequenceWalletAbi, data });
  if (decoded.functionName !== 'execute') throw new Error(`not execute(...): ${decoded.functionName}`);
  const [txs, nonce, signature] = decoded.args;
  return { txs, nonce, signature };
}

const readNonce = (wallet: Address, space: bigint) => pub.readContract({ address: wallet, abi: sequenceWalletAbi, functionName: 'readNonce', args: [space] });

async function revertError(bundle: SignedBundle): Promise<{ errorName: string; args: readonly unknown[] | undefined }> {
  try {
    await pub.call({ account: sender.account, to: bundle.entrypoint, data: bundle.input, gas: OUTER_GAS });
  } catch (err) {
    const data = (err as BaseError).walk((e) => typeof (e as { data?: unknown }).data === 'string') as { data?: Hex } | null;
    if (!data?.data) throw err;
    const { errorName, args } = decodeErrorResult({ abi: sequenceWalletAbi, data: data.data });
    return { errorName, args };
  }
  throw new Error('the call did not revert');
}

describe('Sequence v2 context on anvil', () => {
  it('puts every contract at its production address, and a second run deploys nothing', async () => {
    expect(ctx.deployed).toHaveLength(6);
    const addresses = [...Object.values(SEQUENCE_V2_CONTEXT), ctx.mainModuleGasEstimation];
    const codes = await Promise.all(addresses.map((address) => pub.getCode({ address })));
    for (const [i, code] of codes.entries()) expect(code?.length, addresses[i]).toBeGreaterThan(2);

    const chainId = await pub.readContract({ address: ctx.utils, abi: utilsAbi, functionName: 'callChainId' });
    expect(chainId).toBe(BigInt(anvil.chainId));

    const again = await deploySequenceV2Context(anvil.rpcUrl);
    expect(again.deployed).toEqual([]);
    expect(again.factory).toBe('0xFaA5c0b14d1bED5C888Ca655B9a8A5911F78eF4A');
  });

  it('derives the counterfactual wallet address the official way and by CREATE2', () => {
    // walletFor throws when @0xsequence/core and CREATE2 over the factory disagree.
    const { address } = newSigner();
    const w = walletFor(address);
    expect(w.signer).toBe(address);
    expect(w.imageHash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(walletFor(address.toLowerCase() as Address)).toEqual(w);
    expect(walletFor(newSigner().address).address).not.toBe(w.address);
  });
});

describe('official Wallet with LocalRelayer', () => {
  it('sends from an undeployed wallet holding no ETH, deploying it on the way', async () => {
    const user = newSigner();
    const w = officialWallet({ signerKey: user.privateKey, rpcUrl: anvil.rpcUrl, chainId: anvil.chainId, localRelayerKey: LOCAL_RELAYER_KEY });
    try {
      expect(await pub.getBalance({ address: w.address })).toBe(0n);
      expect(await w.isDeployed()).toBe(false);
      expect(await w.getFeeOptions([{ to: ctx.utils }])).toEqual({ options: [] });

      const target: Address = '0x00000000000000000000000000000000000c0ffe';
      const first = await w.sendTransaction([{ to: target, value: 0n, data: '0x' }]);
      expect(first.bundle.entrypoint).toBe(SEQUENCE_V2_CONTEXT.guestModule);
      expect(await w.isDeployed()).toBe(true);

      const receipt = await pub.getTransactionReceipt({ hash: first.hash });
      expect(receipt.status).toBe('success');
      // The plain Wallet keeps the inner bundle's intent: its id is the wallet subdigest, which the
      // wallet's TxExecuted carries, and differs from the guest module's own id.
      expect(executedIds(receipt, w.address)).toEqual([{ tx: first.id, index: 0n }]);
      const guest = executedIds(receipt, SEQUENCE_V2_CONTEXT.guestModule);
      expect(guest.map((g) => g.index)).toEqual([0n, 1n]);
      expect(guest[0]!.tx).not.toBe(first.id);

      // Deployed now: the next bundle goes to the wallet itself, in the nonce space read from chain.
      const second = await w.sendTransaction([{ to: ctx.utils, data: callChainId }], { nonce: { space: 0n } });
      expect(second.bundle.entrypoint).toBe(w.address);
      const receipt2 = await pub.getTransactionReceipt({ hash: second.hash });
      expect(executedIds(receipt2, w.address)).toEqual([{ tx: second.id, index: 0n }]);
      expect(await readNonce(w.address, 0n)).toBe(1n);
    } finally {
      w.close();
    }
  });
});

describe('signedBundle sent raw', () => {
  const user = newSigner();
  const wallet = walletFor(user.address);

  it('deploys through the guest module and executes, emitting TxExecuted(walletId)', async () => {
    const target: Address = '0x000000000000000000000000000000000000bEEF';
    const bundle = await signedBundle({
      signerKey: user.privateKey,
      wallet,
      chainId: anvil.chainId,
      txs: [{ to: target, value: 0n }],
      nonce: { space: 0n, n: 0n },
      deployed: false,
    });
    expect(bundle.entrypoint).toBe(SEQUENCE_V2_CONTEXT.guestModule);
    expect(bundle.input.slice(0, 10)).toBe('0x7a9a1628');
    expect(bundle.id).not.toBe(bundle.walletId);

    const receipt = await sendRaw(bundle);
    expect(receipt.status).toBe('success');
    expect(executedIds(receipt, wallet.address)).toEqual([{ tx: bundle.walletId, index: 0n }]);
    expect(executedIds(receipt, SEQUENCE_V2_CONTEXT.guestModule)).toEqual([
      { tx: bundle.id, index: 0n },
      { tx: bundle.id, index: 1n },
    ]);
    expect((await pub.getCode({ address: wallet.address }))?.length).toBeGreaterThan(2);
    expect(await readNonce(wallet.address, 0n)).toBe(1n);
    const slot = await pub.getStorageAt({ address: wallet.address, slot: sequenceNonceSlot(0n) });
    expect(BigInt(slot!)).toBe(1n);
  });

  it('uses nonce space 7 independently, and refuses a replay with BadNonce', async () => {
    const bundle = await signedBundle({
      signerKey: user.privateKey,
      wallet,
      chainId: anvil.chainId,
      txs: [{ to: ctx.utils, data: callChainId }],
      nonce: { space: 7n, n: 0n },
      deployed: true,
    });
    expect(bundle.entrypoint).toBe(wallet.address);
    expect(bundle.id).toBe(bundle.walletId);
    expect(bundle.nonce).toBe(7n << 96n);

    const receipt = await sendRaw(bundle);
    expect(receipt.status).toBe('success');
    expect(executedIds(receipt, wallet.address)).toEqual([{ tx: bundle.walletId, index: 0n }]);
    const nonceChanges = parseEventLogs({ abi: sequenceWalletAbi, logs: receipt.logs, eventName: 'NonceChange' });
    expect(nonceChanges.map((l) => l.args)).toEqual([{ _space: 7n, _newNonce: 1n }]);
    expect(await readNonce(wallet.address, 7n)).toBe(1n);
    expect(await readNonce(wallet.address, 0n)).toBe(1n);
    const slot = await pub.getStorageAt({ address: wallet.address, slot: sequenceNonceSlot(7n) });
    expect(BigInt(slot!)).toBe(1n);

    expect(await revertError(bundle)).toEqual({ errorName: 'BadNonce', args: [7n, 0n, 1n] });
  });

  it('reverts a bundle signed by another key, and the nonce stays unused', async () => {
    const bundle = await signedBundle({
      signerKey: newSigner().privateKey,
      wallet,
      chainId: anvil.chainId,
      txs: [{ to: ctx.utils, data: callChainId }],
      nonce: { space: 0n, n: 1n },
      deployed: true,
    });
    const reverted = await revertError(bundle);
    expect(reverted.errorName).toBe('InvalidSignature');
    expect(reverted.args?.[0]).toBe(bundle.walletId);

    const receipt = await sendRaw(bundle);
    expect(receipt.status).toBe('reverted');
    expect(await readNonce(wallet.address, 0n)).toBe(1n);
  });

  it('reports an inner failure with revertOnError=false as TxFailed while the outer call succeeds', async () => {
    const bundle = await signedBundle({
      signerKey: user.privateKey,
      wallet,
      chainId: anvil.chainId,
      // SequenceUtils has no fallback, so an unknown selector reverts.
      txs: [
        { to: ctx.utils, data: '0xdeadbeef', revertOnError: false },
        { to: ctx.utils, data: callChainId },
      ],
      nonce: { space: 0n, n: 1n },
      deployed: true,
    });
    const receipt = await sendRaw(bundle);
    expect(receipt.status).toBe('success');
    const failed = parseEventLogs({ abi: sequenceWalletAbi, logs: receipt.logs, eventName: 'TxFailed' });
    expect(failed.map((l) => [l.args._tx, l.args._index])).toEqual([[bundle.walletId, 0n]]);
    expect(executedIds(receipt, wallet.address)).toEqual([{ tx: bundle.walletId, index: 1n }]);
  });
});

interface Recorded {
  method: string;
  accessKey: string | undefined;
  body: Record<string, unknown>;
}

/**
 * A stand-in at a relayer URL that records what RpcRelayer sends and answers just enough to let
 * the official client finish: fees required in native ETH, and SendMetaTxn relayed from anvil
 * account 0. It pins the wire traffic of the v2 client; it is not a relayer.
 */
async function startRecordingRelayer(feeCollector: Address) {
  const calls: Recorded[] = [];
  let lastHash: Hex | undefined;
  const token = { chainId: anvil.chainId, name: 'Ether', symbol: 'ETH', type: 'UNKNOWN', decimals: 18, logoURL: '', contractAddress: null, tokenID: null };
  const answer = async (method: string, body: Record<string, unknown>): Promise<unknown> => {
    switch (method) {
      case 'FeeTokens':
        return { isFeeRequired: true, tokens: [token], paymentAddress: feeCollector };
      case 'GetMetaTxnNonce':
        return { nonce: '0' };
      case 'FeeOptions':
        return { options: [{ token, to: feeCollector, value: '1000', gasLimit: 50000 }], sponsored: false, quote: 'quote-1' };
      case 'SendMetaTxn': {
        const call = body.call as { contract: Address; input: Hex };
        lastHash = await sender.sendTransaction({ to: call.contract, data: call.input, gas: OUTER_GAS });
        return { status: true, txnHash: lastHash.slice(2) };
      }
      case 'GetMetaTxnReceipt': {
        const receipt = lastHash ? await pub.request({ method: 'eth_getTransactionReceipt', params: [lastHash] }) : null;
        return { receipt: { id: body.metaTxID, status: receipt ? 'SUCCEEDED' : 'QUEUED', txnReceipt: JSON.stringify(receipt), logs: [] } };
      }
      default:
        return undefined;
    }
  };
  const server = http.createServer(async (req, res) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const method = (req.url ?? '').replace('/rpc/Relayer/', '');
    const body = (raw ? JSON.parse(raw) : {}) as Record<string, unknown>;
    calls.push({ method, accessKey: req.headers['x-access-key'] as string | undefined, body });
    const out = await answer(method, body);
    res.writeHead(out === undefined ? 404 : 200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(out ?? { error: 'WebrpcBadRoute', code: -4, status: 404 }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('official Wallet with RpcRelayer', () => {
  it('asks for fees, pays the chosen option in the bundle, relays and polls by the wallet subdigest', async () => {
    const feeCollector: Address = '0x000000000000000000000000000000000000fEE5';
    const relayer = await startRecordingRelayer(feeCollector);
    const user = newSigner();
    const w = officialWallet({
      signerKey: user.privateKey,
      rpcUrl: anvil.rpcUrl,
      chainId: anvil.chainId,
      relayerUrl: relayer.url,
      projectAccessKey: 'test-key',
    });
    try {
      await pub.request({ method: 'anvil_setBalance' as never, params: [w.address, '0xde0b6b3a7640000'] as never });
      const txs = [{ to: '0x00000000000000000000000000000000000000aa' as Address, value: 5n }];

      const fees = await w.getFeeOptions(txs);
      expect(fees.quote).toEqual({ _tag: 'FeeQuote', _quote: 'quote-1' });
      expect(relayer.calls.map((c) => c.method)).toEqual(['FeeTokens', 'GetMetaTxnNonce', 'FeeOptions']);
      expect(relayer.calls.every((c) => c.accessKey === 'test-key')).toBe(true);
      expect(relayer.calls[1]!.body).toEqual({ walletContractAddress: w.address });
      const feeOptions = relayer.calls[2]!.body as { wallet: Address; to: Address; data: Hex };
      // FeeOptions targets the (still undeployed) wallet with an unsigned execute(txs, 0, 0x).
      expect(feeOptions.wallet).toBe(w.address);
      expect(feeOptions.to).toBe(w.address);
      const quoted = decodeExecute(feeOptions.data);
      expect(quoted.nonce).toBe(0n);
      expect(quoted.signature).toBe('0x');
      expect(quoted.txs).toEqual([{ delegateCall: false, revertOnError: true, gasLimit: 0n, target: getAddress(txs[0]!.to), value: 5n, data: '0x' }]);

      relayer.calls.length = 0;
      const sent = await w.sendTransaction(txs, { quote: fees.quote, fee: fees.options[0] });
      // The client polls the receipt until it is there: once, or again when a loaded machine mined it late.
      const [first, ...polls] = relayer.calls.map((c) => c.method);
      expect([first, [...new Set(polls)]]).toEqual(['SendMetaTxn', ['GetMetaTxnReceipt']]);
      const send = relayer.calls[0]!.body as { call: { walletAddress: Address; contract: Address; input: Hex }; quote: string };
      expect(send.quote).toBe('quote-1');
      expect(send.call.walletAddress).toBe(w.address);
      expect(send.call.contract).toBe(SEQUENCE_V2_CONTEXT.guestModule);
      expect(relayer.calls[1]!.body).toEqual({ metaTxID: sent.id });

      const guest = decodeExecute(send.call.input);
      expect(guest.txs).toHaveLength(2);
      const [deploy, execute] = guest.txs;
      expect(decodeFunctionData({ abi: sequenceFactoryAbi, data: deploy!.data }).args).toEqual([SEQUENCE_V2_CONTEXT.mainModule, w.imageHash]);
      expect(deploy!.gasLimit).toBe(100_000n);
      expect(execute!.target).toBe(w.address);
      // The fee payment rides at the end of the wallet's own bundle.
      const inner = decodeExecute(execute!.data);
      expect(inner.txs.at(-1)).toEqual({
        delegateCall: false,
        revertOnError: true,
        gasLimit: 50_000n,
        target: getAddress(feeCollector),
        value: 1000n,
        data: '0x',
      });

      const receipt = await pub.getTransactionReceipt({ hash: sent.hash });
      expect(executedIds(receipt, w.address)).toEqual([
        { tx: sent.id, index: 0n },
        { tx: sent.id, index: 1n },
      ]);
      expect(await pub.getBalance({ address: feeCollector })).toBe(1000n);
    } finally {
      w.close();
      await relayer.close();
    }
  });
});
