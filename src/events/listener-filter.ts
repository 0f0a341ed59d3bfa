import { toEventSelector } from 'viem';
import { eventSpecOf, wellKnownSpecOf, type EventDecoded, type EventSpec } from './event-decode.ts';

/**
 * Sequence's EventFilter as a listener keeps it: `events` as given, `topics` the topics they name,
 * addresses lower-cased, token ids decimal. Fields AND together, values within a field OR.
 */
export interface ListenerFilter {
  events: string[];
  topics: string[];
  contractAddresses: string[];
  accounts: string[];
  tokenIDs: string[];
}

/** One token moved by an indexed log, as the indexer records it (src/indexer's TimedEntry, restated: domains meet in the wiring). */
export interface ListenedTransfer {
  blockNumber: bigint;
  blockHash: string;
  txHash: string;
  txIndex: number;
  logIndex: number;
  part: number;
  contract: string;
  type: string;
  from: string;
  to: string;
  tokenId: string;
  amount: string;
  /** Block time, seconds since the epoch. */
  ts: number;
  topics: readonly string[];
  data: string;
}

/** Any log of a contract, as the indexer read it for the listeners that want it (src/indexer's TimedLog, restated). */
export interface ListenedLog {
  blockNumber: bigint;
  blockHash: string;
  txHash: string;
  txIndex: number;
  logIndex: number;
  contract: string;
  /** ERC20, ERC721, ERC1155 when the indexer has seen the contract's transfers; UNKNOWN otherwise. */
  contractType: string;
  /** Block time, seconds since the epoch. */
  ts: number;
  topics: readonly string[];
  data: string;
}

/** The transfer events the indexer decodes into balances: their logs reach listeners as TOKEN_TRANSFER. */
export const TRANSFER_EVENTS = {
  Transfer: 'Transfer(address,address,uint256)',
  TransferSingle: 'TransferSingle(address,address,address,uint256,uint256)',
  TransferBatch: 'TransferBatch(address,address,address,uint256[],uint256[])',
} as const;

const BY_TOPIC = new Map(Object.entries(TRANSFER_EVENTS).map(([name, sig]) => [toEventSelector(sig), { name, sig }]));

/** The canonical signature of a transfer topic (undefined for any other topic). */
export const transferEventOf = (topic: string) => BY_TOPIC.get(topic.toLowerCase() as `0x${string}`);

/**
 * The topic an `events` entry names — a name (`Transfer`, `Approval`), a signature with or without
 * `indexed` and parameter names (`Scored(address indexed player, uint256 points)`), or a 32-byte topic —
 * or why it cannot be honoured.
 */
export function eventTopicOf(event: string): { topic: string } | { problem: string } {
  const got = eventSpecOf(event);
  return 'problem' in got ? got : { topic: got.topic };
}

/** Whether one transfer log (all its parts: a TransferBatch has one per id) passes the filter. */
export function filterMatches(f: ListenerFilter, parts: readonly ListenedTransfer[]): boolean {
  const first = parts[0];
  if (!first) return false;
  if (f.contractAddresses.length && !f.contractAddresses.includes(first.contract)) return false;
  if (f.topics.length && !f.topics.includes((first.topics[0] ?? '').toLowerCase())) return false;
  if (f.accounts.length && !parts.some((p) => f.accounts.includes(p.from) || f.accounts.includes(p.to))) return false;
  // An ERC20 transfer moves an amount, not a token id: a token id filter never passes one.
  if (f.tokenIDs.length && (first.type === 'ERC20' || !parts.some((p) => f.tokenIDs.includes(p.tokenId)))) return false;
  return true;
}

/** The spec a listener decodes a log with: the first of its `events` with this topic and a signature, else a well-known event's. */
export function specFor(f: ListenerFilter, topic: string): EventSpec | undefined {
  for (const e of f.events) {
    const s = eventSpecOf(e);
    if (!('problem' in s) && s.topic === topic && s.abi) return s;
  }
  return wellKnownSpecOf(topic);
}

/** An indexed topic holding an address (12 zero bytes first), as an address. */
const topicAddress = (t: string) => (/^0x0{24}[0-9a-fA-F]{40}$/.test(t) ? `0x${t.slice(26).toLowerCase()}` : undefined);
const TOKEN_ID = /^_?(token_?)?ids?$/i;

/**
 * Whether a log that is not a token transfer passes the filter, decoded as the listener decodes it.
 * A listener hears such logs only by naming their contract or their event: one naming accounts alone
 * hears token transfers only (a listener on every event of every contract would read every log of the
 * chain). `accounts` match any address argument (the address topics when the log is not decoded);
 * `tokenIDs` match an argument named tokenId, id or ids.
 */
export function logMatches(f: ListenerFilter, log: ListenedLog, decoded: EventDecoded | undefined): boolean {
  if (f.contractAddresses.length && !f.contractAddresses.includes(log.contract)) return false;
  const topic = (log.topics[0] ?? '').toLowerCase();
  if (f.topics.length ? !f.topics.includes(topic) : !f.contractAddresses.length) return false;
  if (f.accounts.length) {
    const addresses = decoded
      ? decoded.values.flatMap((v, i) => (decoded.types[i] === 'address' ? [v] : decoded.types[i] === 'address[]' ? (JSON.parse(v) as string[]) : []))
      : log.topics.slice(1).map(topicAddress);
    if (!addresses.some((a) => a && f.accounts.includes(a))) return false;
  }
  if (f.tokenIDs.length) {
    if (!decoded) return false;
    const ids = decoded.values.flatMap((v, i) =>
      TOKEN_ID.test(decoded.names[i] ?? '') ? (decoded.types[i] === 'uint256' ? [v] : decoded.types[i] === 'uint256[]' ? (JSON.parse(v) as string[]) : []) : [],
    );
    if (!ids.some((id) => f.tokenIDs.includes(id))) return false;
  }
  return true;
}
