import { receiptWire } from './receipt.ts';
import { receiptMatches, type ReceiptFilter } from './receipt-filter.ts';
import type { TailBlock } from './stream-tail.ts';

/**
 * SubscribeReceipts' `{"receipt":…}` frames of the block's receipts that pass the filter, in block order.
 * A block the tail hands out has its `confirmations`: `final`. `removed`: the block left the chain, and
 * the same receipts (those sent when it was handed out) go again with Sequence's `reorged: true`, no
 * longer `final`.
 */
export function receiptFrames(b: TailBlock, f: ReceiptFilter, confirmations: number, removed = false): string[] {
  return b.receipts
    .filter((r) => receiptMatches(r, f))
    .map((r) => {
      const wire = receiptWire(r, b.number + BigInt(confirmations), confirmations);
      return `{"receipt":${JSON.stringify(removed ? { ...wire, final: false, reorged: true } : wire)}}`;
    });
}
