import { decodeEventLog, type Hex } from 'viem';
import { walletAbi } from './abi.ts';
import { describeRevert } from './intake/simulate.ts';
import type { BundleRow, MetaTxnRow } from './store.ts';

interface RawLog {
  address: string;
  topics: string[];
  data: string;
}

export interface RawReceipt {
  status?: string;
  transactionHash: string;
  blockNumber: string;
  blockHash: string;
  gasUsed?: string;
  effectiveGasPrice?: string;
  /** OP stack: the L1 data fee the sender paid on top of gasUsed × effectiveGasPrice. */
  l1Fee?: string;
  logs: RawLog[];
}

export interface BundleOutcome {
  id: string;
  executed: number;
  failed: number;
  reason: string | null;
  logs: RawLog[];
}

export interface Outcome {
  status: 'SUCCEEDED' | 'PARTIALLY_FAILED' | 'FAILED';
  reason: string | null;
  bundles: BundleOutcome[];
  /** FAILED with no wallet run at all (reverted, or no wallet event): the call never reached a wallet's code. */
  noWallet?: boolean;
}

/** A bundle's status from its wallet events: all ran, some failed, or all failed. */
function statusOf(executed: number, failed: number): Outcome['status'] {
  return failed === 0 ? 'SUCCEEDED' : executed === 0 ? 'FAILED' : 'PARTIALLY_FAILED';
}

/** What a mined transaction did to each of a meta-transaction's bundles, read from the wallets' events. */
export function outcomeOf(receipt: RawReceipt, metaId: string, bundles: Pick<BundleRow, 'bundle_id' | 'wallet'>[]): Outcome {
  const ids = new Map<string, BundleOutcome>();
  for (const id of [metaId, ...bundles.map((b) => b.bundle_id)]) ids.set(`0x${id}`, { id, executed: 0, failed: 0, reason: null, logs: [] });
  for (const log of receipt.logs) {
    const o = ids.get((log.topics[1] ?? '').toLowerCase());
    if (!o) continue;
    try {
      const ev = decodeEventLog({ abi: walletAbi, data: log.data as Hex, topics: log.topics as [Hex, ...Hex[]] });
      if (ev.eventName === 'TxExecuted') o.executed++;
      else if (ev.eventName === 'TxFailed') {
        o.failed++;
        o.reason ??= `transaction ${ev.args._index} failed: ${describeRevert(ev.args._reason)}`;
      } else continue;
      o.logs.push(log);
    } catch {
      // another contract's event that happens to carry the same topic
    }
  }
  const top = ids.get(`0x${metaId}`)!;
  const inner = bundles.filter((b) => b.bundle_id !== metaId).map((b) => ids.get(`0x${b.bundle_id}`)!);
  if (receipt.status === '0x0') {
    return { status: 'FAILED', reason: 'the transaction reverted on chain', bundles: inner, noWallet: true };
  }
  // A wrapper's own calls succeeding says little: the wallets' inner transactions decide.
  const counted = inner.length ? [...inner, { ...top, executed: 0 }] : [top];
  const failed = counted.reduce((a, o) => a + o.failed, 0);
  const executed = counted.reduce((a, o) => a + o.executed, 0);
  const reason = counted.find((o) => o.reason)?.reason ?? null;
  // No wallet event at all means no wallet ran: that is not a success.
  if (failed === 0 && executed === 0 && counted.every((o) => o.logs.length === 0)) {
    return { status: 'FAILED', reason: 'no wallet executed the bundle (no TxExecuted event)', bundles: inner, noWallet: true };
  }
  return { status: statusOf(executed, failed), reason, bundles: inner };
}

const logWire = (l: RawLog) => ({ address: l.address, topics: l.topics, data: l.data });

/** The Sequence MetaTxnReceipt; `txnReceipt` is the node's receipt as a JSON string ("null" until mined). */
export function receiptWire(row: MetaTxnRow, bundles: BundleRow[]) {
  const mined = row.receipt ? (JSON.parse(row.receipt) as RawReceipt) : null;
  const nested = mined ? outcomeOf(mined, row.id, bundles).bundles : [];
  return {
    id: row.id,
    status: row.status,
    revertReason: row.revert_reason,
    index: 0,
    logs: mined ? mined.logs.map(logWire) : [],
    receipts: nested.map((b, i) => ({
      id: b.id,
      status: mined?.status === '0x0' ? 'FAILED' : statusOf(b.executed, b.failed),
      revertReason: b.reason,
      index: i,
      logs: b.logs.map(logWire),
      receipts: [],
      blockNumber: String(row.block_number ?? 0),
      txnHash: row.txn_hash ?? '',
      txnReceipt: '',
    })),
    blockNumber: String(row.block_number ?? 0),
    txnHash: row.txn_hash ?? '',
    // DROPPED never has a chain receipt; "{}" lets polling clients (which wait for a non-null one) stop.
    txnReceipt: row.receipt ?? (row.status === 'DROPPED' ? '{}' : 'null'),
  };
}
