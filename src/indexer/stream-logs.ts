import type { Hex, Log, TransactionReceipt } from 'viem';
import { BATCH_TOPIC, SINGLE_TOPIC, TRANSFER_TOPIC, decodeTransfer, type RawLog, type TransferEntry } from './decode.ts';
import type { TailBlock } from './stream-tail.ts';

/**
 * SubscribeEvents' EventFilter (indexer.gen.ts), checked: addresses lower-cased, events as topics, token
 * ids as decimal strings. A log passes when it passes every list given (an empty list passes all):
 * - events: its topic0;
 * - contractAddresses: the contract that logged it;
 * - accounts: an indexed address of the log (a transfer's from and to, an operator, any event's
 *   `address indexed` parameter);
 * - tokenIDs: a token transfer (ERC721 Transfer, ERC1155 TransferSingle or TransferBatch) moving one of
 *   them; no other log carries a token id.
 */
export interface StreamLogFilter {
  events: readonly Hex[];
  contracts: readonly string[];
  accounts: readonly string[];
  tokenIds: readonly string[];
}

/** An indexed address topic as an address (12 zero bytes, then it); null for any other topic. */
function topicAddress(t: Hex): string | null {
  return t.length === 66 && /^0x0{24}/i.test(t) ? `0x${t.slice(26).toLowerCase()}` : null;
}

const transfersOf = (l: Log) => decodeTransfer(l as unknown as RawLog);

export function logMatches(l: Log, f: StreamLogFilter): boolean {
  if (f.contracts.length && !f.contracts.includes(l.address.toLowerCase())) return false;
  if (f.events.length && !f.events.includes((l.topics[0] ?? '0x').toLowerCase() as Hex)) return false;
  if (f.accounts.length && !l.topics.slice(1).some((t) => f.accounts.includes(topicAddress(t) ?? ''))) return false;
  if (f.tokenIds.length) {
    const moved = transfersOf(l) ?? [];
    if (!moved.some((e) => e.type !== 'ERC20' && f.tokenIds.includes(e.tokenId))) return false;
  }
  return true;
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
export function streamedLogWire(b: TailBlock, r: TransactionReceipt, l: Log) {
  const parts = transfersOf(l);
  return {
    id: Number(b.number) * 100_000 + (l.logIndex ?? 0),
    uid: `${r.transactionHash}:${l.logIndex}`,
    type: 'BLOCK_ADDED',
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
