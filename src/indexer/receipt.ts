import type { Hash, TransactionReceipt } from 'viem';
import type { ChainClient } from '../chain/client.ts';

/**
 * The schema's TransactionType has three members. Blob (type 3) and set-code (type 4) transactions are priced
 * like type 2 (maxFeePerGas, maxPriorityFeePerGas), so they are reported as DynamicFeeTxnType: a typed
 * client decoding the enum never meets a value outside it (docs/api.md).
 */
const TYPES: Record<string, string> = { legacy: 'LegacyTxnType', eip2930: 'AccessListTxnType', eip1559: 'DynamicFeeTxnType', eip4844: 'DynamicFeeTxnType', eip7702: 'DynamicFeeTxnType' };

/** A chain receipt in the indexer's TransactionReceipt shape; `final` once `confirmations` blocks are on top. */
export function receiptWire(r: TransactionReceipt, head: bigint, confirmations: number) {
  return {
    txnHash: r.transactionHash,
    txnStatus: r.status === 'success' ? 'SUCCESSFUL' : 'FAILED',
    txnIndex: r.transactionIndex,
    txnType: TYPES[r.type] ?? 'DynamicFeeTxnType',
    blockHash: r.blockHash,
    blockNumber: Number(r.blockNumber),
    gasUsed: Number(r.gasUsed),
    effectiveGasPrice: r.effectiveGasPrice.toString(),
    from: r.from.toLowerCase(),
    to: r.to?.toLowerCase() ?? '',
    logs: r.logs.map((l) => ({ contractAddress: l.address.toLowerCase(), topics: l.topics, data: l.data, index: l.logIndex })),
    final: head - r.blockNumber >= BigInt(confirmations),
    reorged: false,
  };
}

/**
 * The receipt of a transaction, waiting for it to be mined for at most `maxBlockWait` new blocks
 * (and `maxWaitMs`); null when it is not mined by then.
 */
export async function fetchReceipt(chain: ChainClient, hash: Hash, maxBlockWait: number, maxWaitMs: number, pollMs: number): Promise<TransactionReceipt | null> {
  const started = Date.now();
  const startHead = await chain.head.number();
  for (;;) {
    const r = await chain.public.getTransactionReceipt({ hash }).catch(() => null);
    if (r) return r;
    if (maxBlockWait <= 0 || Date.now() - started >= maxWaitMs) return null;
    if ((await chain.head.number()) - startHead >= BigInt(maxBlockWait)) return null;
    await new Promise((res) => setTimeout(res, pollMs));
  }
}
