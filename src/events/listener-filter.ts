import { toEventSelector } from 'viem';

/**
 * Sequence's EventFilter as a listener keeps it: `events` as given, `topics` the transfer topics they
 * name, addresses lower-cased, token ids decimal. Fields AND together, values within a field OR.
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

/** The events the indexer reads, by name: the only ones a listener can be told of. */
export const TRANSFER_EVENTS = {
  Transfer: 'Transfer(address,address,uint256)',
  TransferSingle: 'TransferSingle(address,address,address,uint256,uint256)',
  TransferBatch: 'TransferBatch(address,address,address,uint256[],uint256[])',
} as const;

const BY_TOPIC = new Map(Object.entries(TRANSFER_EVENTS).map(([name, sig]) => [toEventSelector(sig), { name, sig }]));

/** The canonical signature of a transfer topic (undefined for any other topic). */
export const transferEventOf = (topic: string) => BY_TOPIC.get(topic.toLowerCase() as `0x${string}`);

/**
 * The topic an `events` entry names — a name (`Transfer`), a signature with or without `indexed` and
 * parameter names (`Transfer(address indexed from, address indexed to, uint256 value)`), or a 32-byte
 * topic — or why it cannot be honoured.
 */
export function eventTopicOf(event: string): { topic: string } | { problem: string } {
  const e = event.trim();
  const names = Object.keys(TRANSFER_EVENTS).join(', ');
  let topic: string | undefined;
  if (/^0x[0-9a-fA-F]{64}$/.test(e)) topic = e.toLowerCase();
  // Own keys only: `toString` is in every object.
  else if (Object.hasOwn(TRANSFER_EVENTS, e)) topic = toEventSelector(TRANSFER_EVENTS[e as keyof typeof TRANSFER_EVENTS]);
  else if (/^(event\s+)?[A-Za-z_$][\w$]*\s*\(.*\)$/s.test(e)) {
    try {
      topic = toEventSelector(e.replace(/^event\s+/, ''));
    } catch {
      topic = undefined;
    }
  }
  if (!topic) return { problem: `"${e.slice(0, 100)}" is not an event name, signature or 32-byte topic` };
  if (!BY_TOPIC.has(topic as `0x${string}`)) {
    return { problem: `"${e.slice(0, 100)}" is not an event the indexer reads: it reads token transfers only (${names}), so a listener on it would never be told anything` };
  }
  return { topic };
}

/** Whether one log (all its parts: a TransferBatch has one per id) passes the filter. */
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
