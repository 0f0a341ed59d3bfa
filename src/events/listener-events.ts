import type { Queryable } from '../store/db.ts';
import { decodeWith, type EventDecoded } from './event-decode.ts';
import { filterMatches, logMatches, specFor, transferEventOf, type ListenedLog, type ListenedTransfer } from './listener-filter.ts';
import type { ActiveListener, ListenerStore } from './listener-store.ts';
import { appendDirectedEvents, LISTENER_EVENT, listenerLogsOf, type DirectedEvent, type EventBell } from './outbox.ts';

/** Blocks a reorg took away (src/indexer's RemovedBlock, restated): the logs told of them are taken back. */
export interface RemovedBlock {
  blockNumber: number;
  blockHash: string;
}

export interface ListenerLimits {
  /** Deliveries one project is sent for one block (webhooks.maxListenerDeliveriesPerBlock). */
  maxPerBlock: number;
  /** Told how many deliveries were dropped for the cap (metrics). */
  dropped?: (chainId: number, n: number) => void;
}

/** One log told to some listeners: written as one outbox event directed at them. */
interface Told {
  blockNumber: bigint;
  logIndex: number;
  subject: string;
  data: Record<string, unknown>;
  listeners: ActiveListener[];
}

/**
 * The indexer's hooks for webhook listeners, on the transactions that change the index:
 *
 * - onFresh: the transfers a step recorded for the first time, grouped into their logs (a TransferBatch
 *   is one log of several ids), and the step's other logs the listeners asked for (logWants), each
 *   matched against the chain's active listeners; a log some match becomes one `indexer.event_log`
 *   event (BLOCK_ADDED) delivered to those only. A listener decodes a log with the signature it named,
 *   so listeners naming one event differently are told in separate events. A project is sent at most
 *   `maxPerBlock` deliveries per block (all its listeners together, in log order); the rest are counted
 *   on each listener (droppedLogs) and told to `dropped`. A chain nobody listens on costs one indexed
 *   read a step.
 * - logWants: what the indexer should read besides transfers: the logs of the contracts listeners name,
 *   and the logs of the events listeners name on any contract (watched ones on a watchlist chain).
 * - onRemoved: the blocks a reorg took away; each listener that was told of a log of one (and is still
 *   active) is sent the same EventLog as BLOCK_REMOVED, after it (same subject: in order).
 */
export function listenerHooks(bell: EventBell, listeners: Pick<ListenerStore, 'active' | 'recordDropped'>, limits: ListenerLimits) {
  const onFresh = async (q: Queryable, chainId: number, fresh: readonly ListenedTransfer[], others: readonly ListenedLog[] = []) => {
    const active = await listeners.active(q, chainId);
    if (active.length === 0) return;
    const find = candidatesOf(active);
    const told: Told[] = [];
    for (const parts of logsOf(fresh)) {
      const first = parts[0]!;
      // Blocks at or below a listener's start were mined before it was added (a backfill, a catch-up).
      const hear = find(
        first.contract,
        parts.flatMap((p) => [p.from, p.to]),
      ).filter((l) => first.blockNumber > l.fromBlock && filterMatches(l.filter, parts));
      if (hear.length === 0) continue;
      // Deliveries of one contract's logs to a listener go out in order (a failing one holds the later ones).
      told.push({ blockNumber: first.blockNumber, logIndex: first.logIndex, subject: `logs:${chainId}:${first.contract}`, data: eventLog(chainId, parts, 'BLOCK_ADDED'), listeners: hear });
    }
    for (const log of others) {
      const topic = (log.topics[0] ?? '').toLowerCase();
      // Grouped by how each listener decodes the log.
      const bySig = new Map<string, { decoded: EventDecoded | undefined; listeners: ActiveListener[] }>();
      for (const l of find(log.contract, null)) {
        if (log.blockNumber <= l.fromBlock) continue;
        const spec = specFor(l.filter, topic);
        const decoded = spec && decodeWith(spec, log);
        if (!logMatches(l.filter, log, decoded)) continue;
        const key = decoded ? JSON.stringify([decoded.eventSig, decoded.names]) : '';
        const g = bySig.get(key) ?? { decoded, listeners: [] };
        g.listeners.push(l);
        bySig.set(key, g);
      }
      for (const g of bySig.values()) {
        told.push({
          blockNumber: log.blockNumber,
          logIndex: log.logIndex,
          subject: `logs:${chainId}:${log.contract}`,
          data: anyEventLog(chainId, log, g.decoded, 'BLOCK_ADDED'),
          listeners: g.listeners,
        });
      }
    }
    if (told.length === 0) return;
    told.sort((a, b) => (a.blockNumber === b.blockNumber ? a.logIndex - b.logIndex : a.blockNumber < b.blockNumber ? -1 : 1));
    // The cap: deliveries per (project, block), in log order.
    const sent = new Map<string, number>();
    const dropped = new Map<number, { logs: number; lastBlock: bigint }>();
    const events: DirectedEvent[] = [];
    for (const t of told) {
      const ids: number[] = [];
      for (const l of t.listeners) {
        const k = `${l.projectId}:${t.blockNumber}`;
        const n = sent.get(k) ?? 0;
        if (n < limits.maxPerBlock) {
          sent.set(k, n + 1);
          ids.push(l.id);
        } else {
          const d = dropped.get(l.id) ?? { logs: 0, lastBlock: t.blockNumber };
          dropped.set(l.id, { logs: d.logs + 1, lastBlock: t.blockNumber > d.lastBlock ? t.blockNumber : d.lastBlock });
        }
      }
      if (ids.length) events.push({ type: LISTENER_EVENT, chainId, subject: t.subject, data: t.data, webhookIds: ids.sort((a, b) => a - b) });
    }
    if (dropped.size) {
      await listeners.recordDropped(
        q,
        [...dropped].map(([id, d]) => ({ id, logs: d.logs, lastBlock: d.lastBlock })),
      );
      limits.dropped?.(
        chainId,
        [...dropped.values()].reduce((n, d) => n + d.logs, 0),
      );
    }
    if (events.length === 0) return;
    await appendDirectedEvents(q, events);
    bell.ring();
  };
  /** The reads besides transfers the chain's listeners need: null when none. */
  const logWants = async (q: Queryable, chainId: number): Promise<LogWants | null> => {
    const active = await listeners.active(q, chainId);
    const contracts = new Set<string>();
    const topics = new Set<string>();
    for (const l of active) {
      const other = l.filter.topics.filter((t) => !transferEventOf(t));
      // A listener on transfers alone needs nothing more than the transfers the indexer reads anyway.
      if (l.filter.topics.length && !other.length) continue;
      if (l.filter.contractAddresses.length) for (const c of l.filter.contractAddresses) contracts.add(c);
      else for (const t of other) topics.add(t);
    }
    return contracts.size || topics.size ? { contracts: [...contracts].sort(), topics: [...topics].sort() } : null;
  };
  const onRemoved = async (q: Queryable, chainId: number, removed: readonly RemovedBlock[]) => {
    if (removed.length === 0) return;
    const active = new Set((await listeners.active(q, chainId)).map((l) => l.id));
    if (active.size === 0) return;
    const gone = new Set(removed.map((r) => `${r.blockNumber}:${r.blockHash}`));
    const told = await listenerLogsOf(q, chainId, [...new Set(removed.map((r) => r.blockNumber))]);
    // One removal per log, decoding and listener, even if the log was told twice (a fork that came back).
    const events = new Map<string, DirectedEvent & { webhookIds: number[] }>();
    for (const t of told) {
      if (!gone.has(`${t.data.blockNumber}:${t.data.blockHash}`)) continue;
      const key = `${t.data.blockHash}:${t.data.txnLogIndex}:${JSON.stringify(t.data.event ?? null)}`;
      const e = events.get(key) ?? { type: LISTENER_EVENT, chainId, subject: t.subject, data: { ...t.data, type: 'BLOCK_REMOVED' }, webhookIds: [] };
      e.webhookIds = [...new Set([...e.webhookIds, ...t.webhookIds.filter((w) => active.has(w))])].sort((a, b) => a - b);
      events.set(key, e);
    }
    if ((await appendDirectedEvents(q, [...events.values()])).length) bell.ring();
  };
  return { onFresh, onRemoved, logWants };
}

/** What the indexer reads for listeners besides transfers: every log of `contracts`, and logs of `topics` on any contract. */
export interface LogWants {
  contracts: string[];
  topics: string[];
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
 * The listeners a log may match, found by its contract and its accounts (`accounts` null: by contract,
 * and the listeners that name no contract), so a step of many logs is not checked against every
 * listener of the chain.
 */
function candidatesOf(listeners: ActiveListener[]) {
  const byContract = new Map<string, ActiveListener[]>();
  const byAccount = new Map<string, ActiveListener[]>();
  const always: ActiveListener[] = [];
  const anyContract: ActiveListener[] = [];
  const put = (m: Map<string, ActiveListener[]>, k: string, l: ActiveListener) => m.set(k, [...(m.get(k) ?? []), l]);
  for (const l of listeners) {
    for (const c of l.filter.contractAddresses) put(byContract, c, l);
    if (!l.filter.contractAddresses.length) {
      anyContract.push(l);
      for (const a of l.filter.accounts) put(byAccount, a, l);
      if (!l.filter.accounts.length) always.push(l);
    }
  }
  return (contract: string, accounts: string[] | null): ActiveListener[] => {
    const found = new Set<ActiveListener>(accounts ? always : anyContract);
    for (const l of byContract.get(contract) ?? []) found.add(l);
    for (const a of accounts ?? []) for (const l of byAccount.get(a) ?? []) found.add(l);
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

/** Sequence's EventLog of any other log (logDataType EVENT); `event` only when the listener's signature decodes it. */
export function anyEventLog(chainId: number, log: ListenedLog, decoded: EventDecoded | undefined, type: 'BLOCK_ADDED' | 'BLOCK_REMOVED') {
  return {
    uid: `${log.txHash}:${log.logIndex}`,
    type,
    blockNumber: Number(log.blockNumber),
    blockHash: log.blockHash,
    parentBlockHash: '',
    contractAddress: log.contract,
    contractType: log.contractType,
    txnHash: log.txHash,
    txnIndex: log.txIndex,
    txnLogIndex: log.logIndex,
    logDataType: 'EVENT',
    ts: new Date(log.ts * 1000).toISOString(),
    rawLog: { address: log.contract, topics: [...log.topics], data: log.data },
    ...(decoded ? { event: decoded } : {}),
    chainId,
  };
}
