// What the chain says happened, to judge a relayer run by (the soak bench): every transaction the
// senders signed in a block range with its receipt, the wallets' TxExecuted events, and the wallets'
// nonces. Nothing here asks metarelay.
import { createPublicClient, http, type Address, type Hex } from 'viem';
import { sequenceWalletAbi } from '../../test/support/sequence-wallet.ts';

async function batch<T>(rpcUrl: string, calls: Array<{ method: string; params: unknown[] }>): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < calls.length; i += 100) {
    const slice = calls.slice(i, i + 100);
    const res = await fetch(rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(slice.map((c, id) => ({ jsonrpc: '2.0', id, ...c }))),
    });
    const body = (await res.json()) as Array<{ id: number; result?: T; error?: { message: string } }>;
    body.sort((a, b) => a.id - b.id);
    for (const r of body) {
      if (r.error) throw new Error(`${slice[r.id].method}: ${r.error.message}`);
      out.push(r.result as T);
    }
  }
  return out;
}

export interface SenderTruth {
  txs: number;
  hashes: Set<string>;
  nonces: number[];
  /** Σ gasUsed × effectiveGasPrice + value of the sender's transactions in the range. */
  spentWei: bigint;
  reverted: number;
}

/** Every transaction from `senders` in blocks (from, to], with its receipt. */
export async function senderTransactions(rpcUrl: string, senders: string[], from: number, to: number): Promise<Map<string, SenderTruth>> {
  const want = new Set(senders.map((s) => s.toLowerCase()));
  const out = new Map<string, SenderTruth>([...want].map((s) => [s, { txs: 0, hashes: new Set(), nonces: [], spentWei: 0n, reverted: 0 }]));
  const numbers = Array.from({ length: to - from }, (_, i) => from + 1 + i);
  const blocks = await batch<{ transactions: Array<{ hash: string; from: string; nonce: Hex; value: Hex }> }>(
    rpcUrl,
    numbers.map((n) => ({ method: 'eth_getBlockByNumber', params: [`0x${n.toString(16)}`, true] })),
  );
  const receipts = await batch<Array<{ transactionHash: string; gasUsed: Hex; effectiveGasPrice: Hex; status: Hex }>>(
    rpcUrl,
    numbers.map((n) => ({ method: 'eth_getBlockReceipts', params: [`0x${n.toString(16)}`] })),
  );
  for (const [i, block] of blocks.entries()) {
    const byHash = new Map(receipts[i].map((r) => [r.transactionHash.toLowerCase(), r]));
    for (const tx of block.transactions) {
      const s = out.get(tx.from.toLowerCase());
      if (!s) continue;
      const r = byHash.get(tx.hash.toLowerCase());
      if (!r) throw new Error(`no receipt for ${tx.hash} in its block`);
      s.txs++;
      s.hashes.add(tx.hash.toLowerCase());
      s.nonces.push(Number(BigInt(tx.nonce)));
      s.spentWei += BigInt(r.gasUsed) * BigInt(r.effectiveGasPrice) + BigInt(tx.value);
      if (r.status !== '0x1') s.reverted++;
    }
  }
  return out;
}

export async function balancesAt(rpcUrl: string, addresses: string[], block: number) {
  const tag = `0x${block.toString(16)}`;
  const [bal, nonce] = await Promise.all([
    batch<Hex>(
      rpcUrl,
      addresses.map((a) => ({ method: 'eth_getBalance', params: [a, tag] })),
    ),
    batch<Hex>(
      rpcUrl,
      addresses.map((a) => ({ method: 'eth_getTransactionCount', params: [a, tag] })),
    ),
  ]);
  return new Map(addresses.map((a, i) => [a.toLowerCase(), { wei: BigInt(bal[i]), nonce: Number(BigInt(nonce[i])) }]));
}

export interface Executed {
  tx: string;
  wallet: string;
  txHash: string;
  block: number;
}

/** The wallets' TxExecuted events in blocks (from, to]; `_tx` is the bundle's subdigest (the meta-transaction id). */
export async function txExecuted(rpcUrl: string, chainId: number, from: number, to: number): Promise<Executed[]> {
  const client = createPublicClient({ transport: http(rpcUrl) });
  const event = sequenceWalletAbi.find((x) => x.type === 'event' && x.name === 'TxExecuted')!;
  const out: Executed[] = [];
  void chainId;
  for (let b = from + 1; b <= to; b += 500) {
    const logs = await client.getLogs({ event: event as never, fromBlock: BigInt(b), toBlock: BigInt(Math.min(to, b + 499)) });
    for (const l of logs as Array<{ args: { _tx: Hex }; address: Address; transactionHash: Hex; blockNumber: bigint }>) {
      out.push({ tx: l.args._tx.slice(2).toLowerCase(), wallet: l.address.toLowerCase(), txHash: l.transactionHash.toLowerCase(), block: Number(l.blockNumber) });
    }
  }
  return out;
}

/** readNonce(space) of each (wallet, space), through Multicall3. */
export async function walletNonces(rpcUrl: string, pairs: Array<{ wallet: Address; space: bigint }>): Promise<bigint[]> {
  const client = createPublicClient({ transport: http(rpcUrl), batch: { multicall: false } });
  const out: bigint[] = [];
  for (let i = 0; i < pairs.length; i += 500) {
    const r = await client.multicall({
      allowFailure: false,
      contracts: pairs.slice(i, i + 500).map((p) => ({ address: p.wallet, abi: sequenceWalletAbi, functionName: 'readNonce', args: [p.space] }) as const),
      multicallAddress: '0xcA11bde05977b3631167028862bE2a173976CA11',
    });
    out.push(...(r as bigint[]));
  }
  return out;
}
