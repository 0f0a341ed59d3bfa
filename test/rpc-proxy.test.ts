// The fault harness pieces themselves, against a real anvil: each rpc-proxy fault does what it is named,
// and the anvil-control helpers (restart included) steer the node as documented.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, createWalletClient, http, keccak256, parseEther, TimeoutError, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { devChainDefinition } from '../src/devchain/clients.ts';
import { startAnvil, type AnvilHandle } from '../src/devchain/anvil.ts';
import { rpcCall, RpcError } from '../src/devchain/rpc.ts';
import { startRpcProxy, type RpcProxy } from './support/rpc-proxy.ts';
import { dropTransaction, mine, restartAnvil, revert, setAutomine, setNextBaseFee, snapshot, txpoolContent, txpoolHashes } from './support/anvil-control.ts';

// Init code deploying runtime 0x602a60005260206000f3 (returns 42 for any call).
const RUNTIME: Hex = '0x602a60005260206000f3';
const INIT_CODE: Hex = `0x69${RUNTIME.slice(2)}600052600a6016f3`;

let anvil: AnvilHandle;
let proxy: RpcProxy;

function clients(url: string, opts: { timeout?: number; batch?: boolean } = {}) {
  const chain = devChainDefinition(anvil.chainId, url);
  const transport = http(url, { timeout: opts.timeout ?? 5_000, retryCount: 0, batch: opts.batch ?? false });
  return {
    pub: createPublicClient({ chain, transport, pollingInterval: 50, cacheTime: 0 }),
    wallet: (account: PrivateKeyAccount) => createWalletClient({ account, chain, transport, pollingInterval: 50, cacheTime: 0 }),
  };
}

async function fundedAccount(url = anvil.rpcUrl): Promise<PrivateKeyAccount> {
  const account = privateKeyToAccount(generatePrivateKey());
  await rpcCall(url, 'anvil_setBalance', [account.address, '0x56bc75e2d63100000']); // 100 ETH
  return account;
}

async function post(url: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, json: res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text };
}

beforeAll(async () => {
  anvil = await startAnvil({ blockTime: null });
  proxy = await startRpcProxy(anvil.rpcUrl);
});

afterEach(() => {
  proxy.clearRules();
  proxy.setUpstream(anvil.rpcUrl);
});

afterAll(async () => {
  await proxy?.close();
  await anvil?.stop();
});

describe('rpc-proxy', () => {
  it('forwards calls untouched and records every one', async () => {
    proxy.calls.length = 0;
    expect(Number(await rpcCall<string>(proxy.url, 'eth_chainId'))).toBe(anvil.chainId);
    const direct = await rpcCall<string>(anvil.rpcUrl, 'eth_blockNumber');
    expect(await rpcCall<string>(proxy.url, 'eth_blockNumber')).toBe(direct);
    await rpcCall(proxy.url, 'eth_getBalance', ['0x00000000000000000000000000000000000000a1', 'latest']);
    expect(proxy.calls.map((c) => c.method)).toEqual(['eth_chainId', 'eth_blockNumber', 'eth_getBalance']);
    expect(proxy.calls[2]!.params).toEqual(['0x00000000000000000000000000000000000000a1', 'latest']);
    expect(proxy.count('eth_blockNumber')).toBe(1);
    expect(proxy.count('eth_call')).toBe(0);
  });

  it('fail: answers the JSON-RPC error without forwarding; removing the rule restores the call', async () => {
    const remove = proxy.addRule((c) => (c.method === 'eth_chainId' ? { kind: 'fail', code: -32005, message: 'rate limited' } : undefined));
    const err = await rpcCall(proxy.url, 'eth_chainId').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RpcError);
    expect((err as RpcError).code).toBe(-32005);
    expect((err as RpcError).message).toMatch(/rate limited/);
    // Not forwarded: a failed eth_sendTransaction leaves the node's nonce alone.
    const account = await fundedAccount();
    proxy.addRule((c) => (c.method === 'eth_sendRawTransaction' ? { kind: 'fail' } : undefined));
    const { wallet } = clients(proxy.url);
    const sendErr = await wallet(account)
      .sendTransaction({ to: account.address, value: 1n })
      .catch((e: unknown) => e);
    expect(String(sendErr)).toMatch(/injected fault/);
    expect(await rpcCall<string>(anvil.rpcUrl, 'eth_getTransactionCount', [account.address, 'latest'])).toBe('0x0');
    remove();
    expect(Number(await rpcCall<string>(proxy.url, 'eth_chainId'))).toBe(anvil.chainId);
  });

  it('the first rule giving a fault wins', async () => {
    proxy.addRule(() => undefined);
    proxy.addRule((c) => (c.method === 'eth_chainId' ? { kind: 'fail', code: 1 } : undefined));
    proxy.addRule(() => ({ kind: 'fail', code: 2 }));
    await expect(rpcCall(proxy.url, 'eth_chainId')).rejects.toMatchObject({ code: 1 });
    await expect(rpcCall(proxy.url, 'eth_blockNumber')).rejects.toMatchObject({ code: 2 });
  });

  it('delay: forwards after the delay', async () => {
    // The delay is long next to a local call, so a busy machine cannot blur the two.
    proxy.addRule((c) => (c.method === 'eth_blockNumber' ? { kind: 'delay', ms: 1500 } : undefined));
    const t0 = Date.now();
    expect(await rpcCall<string>(proxy.url, 'eth_blockNumber')).toMatch(/^0x/);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1490);
    const t1 = Date.now();
    await rpcCall(proxy.url, 'eth_chainId');
    expect(Date.now() - t1).toBeLessThan(1400);
  });

  it('drop: the connection dies without an answer', async () => {
    proxy.addRule((c) => (c.method === 'eth_blockNumber' ? { kind: 'drop' } : undefined));
    await expect(rpcCall(proxy.url, 'eth_blockNumber')).rejects.toThrow(/fetch failed|socket|closed|reset/i);
    await expect(clients(proxy.url).pub.getBlockNumber()).rejects.toThrow(/HTTP request failed/);
  });

  it('http: answers the status without forwarding', async () => {
    proxy.addRule((c) => (c.method === 'eth_blockNumber' ? { kind: 'http', status: 503 } : undefined));
    await expect(rpcCall(proxy.url, 'eth_blockNumber')).rejects.toThrow(/HTTP 503/);
    await expect(clients(proxy.url).pub.getBlockNumber()).rejects.toMatchObject({ name: 'HttpRequestError', status: 503 });
  });

  it('timeoutAfterForward on eth_sendRawTransaction: the client times out, yet anvil mined the transaction', async () => {
    proxy.addRule((c) => (c.method === 'eth_sendRawTransaction' ? { kind: 'timeoutAfterForward' } : undefined));
    const account = await fundedAccount();
    const { pub, wallet } = clients(proxy.url, { timeout: 400 });
    const w = wallet(account);
    const request = await w.prepareTransactionRequest({ to: '0x00000000000000000000000000000000000000b2', value: 12345n });
    const signed = await w.signTransaction(request);
    const err = await pub.sendRawTransaction({ serializedTransaction: signed }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TimeoutError);
    const receipt = await rpcCall<{ status: string } | null>(anvil.rpcUrl, 'eth_getTransactionReceipt', [keccak256(signed)]);
    expect(receipt?.status).toBe('0x1');
    expect(BigInt(await rpcCall<string>(anvil.rpcUrl, 'eth_getBalance', ['0x00000000000000000000000000000000000000b2', 'latest']))).toBe(12345n);
    expect(proxy.count('eth_sendRawTransaction')).toBeGreaterThanOrEqual(1);
  });

  it('timeoutAfterForward with ms: the connection is closed, unanswered, after ms', async () => {
    proxy.addRule((c) => (c.method === 'eth_blockNumber' ? { kind: 'timeoutAfterForward', ms: 200 } : undefined));
    const t0 = Date.now();
    await expect(rpcCall(proxy.url, 'eth_blockNumber', [], { timeoutMs: 5_000 })).rejects.toThrow(/fetch failed|socket|closed|reset/i);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
    // Closed by the proxy, not by the client's 5 s timeout.
    expect(Date.now() - t0).toBeLessThan(4_500);
  });

  it('batches: faults per element, answers keep the caller ids and order', async () => {
    proxy.addRule((c) => (c.method === 'eth_blockNumber' ? { kind: 'fail', code: -32099, message: 'nope' } : undefined));
    const addr = '0x00000000000000000000000000000000000000c3';
    await rpcCall(anvil.rpcUrl, 'anvil_setBalance', [addr, '0x7b']);
    const batch = [
      { jsonrpc: '2.0', id: 'x', method: 'eth_getBalance', params: [addr, 'latest'] },
      { jsonrpc: '2.0', id: 7, method: 'eth_blockNumber', params: [] },
      { jsonrpc: '2.0', id: 7, method: 'eth_chainId', params: [] }, // a duplicate id still maps back by position
      { jsonrpc: '2.0', id: 0, method: 'no_suchMethod', params: [] },
    ];
    const { status, json } = await post(proxy.url, batch);
    expect(status).toBe(200);
    const answers = json as { id: unknown; result?: string; error?: { code: number; message: string } }[];
    expect(answers.map((a) => a.id)).toEqual(['x', 7, 7, 0]);
    expect(answers[0]!.result).toBe('0x7b');
    expect(answers[1]!.error).toEqual({ code: -32099, message: 'nope' });
    expect(Number(answers[2]!.result)).toBe(anvil.chainId);
    expect(answers[3]!.error?.code).toBe(-32601); // anvil's own answer, passed through
  });

  it('batches: drop or http on one element fails the whole HTTP answer', async () => {
    const batch = [
      { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] },
      { jsonrpc: '2.0', id: 2, method: 'eth_blockNumber', params: [] },
    ];
    const remove = proxy.addRule((c) => (c.method === 'eth_blockNumber' ? { kind: 'http', status: 429 } : undefined));
    expect((await post(proxy.url, batch)).status).toBe(429);
    remove();
    proxy.addRule((c) => (c.method === 'eth_blockNumber' ? { kind: 'drop' } : undefined));
    await expect(post(proxy.url, batch)).rejects.toThrow(/fetch failed/);
  });

  it('batches: timeoutAfterForward on one element still forwards every element', async () => {
    proxy.addRule((c) => (c.method === 'eth_chainId' ? { kind: 'timeoutAfterForward' } : undefined));
    const addr = '0x00000000000000000000000000000000000000d4';
    const batch = [
      { jsonrpc: '2.0', id: 1, method: 'anvil_setBalance', params: [addr, '0x99'] },
      { jsonrpc: '2.0', id: 2, method: 'eth_chainId', params: [] },
    ];
    await expect(fetch(proxy.url, { method: 'POST', body: JSON.stringify(batch), signal: AbortSignal.timeout(400) })).rejects.toThrow(/abort|timeout/i);
    expect(await rpcCall<string>(anvil.rpcUrl, 'eth_getBalance', [addr, 'latest'])).toBe('0x99');
  });

  it("viem's batched requests go through with the right answers", async () => {
    const addrs = Array.from({ length: 5 }, (_, i) => `0x00000000000000000000000000000000000000e${i}` as const);
    for (const [i, a] of addrs.entries()) await rpcCall(anvil.rpcUrl, 'anvil_setBalance', [a, `0x${(i + 1).toString(16)}`]);
    // One element of viem's batch fails; the others still answer, each to its own caller.
    proxy.addRule((c) => (c.method === 'eth_getBalance' && c.params[0] === addrs[2] ? { kind: 'fail', code: -32098 } : undefined));
    const batchSizes: number[] = [];
    const pub = createPublicClient({
      chain: devChainDefinition(anvil.chainId, proxy.url),
      transport: http(proxy.url, {
        batch: true,
        retryCount: 0,
        onFetchRequest: async (req) => {
          const body = JSON.parse(await req.clone().text()) as unknown;
          batchSizes.push(Array.isArray(body) ? body.length : 1);
        },
      }),
      cacheTime: 0,
    });
    const results = await Promise.allSettled(addrs.map((address) => pub.getBalance({ address })));
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : 'rejected'))).toEqual([1n, 2n, 'rejected', 4n, 5n]);
    expect(String((results[2] as PromiseRejectedResult).reason)).toMatch(/injected fault/);
    expect(batchSizes).toEqual([5]);
  });

  it('setUpstream: an unreachable upstream answers 502; switching back works', async () => {
    proxy.setUpstream('http://127.0.0.1:1');
    await expect(rpcCall(proxy.url, 'eth_chainId')).rejects.toThrow(/HTTP 502/);
    proxy.setUpstream(anvil.rpcUrl);
    expect(Number(await rpcCall<string>(proxy.url, 'eth_chainId'))).toBe(anvil.chainId);
  });

  it('close() ends promptly, with a keep-alive connection and a held answer open', async () => {
    const own = await startRpcProxy(anvil.rpcUrl);
    await rpcCall(own.url, 'eth_chainId'); // leaves a keep-alive connection behind
    own.addRule(() => ({ kind: 'timeoutAfterForward' }));
    const held = rpcCall(own.url, 'eth_blockNumber', [], { timeoutMs: 10_000 }).catch((e: unknown) => e);
    while (own.count('eth_blockNumber') === 0) await new Promise((r) => setTimeout(r, 10));
    const t0 = Date.now();
    await own.close();
    // Not held until the client's 10 s timeout.
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(await held).toBeInstanceOf(Error);
  });
});

describe('anvil-control', () => {
  it('automine off keeps transactions in the pool; drop, mine, base fee, snapshot/revert', async () => {
    const url = anvil.rpcUrl;
    const account = await fundedAccount();
    const { pub, wallet } = clients(url);
    const snap = await snapshot(url);
    const snapBlock = await pub.getBlockNumber();
    await setAutomine(url, false);
    try {
      const h1 = await wallet(account).sendTransaction({ to: '0x00000000000000000000000000000000000000f1', value: 1n });
      const h2 = await wallet(account).sendTransaction({ to: '0x00000000000000000000000000000000000000f1', value: 2n });
      expect(txpoolHashes(await txpoolContent(url)).sort()).toEqual([h1, h2].sort());
      const pool = await txpoolContent(url);
      const bySender = Object.entries(pool.pending).find(([a]) => a.toLowerCase() === account.address.toLowerCase())?.[1];
      expect(Object.keys(bySender ?? {}).sort()).toEqual(['0', '1']);

      expect(await dropTransaction(url, h2)).toBe(true);
      expect(await dropTransaction(url, h2)).toBe(false);
      expect(txpoolHashes(await txpoolContent(url))).toEqual([h1]);

      const before = await pub.getBlockNumber();
      await mine(url, 2);
      expect(await pub.getBlockNumber()).toBe(before + 2n);
      expect((await pub.getTransactionReceipt({ hash: h1 })).blockNumber).toBe(before + 1n);
      expect(txpoolHashes(await txpoolContent(url))).toEqual([]);

      // A base fee above a pending transaction's maxFeePerGas: anvil does not keep it waiting (as
      // geth would) but evicts it from the pool when it mines.
      const h3 = await wallet(account).sendTransaction({ to: '0x00000000000000000000000000000000000000f1', value: 3n });
      const high = (await pub.getTransaction({ hash: h3 })).maxFeePerGas! * 10n;
      await setNextBaseFee(url, high);
      await mine(url);
      const block = await pub.getBlock({ blockNumber: before + 3n });
      expect(block.baseFeePerGas).toBe(high);
      expect(block.transactions).toEqual([]);
      expect(txpoolHashes(await txpoolContent(url))).toEqual([]);
      expect(await rpcCall(url, 'eth_getTransactionByHash', [h3])).toBeNull();
    } finally {
      await setAutomine(url, true);
    }
    await revert(url, snap);
    expect(await pub.getBlockNumber()).toBe(snapBlock);
    expect(await pub.getTransactionCount({ address: account.address })).toBe(0);
    expect(await pub.getBalance({ address: account.address })).toBe(parseEther('100'));
    await expect(revert(url, snap)).rejects.toThrow(/unknown snapshot/); // one use only
  });

  it('restartAnvil keeps balances, code, nonces and receipts; the mempool is lost', async () => {
    const first = await startAnvil({ blockTime: null });
    let node = first;
    const own = await startRpcProxy(node.rpcUrl);
    try {
      const account = await fundedAccount(node.rpcUrl);
      const { pub, wallet } = clients(own.url);
      const w = wallet(account);
      const deployHash = await w.deployContract({ abi: [], bytecode: INIT_CODE });
      // Automine mines after the send returns: wait for each receipt, not read it at once.
      const deployed = (await pub.waitForTransactionReceipt({ hash: deployHash, pollingInterval: 50 })).contractAddress!;
      const payHash = await w.sendTransaction({ to: '0x00000000000000000000000000000000000000a9', value: parseEther('1.5') });
      await pub.waitForTransactionReceipt({ hash: payHash, pollingInterval: 50 });
      const balanceBefore = await pub.getBalance({ address: account.address });
      const blockBefore = await pub.getBlockNumber();
      // A transaction left in the mempool.
      await setAutomine(node.rpcUrl, false);
      const pendingHash = await w.sendTransaction({ to: '0x00000000000000000000000000000000000000a9', value: 1n });
      expect(txpoolHashes(await txpoolContent(node.rpcUrl))).toEqual([pendingHash]);

      node = await restartAnvil(node, { blockTime: null });
      own.setUpstream(node.rpcUrl);
      expect(await rpcCall<string>(first.rpcUrl, 'eth_chainId', [], { timeoutMs: 500 }).catch(() => 'gone')).toBe('gone');

      expect(await pub.getBlockNumber()).toBe(blockBefore);
      expect(await pub.getBalance({ address: account.address })).toBe(balanceBefore);
      expect(await pub.getBalance({ address: '0x00000000000000000000000000000000000000a9' })).toBe(parseEther('1.5'));
      expect(await pub.getCode({ address: deployed })).toBe(RUNTIME);
      expect(await pub.call({ to: deployed })).toEqual({ data: `0x${'2a'.padStart(64, '0')}` });
      expect(await pub.getTransactionCount({ address: account.address })).toBe(2);
      expect((await pub.getTransactionReceipt({ hash: payHash })).status).toBe('success');
      // The pool did not survive; automine comes from the restart options.
      expect(txpoolHashes(await txpoolContent(node.rpcUrl))).toEqual([]);
      expect(await rpcCall(node.rpcUrl, 'eth_getTransactionByHash', [pendingHash])).toBeNull();
      expect(await rpcCall(node.rpcUrl, 'anvil_getAutomine')).toBe(true);
      // The chain goes on from where it was: the next nonce is 2.
      const next = await w.sendTransaction({ to: '0x00000000000000000000000000000000000000a9', value: 1n });
      expect((await pub.waitForTransactionReceipt({ hash: next, pollingInterval: 50 })).blockNumber).toBe(blockBefore + 1n);
      expect(await pub.getTransactionCount({ address: account.address })).toBe(3);
    } finally {
      await own.close();
      await node.stop();
    }
  });
});
