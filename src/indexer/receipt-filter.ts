import { toEventSelector, type Hash, type Hex, type TransactionReceipt } from 'viem';
import type { ChainClient } from '../chain/client.ts';

/** FetchTransactionReceiptWithFilter's TransactionFilter, addresses lower-cased, `event` a topic (see eventTopic). */
export interface ReceiptFilter {
  txnHash?: Hash;
  from?: string;
  to?: string;
  contractAddress?: string;
  event?: Hex;
}

/**
 * An event as the filter names it: a 32-byte topic as is, or a signature (`Transfer(address,address,uint256)`,
 * with or without `event` and parameter names) hashed; null when it is neither.
 */
export function eventTopic(event: string): Hex | null {
  const e = event.trim();
  if (/^0x[0-9a-fA-F]{64}$/.test(e)) return e.toLowerCase() as Hex;
  if (!/^(event\s+)?[A-Za-z_$][\w$]*\s*\(.*\)$/.test(e)) return null;
  try {
    return toEventSelector(e);
  } catch {
    return null;
  }
}

/** Whether a receipt passes every field the filter sets; `contractAddress` is the called contract or one that logged. */
export function receiptMatches(r: TransactionReceipt, f: ReceiptFilter): boolean {
  if (f.txnHash && r.transactionHash.toLowerCase() !== f.txnHash.toLowerCase()) return false;
  if (f.from && r.from.toLowerCase() !== f.from) return false;
  if (f.to && r.to?.toLowerCase() !== f.to) return false;
  if (f.contractAddress && r.to?.toLowerCase() !== f.contractAddress && !r.logs.some((l) => l.address.toLowerCase() === f.contractAddress)) return false;
  if (f.event && !r.logs.some((l) => l.topics[0]?.toLowerCase() === f.event && (!f.contractAddress || l.address.toLowerCase() === f.contractAddress))) return false;
  return true;
}

/** The hashes of a block's transactions that may match, in block order: from its logs when the filter names a contract or an event, else from its transactions. */
async function candidates(chain: ChainClient, block: bigint, f: ReceiptFilter): Promise<Hash[]> {
  if (f.contractAddress || f.event) {
    const logs = await chain.public.getLogs({
      fromBlock: block,
      toBlock: block,
      ...(f.event ? { topics: [f.event] } : {}),
      ...(f.event && f.contractAddress ? { address: f.contractAddress as Hex } : {}),
    } as Parameters<typeof chain.public.getLogs>[0]);
    const fromLogs = [...new Set(logs.map((l) => l.transactionHash).filter((h): h is Hash => h !== null))];
    if (f.event || !f.contractAddress) return fromLogs;
    // A contract called without logging is found by its transaction's `to`.
    const b = await chain.public.getBlock({ blockNumber: block, includeTransactions: true });
    const called = b.transactions.filter((t) => t.to?.toLowerCase() === f.contractAddress).map((t) => t.hash);
    return b.transactions.map((t) => t.hash).filter((h) => called.includes(h) || fromLogs.includes(h));
  }
  const b = await chain.public.getBlock({ blockNumber: block, includeTransactions: true });
  return b.transactions.filter((t) => (!f.from || t.from.toLowerCase() === f.from) && (!f.to || t.to?.toLowerCase() === f.to)).map((t) => t.hash);
}

/**
 * The first receipt matching the filter in the blocks from the head at the call to `maxBlockWait` blocks
 * after it (and at most `maxWaitMs`), as Sequence's answer from a subscription that stops at its first
 * receipt; with a `txnHash`, that transaction's receipt if it matches the rest. Null when none by then.
 */
export async function findReceipt(chain: ChainClient, f: ReceiptFilter, maxBlockWait: number, maxWaitMs: number, pollMs: number): Promise<TransactionReceipt | null> {
  const started = Date.now();
  const first = await chain.head.number();
  const last = first + BigInt(Math.max(0, maxBlockWait));
  let next = first;
  for (;;) {
    if (f.txnHash) {
      const r = await chain.public.getTransactionReceipt({ hash: f.txnHash }).catch(() => null);
      if (r) return receiptMatches(r, f) ? r : null;
    } else {
      const head = await chain.head.number();
      for (; next <= head && next <= last; next++) {
        for (const hash of await candidates(chain, next, f)) {
          const r = await chain.public.getTransactionReceipt({ hash });
          if (receiptMatches(r, f)) return r;
        }
      }
      if (next > last) return null;
    }
    if (Date.now() - started >= maxWaitMs) return null;
    if (f.txnHash && (await chain.head.number()) >= last) return null;
    await new Promise((res) => setTimeout(res, pollMs));
  }
}
