import type { Hex, Log, TransactionReceipt } from 'viem';
import { BATCH_TOPIC, SINGLE_TOPIC, TRANSFER_TOPIC, decodeTransfer, type RawLog, type TransferEntry } from './decode.ts';
import type { TailBlock } from './stream-tail.ts';

/**
 * SubscribeEvents' EventFilter (indexer.gen.ts), checked: addresses lower-cased, events as topics, token
 * ids as decimal strings. A log passes when it passes every set given (an empty set passes all):
 * - events: its topic0;
 * - contracts: the contract that logged it;
 * - accounts: an indexed address of the log (a transfer's from and to, an operator, any event's
 *   `address indexed` parameter);
 * - tokenIds: a token transfer (ERC721 Transfer, ERC1155 TransferSingle or TransferBatch) moving one of
 *   them; no other log carries a token id.
 */
export interface StreamLogFilter {
  events: ReadonlySet<string>;
  contracts: ReadonlySet<string>;
  accounts: ReadonlySet<string>;
  tokenIds: ReadonlySet<string>;
}

/** An indexed address topic as an address (12 zero bytes, then it); null for any other topic. */
function topicAddress(t: Hex): string | null {
  return t.length === 66 && /^0x0{24}/i.test(t) ? `0x${t.slice(26).toLowerCase()}` : null;
}

/** What the filters ask of one log, worked out once per block whatever the number of streams. */
interface LogFacts {
  order: number;
  r: TransactionReceipt;
  l: Log;
  address: string;
  topic0: string;
  accounts: string[];
  parts: TransferEntry[] | null;
  /** Its frame's JSON text, made for the first stream it matches and shared by the others. */
  frame?: string;
  /** The same once its block left the chain (`type: BLOCK_REMOVED`). */
  removedFrame?: string;
}

/** A block's logs with their facts, and by contract and by account, so a stream looks only at the logs it may match. */
interface BlockIndex {
  logs: LogFacts[];
  byContract: Map<string, LogFacts[]>;
  byAccount: Map<string, LogFacts[]>;
}

const indexes = new WeakMap<TailBlock, BlockIndex>();

function indexOf(b: TailBlock): BlockIndex {
  let ix = indexes.get(b);
  if (ix) return ix;
  ix = { logs: [], byContract: new Map(), byAccount: new Map() };
  const put = (m: Map<string, LogFacts[]>, k: string, f: LogFacts) => {
    const list = m.get(k);
    if (list) list.push(f);
    else m.set(k, [f]);
  };
  for (const r of b.receipts) {
    for (const l of r.logs) {
      const address = l.address.toLowerCase();
      // A watchlist chain's index holds its watched contracts' logs only.
      if (b.watched && !b.watched.has(address)) continue;
      const accounts = [...new Set(l.topics.slice(1).flatMap((t) => topicAddress(t) ?? []))];
      const f: LogFacts = { order: ix.logs.length, r, l, address, topic0: (l.topics[0] ?? '0x').toLowerCase(), accounts, parts: decodeTransfer(l as unknown as RawLog) };
      ix.logs.push(f);
      put(ix.byContract, address, f);
      for (const a of accounts) put(ix.byAccount, a, f);
    }
  }
  indexes.set(b, ix);
  return ix;
}

function passes(f: LogFacts, q: StreamLogFilter): boolean {
  if (q.contracts.size && !q.contracts.has(f.address)) return false;
  if (q.events.size && !q.events.has(f.topic0)) return false;
  if (q.accounts.size && !f.accounts.some((a) => q.accounts.has(a))) return false;
  if (q.tokenIds.size && !(f.parts ?? []).some((e) => e.type !== 'ERC20' && q.tokenIds.has(e.tokenId))) return false;
  return true;
}

/**
 * The `{"log":…}` frames of the block's logs that pass the filter, in log order. The block's logs are
 * indexed once (by contract and by indexed account) and each frame is serialised once, however many
 * streams it goes to: 2 000 streams on a block of 500 logs cost what their matches cost. `removed`: the
 * block left the chain, and the frames (those sent when it was handed out) say so with Sequence's
 * `type: BLOCK_REMOVED`.
 */
export function logFrames(b: TailBlock, q: StreamLogFilter, removed = false): string[] {
  const ix = indexOf(b);
  let candidates: LogFacts[];
  if (q.contracts.size) candidates = [...q.contracts].flatMap((c) => ix.byContract.get(c) ?? []);
  else if (q.accounts.size) candidates = [...new Set([...q.accounts].flatMap((a) => ix.byAccount.get(a) ?? []))];
  else candidates = ix.logs;
  if (q.contracts.size > 1 || q.accounts.size > 1) candidates.sort((x, y) => x.order - y.order);
  const out: string[] = [];
  for (const f of candidates) {
    if (!passes(f, q)) continue;
    if (removed) out.push((f.removedFrame ??= `{"log":${JSON.stringify(streamedLogWire(b, f.r, f.l, f.parts, 'BLOCK_REMOVED'))}}`));
    else out.push((f.frame ??= `{"log":${JSON.stringify(streamedLogWire(b, f.r, f.l, f.parts, 'BLOCK_ADDED'))}}`));
  }
  return out;
}

const DECODED: Record<string, { sig: string; names: Record<string, string[]> }> = {
  [TRANSFER_TOPIC]: { sig: 'Transfer(address,address,uint256)', names: { ERC20: ['from', 'to', 'value'], ERC721: ['from', 'to', 'tokenId'] } },
  [SINGLE_TOPIC]: { sig: 'TransferSingle(address,address,address,uint256,uint256)', names: { ERC1155: ['operator', 'from', 'to', 'id', 'value'] } },
  [BATCH_TOPIC]: { sig: 'TransferBatch(address,address,address,uint256[],uint256[])', names: { ERC1155: ['operator', 'from', 'to', 'ids', 'values'] } },
};

/** Sequence's EventDecoded of a token transfer (values as decimal strings, a batch's as JSON arrays); other events have no ABI here. */
function decoded(l: Log, parts: TransferEntry[]) {
  const topic = (l.topics[0] ?? '').toLowerCase();
  const d = DECODED[topic]!;
  const first = parts[0]!;
  const operator = l.topics[1] ? (topicAddress(l.topics[1]) ?? '') : '';
  const values =
    topic === TRANSFER_TOPIC
      ? [first.from, first.to, first.type === 'ERC20' ? first.amount : first.tokenId]
      : topic === SINGLE_TOPIC
        ? [operator, first.from, first.to, first.tokenId, first.amount]
        : [operator, first.from, first.to, JSON.stringify(parts.map((p) => p.tokenId)), JSON.stringify(parts.map((p) => p.amount))];
  return { topicHash: topic, eventSig: d.sig, types: d.sig.slice(d.sig.indexOf('(') + 1, -1).split(','), names: d.names[first.type] ?? [], values };
}

/**
 * Sequence's EventLog of one log of a block the indexer passed. `id` is the log's place on the chain
 * (block number × 100 000 + log index: unique and increasing, as a client may use it). `txnInfo` (optional)
 * is left out: a receipt has no `value`, and reading every transaction of a block for it is not worth it.
 */
function streamedLogWire(b: TailBlock, r: TransactionReceipt, l: Log, parts: TransferEntry[] | null, type: 'BLOCK_ADDED' | 'BLOCK_REMOVED') {
  return {
    id: Number(b.number) * 100_000 + (l.logIndex ?? 0),
    uid: `${r.transactionHash}:${l.logIndex}`,
    type,
    blockNumber: Number(b.number),
    blockHash: b.hash,
    parentBlockHash: b.parentHash,
    contractAddress: l.address.toLowerCase(),
    contractType: parts?.[0]?.type ?? 'UNKNOWN',
    txnHash: r.transactionHash,
    txnIndex: r.transactionIndex,
    txnLogIndex: l.logIndex,
    logDataType: parts ? 'TOKEN_TRANSFER' : 'EVENT',
    ts: new Date(b.timestamp * 1000).toISOString(),
    rawLog: { address: l.address.toLowerCase(), topics: l.topics, data: l.data },
    ...(parts ? { event: decoded(l, parts) } : {}),
  };
}
