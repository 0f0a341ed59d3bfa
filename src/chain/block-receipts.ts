import { formatTransactionReceipt, type Hex, type RpcTransactionReceipt, type TransactionReceipt } from 'viem';
import type { BlockHeader } from './head.ts';
import type { ChainClient } from './client.ts';

const hex = (n: bigint) => `0x${n.toString(16)}`;
/** Receipts asked for at once when a node has no eth_getBlockReceipts (the transport batches them). */
const RECEIPTS_AT_ONCE = 16;

/** One block's header and every transaction's receipt, in block order. */
export interface BlockReceipts {
  header: BlockHeader;
  receipts: TransactionReceipt[];
}

/**
 * A block's header and all its receipts: the header from the chain's shared head reader (kept when recent),
 * the receipts in one eth_getBlockReceipts, else (a node without it) one eth_getTransactionReceipt per
 * transaction. Null when the node has no block there (a node behind) or its receipts are of another
 * fork than the header (the chain moved under the read): the caller asks again later.
 */
export async function readBlockReceipts(chain: ChainClient, n: bigint): Promise<BlockReceipts | null> {
  const header = await chain.head.block(n, chain.public);
  if (!header) return null;
  const got: unknown = await chain.public.request({ method: 'eth_getBlockReceipts', params: [hex(n)] } as never, { retryCount: 0 }).catch(() => null);
  let wire: Array<RpcTransactionReceipt | null>;
  if (Array.isArray(got)) wire = got as RpcTransactionReceipt[];
  else {
    const b = (await chain.public.request({ method: 'eth_getBlockByNumber', params: [hex(n), false] } as never)) as { hash: Hex; transactions: Hex[] } | null;
    if (!b || b.hash.toLowerCase() !== header.hash) return null;
    wire = [];
    for (let i = 0; i < b.transactions.length; i += RECEIPTS_AT_ONCE) {
      const group = b.transactions.slice(i, i + RECEIPTS_AT_ONCE);
      wire.push(...((await Promise.all(group.map((hash) => chain.public.request({ method: 'eth_getTransactionReceipt', params: [hash] } as never)))) as Array<RpcTransactionReceipt | null>));
    }
  }
  if (wire.some((r) => !r || r.blockHash?.toLowerCase() !== header.hash)) {
    // A header kept from before the chain moved: read from the node next time.
    chain.head.distrust(n);
    return null;
  }
  return { header, receipts: wire.map((r) => formatTransactionReceipt(r!)) };
}
