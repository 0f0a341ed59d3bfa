import { decodeEventLog, parseAbiItem, toEventSelector, toEventSignature, type AbiEvent, type AbiParameter, type Hex } from 'viem';

/**
 * The events a webhook listener may name (Sequence's EventFilter.events), and how a log of one is
 * decoded into Sequence's EventDecoded. An entry is a signature, with or without `indexed` and argument
 * names (`Scored(address indexed player, uint256 points)`, `Approval(address indexed,address indexed,uint256)`),
 * a well-known event's bare name, or a 32-byte topic hash (Sequence's `topicHashes`: heard, not decoded).
 */

/** Sequence's EventDecoded: values as strings (numbers decimal, addresses lower-case, arrays and tuples as JSON). */
export interface EventDecoded {
  topicHash: string;
  eventSig: string;
  types: string[];
  names: string[];
  values: string[];
}

/** Bare names a listener may give for the events every token contract emits. */
const WELL_KNOWN: Record<string, string> = {
  Transfer: 'Transfer(address indexed from, address indexed to, uint256 value)',
  TransferSingle: 'TransferSingle(address indexed operator, address indexed from, address indexed to, uint256 id, uint256 value)',
  TransferBatch: 'TransferBatch(address indexed operator, address indexed from, address indexed to, uint256[] ids, uint256[] values)',
  Approval: 'Approval(address indexed owner, address indexed spender, uint256 value)',
  ApprovalForAll: 'ApprovalForAll(address indexed owner, address indexed operator, bool approved)',
  URI: 'URI(string value, uint256 indexed id)',
};

const WELL_KNOWN_BY_TOPIC = new Map<string, EventSpec>();

/** A well-known event's spec by its topic (a listener naming only a contract hears its Approvals decoded). */
export function wellKnownSpecOf(topic: string): EventSpec | undefined {
  if (WELL_KNOWN_BY_TOPIC.size === 0) {
    for (const name of Object.keys(WELL_KNOWN)) {
      const s = eventSpecOf(name);
      if (!('problem' in s)) WELL_KNOWN_BY_TOPIC.set(s.topic, s);
    }
  }
  return WELL_KNOWN_BY_TOPIC.get(topic.toLowerCase());
}

/** What an `events` entry names: its topic, and (unless a bare topic) the event to decode its logs with. */
export interface EventSpec {
  topic: string;
  abi?: AbiEvent;
  /** The entry marked no argument `indexed`: which are is worked out from each log's topic count. */
  guessIndexed: boolean;
}

const parsed = new Map<string, EventSpec | { problem: string }>();

/** The spec an `events` entry names, or why it names none. Cached: the hook parses every listener's entries each step. */
export function eventSpecOf(entry: string): EventSpec | { problem: string } {
  const e = entry.trim();
  let got = parsed.get(e);
  if (!got) {
    got = parse(e);
    if (parsed.size > 10_000) parsed.clear();
    parsed.set(e, got);
  }
  return got;
}

function parse(e: string): EventSpec | { problem: string } {
  if (/^0x[0-9a-fA-F]{64}$/.test(e)) return { topic: e.toLowerCase(), guessIndexed: false };
  // Own keys only: `toString` is in every object.
  const sig = Object.hasOwn(WELL_KNOWN, e) ? WELL_KNOWN[e]! : e.replace(/^event\s+/, '');
  if (!/^[A-Za-z_$][\w$]*\s*\(.*\)$/s.test(sig)) {
    return { problem: `"${e.slice(0, 100)}" is not an event signature (Name(type indexed name, ...)), a well-known event's name (${Object.keys(WELL_KNOWN).join(', ')}) or a 32-byte topic hash` };
  }
  let abi: AbiEvent;
  try {
    abi = parseAbiItem(`event ${sig}`) as AbiEvent;
  } catch (err) {
    return { problem: `"${e.slice(0, 100)}" is not an event signature: ${String((err as { shortMessage?: string }).shortMessage ?? err).split('\n')[0]}` };
  }
  // Sequence's shorthand: unnamed arguments are arg1, arg2...
  abi = { ...abi, inputs: abi.inputs.map((p, i) => ({ ...p, name: p.name || `arg${i + 1}` })) };
  return { topic: toEventSelector(abi).toLowerCase(), abi, guessIndexed: !abi.inputs.some((p) => (p as { indexed?: boolean }).indexed) && !Object.hasOwn(WELL_KNOWN, e) };
}

const jsonable = (v: unknown): unknown =>
  typeof v === 'bigint' ? v.toString() : Array.isArray(v) ? v.map(jsonable) : v && typeof v === 'object' ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, jsonable(x)])) : v;

/** One decoded argument as Sequence sends it: a string. */
function show(p: AbiParameter, v: unknown): string {
  if (typeof v === 'string') return p.type === 'address' ? v.toLowerCase() : v;
  if (typeof v === 'bigint' || typeof v === 'boolean' || typeof v === 'number') return String(v);
  return JSON.stringify(jsonable(v), (_k, x) => (typeof x === 'string' && /^0x[0-9a-fA-F]{40}$/.test(x) ? x.toLowerCase() : x));
}

/** The event with its first `n` arguments indexed (a signature given without `indexed`: the usual layout). */
const indexedFirst = (abi: AbiEvent, n: number): AbiEvent => ({ ...abi, inputs: abi.inputs.map((p, i) => ({ ...p, indexed: i < n })) });

/**
 * A log decoded with the spec's event, or undefined when it cannot be (a bare topic; a log whose topics
 * and data do not fit the signature). The well-known ERC20 and ERC721 events share a topic and differ
 * in which arguments are indexed: the log's topic count decides, as it does for an unmarked signature.
 */
export function decodeWith(spec: EventSpec, log: { topics: readonly string[]; data: string }): EventDecoded | undefined {
  if (!spec.abi) return undefined;
  const extra = log.topics.length - 1;
  const marked = spec.abi.inputs.filter((p) => (p as { indexed?: boolean }).indexed).length;
  const tries = [spec.abi];
  if (spec.guessIndexed || marked !== extra) tries.push(indexedFirst(spec.abi, extra));
  for (const abi of tries) {
    try {
      const d = decodeEventLog({ abi: [abi], topics: log.topics as [Hex, ...Hex[]], data: log.data as Hex, strict: true });
      const args = d.args as unknown as Record<string, unknown>;
      return {
        topicHash: spec.topic,
        eventSig: toEventSignature(abi),
        types: abi.inputs.map((p) => p.type),
        names: abi.inputs.map((p) => p.name!),
        values: abi.inputs.map((p) => show(p, args[p.name!])),
      };
    } catch {
      // Next layout, or undecodable.
    }
  }
  return undefined;
}
