import type { Queryable } from '../store/db.ts';
import { filterMatches, transferEventOf, type ListenedTransfer } from './listener-filter.ts';
import type { ActiveListener, ListenerStore } from './listener-store.ts';
import { appendDirectedEvents, LISTENER_EVENT, listenerLogsOf, type DirectedEvent, type EventBell } from './outbox.ts';

/** A log a reorg took away (src/indexer's RemovedLog, restated). */
export interface RemovedLog {
  blockNumber: number;
  blockHash: string;
  logIndex: number;
}

/**
 * The indexer's hooks for webhook listeners, on the transactions that change the index:
 *
 * - onFresh: the transfers a step recorded for the first time, grouped into their logs (a TransferBatch
 *   is one log of several ids), each matched against the chain's active listeners; a log some match
 *   becomes one `indexer.event_log` event (BLOCK_ADDED) delivered to those only. A chain nobody
 *   listens on costs one indexed read a step.
 * - onRemoved: the logs a reorg took away; each listener that was told of one (and is still active) is
 *   sent the same EventLog as BLOCK_REMOVED, after it (same subject: in order).
 */
export function listenerHooks(bell: EventBell, listeners: Pick<ListenerStore, 'active'>) {
  const onFresh = async (q: Queryable, chainId: number, fresh: readonly ListenedTransfer[]) => {
    const told = await listeners.active(q, chainId);
    if (told.length === 0) return;
    const find = candidatesOf(told);
    const events: DirectedEvent[] = [];
    for (const parts of logsOf(fresh)) {
      const first = parts[0]!;
      // Blocks at or below a listener's start were mined before it was added (a backfill, a catch-up).
      const ids = find(parts)
        .filter((l) => first.blockNumber > l.fromBlock && filterMatches(l.filter, parts))
        .map((l) => l.id)
        .sort((a, b) => a - b);
      if (ids.length === 0) continue;
      // Deliveries of one contract's logs to a listener go out in order (a failing one holds the later ones).
      events.push({ type: LISTENER_EVENT, chainId, subject: `logs:${chainId}:${first.contract}`, data: eventLog(chainId, parts, 'BLOCK_ADDED'), webhookIds: ids });
    }
    if (events.length === 0) return;
    await appendDirectedEvents(q, events);
    bell.ring();
  };
  const onRemoved = async (q: Queryable, chainId: number, removed: readonly RemovedLog[]) => {
    const active = new Set((await listeners.active(q, chainId)).map((l) => l.id));
    if (active.size === 0) return;
    const gone = new Set(removed.map((r) => `${r.blockHash}:${r.logIndex}`));
    const told = await listenerLogsOf(q, chainId, [...new Set(removed.map((r) => r.blockNumber))]);
    // One removal per log and listener, even if the log was told twice (a fork that came back).
    const events = new Map<string, DirectedEvent & { webhookIds: number[] }>();
    for (const t of told) {
      const key = `${t.data.blockHash}:${t.data.txnLogIndex}`;
      if (!gone.has(key)) continue;
      const e = events.get(key) ?? { type: LISTENER_EVENT, chainId, subject: t.subject, data: { ...t.data, type: 'BLOCK_REMOVED' }, webhookIds: [] };
      e.webhookIds = [...new Set([...e.webhookIds, ...t.webhookIds.filter((w) => active.has(w))])].sort((a, b) => a - b);
      events.set(key, e);
    }
    if ((await appendDirectedEvents(q, [...events.values()])).length) bell.ring();
  };
  return { onFresh, onRemoved };
}

/** The transfers grouped by log, in block and log order, each log's parts in order. */
function logsOf(fresh: readonly ListenedTransfer[]): ListenedTransfer[][] {
  const logs = new Map<string, ListenedTransfer[]>();
  for (const t of fresh) {
    const k = `${t.blockNumber}:${t.logIndex}`;
    const parts = logs.get(k);
    if (parts) parts.push(t);
    else logs.set(k, [t]);
  }
  return [...logs.values()]
    .map((parts) => parts.sort((a, b) => a.part - b.part))
    .sort((a, b) => (a[0]!.blockNumber === b[0]!.blockNumber ? a[0]!.logIndex - b[0]!.logIndex : a[0]!.blockNumber < b[0]!.blockNumber ? -1 : 1));
}

/**
 * The listeners a log may match, found by its contract and its accounts (every listener names contracts
 * or accounts), so a step of many transfers is not checked against every listener of the chain.
 */
function candidatesOf(listeners: ActiveListener[]) {
  const byContract = new Map<string, ActiveListener[]>();
  const byAccount = new Map<string, ActiveListener[]>();
  const always: ActiveListener[] = [];
  const put = (m: Map<string, ActiveListener[]>, k: string, l: ActiveListener) => m.set(k, [...(m.get(k) ?? []), l]);
  for (const l of listeners) {
    for (const c of l.filter.contractAddresses) put(byContract, c, l);
    if (!l.filter.contractAddresses.length) for (const a of l.filter.accounts) put(byAccount, a, l);
    if (!l.filter.contractAddresses.length && !l.filter.accounts.length) always.push(l);
  }
  return (parts: ListenedTransfer[]): ActiveListener[] => {
    const found = new Set<ActiveListener>(always);
    for (const l of byContract.get(parts[0]!.contract) ?? []) found.add(l);
    for (const p of parts) for (const a of [p.from, p.to]) for (const l of byAccount.get(a) ?? []) found.add(l);
    return [...found];
  };
}

const NAMES: Record<string, Record<string, string[]>> = {
  Transfer: { ERC20: ['from', 'to', 'value'], ERC721: ['from', 'to', 'tokenId'] },
  TransferSingle: { ERC1155: ['operator', 'from', 'to', 'id', 'value'] },
  TransferBatch: { ERC1155: ['operator', 'from', 'to', 'ids', 'values'] },
};

/** An indexed address topic as an address. */
const topicAddress = (t: string | undefined) => (t ? `0x${t.slice(26).toLowerCase()}` : '');

/** Sequence's EventDecoded of a transfer log: values as decimal strings, a batch's ids and values as JSON arrays of them. */
function decoded(parts: ListenedTransfer[]) {
  const first = parts[0]!;
  const topic = (first.topics[0] ?? '').toLowerCase();
  const ev = transferEventOf(topic)!;
  const names = NAMES[ev.name]![first.type] ?? [];
  const types = ev.sig.slice(ev.sig.indexOf('(') + 1, -1).split(',');
  const values =
    ev.name === 'Transfer'
      ? [first.from, first.to, first.type === 'ERC20' ? first.amount : first.tokenId]
      : ev.name === 'TransferSingle'
        ? [topicAddress(first.topics[1]), first.from, first.to, first.tokenId, first.amount]
        : [topicAddress(first.topics[1]), first.from, first.to, JSON.stringify(parts.map((p) => p.tokenId)), JSON.stringify(parts.map((p) => p.amount))];
  return { topicHash: topic, eventSig: ev.sig, types, names, values };
}

/**
 * Sequence's EventLog (indexer.gen.ts) of one transfer log, as a listener is sent it. `id` is added
 * at delivery (the outbox event's); `chainId` is metarelay's own (one receiver may listen on several
 * chains). Not known here, so left out or empty: `txnInfo`, `parentBlockHash`.
 */
export function eventLog(chainId: number, parts: ListenedTransfer[], type: 'BLOCK_ADDED' | 'BLOCK_REMOVED') {
  const first = parts[0]!;
  return {
    uid: `${first.txHash}:${first.logIndex}`,
    type,
    blockNumber: Number(first.blockNumber),
    blockHash: first.blockHash,
    parentBlockHash: '',
    contractAddress: first.contract,
    contractType: first.type,
    txnHash: first.txHash,
    txnIndex: first.txIndex,
    txnLogIndex: first.logIndex,
    logDataType: 'TOKEN_TRANSFER',
    ts: new Date(first.ts * 1000).toISOString(),
    rawLog: { address: first.contract, topics: [...first.topics], data: first.data },
    event: decoded(parts),
    chainId,
  };
}
