import { MetarelayError } from '../util/error.ts';
import type { Hex } from 'viem';
import { isRateLimited, saysBehind } from './node-errors.ts';
import { askAgainIfBehind } from '../util/ask-again.ts';
import type { ChainClient } from './client.ts';

/** A log as eth_getLogs (or a receipt) gives it, with numbers decoded. */
export interface ChainLog {
  address: string;
  topics: readonly Hex[];
  data: Hex;
  blockNumber: bigint;
  blockHash: Hex;
  transactionHash: Hex;
  transactionIndex: number;
  logIndex: number;
  /** Sent by some nodes (anvil, geth ≥ 1.14); otherwise the reader's caller reads the block. */
  blockTimestamp?: bigint;
}

interface WireLog {
  address: string;
  topics: Hex[];
  data: Hex;
  blockNumber: Hex;
  blockHash: Hex;
  transactionHash: Hex;
  transactionIndex: Hex;
  logIndex: Hex;
  blockTimestamp?: Hex | null;
  removed?: boolean;
}

/** What is read: logs whose topic0 is one of `topics` (none: any), of `address` (undefined: every contract). */
export interface LogFilter {
  topics: readonly Hex[];
  address?: readonly string[];
}

/** One block whose logs could not be read, however the read was split: the caller counts and flags it. */
export class UnreadableBlockError extends MetarelayError {
  override readonly name = 'UnreadableBlockError';
  constructor(
    readonly block: bigint,
    cause: unknown,
  ) {
    // viem keeps what the node said in `details`; its message is a generic title.
    const said = (cause as { details?: unknown })?.details;
    super(`block ${block}: its logs could not be read (${String(typeof said === 'string' && said ? said : ((cause as Error)?.message ?? cause)).split('\n')[0]})`, {
      cause,
      // Passed over, and read again later (logReads.retrySec).
      kind: 'unreadable-block',
      retryable: true,
      docsPath: 'indexer.md#blocks-too-big-to-read',
    });
  }
}

const hex = (n: bigint) => `0x${n.toString(16)}`;
/** Receipts asked for at once when a block is read transaction by transaction (the transport batches them). */
const RECEIPTS_AT_ONCE = 16;

/**
 * eth_getLogs over block ranges the node accepts. The span starts at `maxSpan`; a refused request
 * (too many results, range too wide, a timeout: nodes word these differently, so any failure of a
 * range wider than one block counts) halves it and retries; each success lets it grow back towards
 * `maxSpan`. A single block still refused is read split (readBlock); one that cannot be read even
 * so throws UnreadableBlockError (a rate limit, HTTP 429, is thrown as is). One reader per chain
 * and worker: the span it learned is kept.
 */
export class LogReader {
  private span: bigint;

  constructor(
    private readonly chain: ChainClient,
    private readonly maxSpan: number,
    private readonly topics: readonly Hex[],
  ) {
    this.span = BigInt(maxSpan);
  }

  get currentSpan(): number {
    return Number(this.span);
  }

  /** Logs of blocks [from, to'] for some to' ≤ to (as far as the current span reaches), and to'. */
  async read(from: bigint, to: bigint, address?: readonly string[]): Promise<{ to: bigint; logs: ChainLog[] }> {
    if (address && address.length === 0) {
      const end = from + this.span - 1n < to ? from + this.span - 1n : to;
      return { to: end, logs: [] };
    }
    // The span grows only when it was not cut in this call: a caller that plans its range by the
    // span (the follower) then gets the range it planned with the span it asks again with.
    let cut = false;
    for (;;) {
      const end = from + this.span - 1n < to ? from + this.span - 1n : to;
      if (end === from) {
        const logs = await this.readBlock(from, address);
        if (!cut) this.grow();
        return { to: end, logs };
      }
      try {
        // A range a node behind refuses is asked again as is first (util/ask-again.ts): another node may have it.
        const logs = await askAgainIfBehind(() => getLogs(this.chain, from, end, { topics: this.topics, address }), saysBehind);
        if (!cut) this.grow();
        return { to: end, logs };
      } catch (err) {
        // A rate limit says nothing about the range: asking for less would only ask more often.
        if (rateLimited(err)) throw err;
        const half = (end - from + 1n) / 2n;
        this.span = half < 1n ? 1n : half;
        cut = true;
      }
    }
  }

  /** After a read the node answered at the span: it doubles back towards maxSpan (one big block leaves it small only for a while). */
  private grow(): void {
    if (this.span >= BigInt(this.maxSpan)) return;
    const grown = this.span * 2n;
    this.span = grown > BigInt(this.maxSpan) ? BigInt(this.maxSpan) : grown;
  }

  /**
   * One block's logs, however large: asked whole, then (when refused: a node caps a response at
   * some number of logs or bytes) split by halves of the address set, then of the topics, and at
   * the last from the block's receipts. Throws UnreadableBlockError.
   */
  async readBlock(block: bigint, address?: readonly string[]): Promise<ChainLog[]> {
    const receipts: ReceiptCache = {};
    try {
      const logs = await readSplit(this.chain, block, { topics: this.topics, address }, receipts);
      return logs.sort((a, b) => a.logIndex - b.logIndex);
    } catch (err) {
      // A rate limit says nothing about the block: it is not counted towards passing over it.
      throw rateLimited(err) ? err : new UnreadableBlockError(block, err);
    }
  }
}

async function getLogs(chain: ChainClient, from: bigint, to: bigint, f: LogFilter): Promise<ChainLog[]> {
  const raw = (await chain.public.request(
    {
      method: 'eth_getLogs',
      params: [{ fromBlock: hex(from), toBlock: hex(to), ...(f.topics.length ? { topics: [f.topics] } : {}), ...(f.address ? { address: f.address } : {}) }],
    } as never,
    // Not asked again as is: a refusal (too many results, too big, too slow) is answered by asking
    // for less, and the same big request repeated only loads the node and the batch it shares.
    { retryCount: 0 },
  )) as WireLog[];
  return raw.filter((l) => !l.removed).map(toChainLog);
}

const halves = <T>(xs: readonly T[]): [T[], T[]] => [xs.slice(0, xs.length >> 1), xs.slice(xs.length >> 1)];

/**
 * HTTP 429: the node limits how often it is asked, not how much; more, smaller requests make it worse.
 * Or the node is behind the blocks asked for (a load-balanced provider's lagging node): smaller ranges
 * of them fail the same way, and a block must not count as unreadable for it. Either fails the read as is.
 */
function rateLimited(err: unknown): boolean {
  // A 429, or no slot of the node's budget in time (call-budget.ts: the 429s it waited out).
  return isRateLimited(err) || saysBehind(err);
}

async function readSplit(chain: ChainClient, block: bigint, f: LogFilter, receipts: ReceiptCache): Promise<ChainLog[]> {
  try {
    return await getLogs(chain, block, block, f);
  } catch (err) {
    if (rateLimited(err)) throw err;
    // Refused: ask for less per request. Sub-filters are disjoint, so their logs just add up.
  }
  if (f.address && f.address.length > 1) {
    const [a, b] = halves(f.address);
    return [...(await readSplit(chain, block, { ...f, address: a }, receipts)), ...(await readSplit(chain, block, { ...f, address: b }, receipts))];
  }
  if (f.topics.length > 1) {
    const [a, b] = halves(f.topics);
    return [...(await readSplit(chain, block, { ...f, topics: a }, receipts)), ...(await readSplit(chain, block, { ...f, topics: b }, receipts))];
  }
  const all = await (receipts.logs ??= blockLogsFromReceipts(chain, block));
  const addresses = f.address ? new Set(f.address.map((a) => a.toLowerCase())) : undefined;
  const topic0 = new Set(f.topics.map((t) => t.toLowerCase()));
  return all.filter((l) => (topic0.size === 0 || topic0.has(l.topics[0]?.toLowerCase() ?? '')) && (!addresses || addresses.has(l.address.toLowerCase())));
}

/** A block's receipts are read once per readBlock, however many sub-filters fall back to them. */
interface ReceiptCache {
  logs?: Promise<ChainLog[]>;
}

interface WireReceipt {
  transactionHash: Hex;
  blockHash: Hex;
  logs: WireLog[];
}

interface WireBlock {
  number: Hex;
  hash: Hex;
  timestamp: Hex;
  transactions: Hex[];
}

/**
 * Every log of a block from its receipts: all in one eth_getBlockReceipts (nodes cap eth_getLogs by
 * result count, seldom this), else one eth_getTransactionReceipt per transaction, each answer then
 * holding one transaction's logs however many the block has.
 */
async function blockLogsFromReceipts(chain: ChainClient, block: bigint): Promise<ChainLog[]> {
  const b = (await chain.public.request({ method: 'eth_getBlockByNumber', params: [hex(block), false] } as never)) as WireBlock | null;
  if (!b) throw new Error(`block ${block} not found`);
  const receipts = (await wholeBlockReceipts(chain, b)) ?? (await receiptsOneByOne(chain, b));
  const out: ChainLog[] = [];
  for (const [k, r] of receipts.entries()) {
    // A receipt of another fork than the block read above: the chain moved; the caller reads again.
    if (!r || r.blockHash.toLowerCase() !== b.hash.toLowerCase()) throw new Error(`receipt of ${b.transactions[k]} is not in block ${b.hash}`);
    for (const l of r.logs) if (!l.removed) out.push({ ...toChainLog(l), blockTimestamp: BigInt(b.timestamp) });
  }
  return out;
}

/** The block's receipts in one answer, or null when the node refuses it or answers something else. */
async function wholeBlockReceipts(chain: ChainClient, b: WireBlock): Promise<Array<WireReceipt | null> | null> {
  const got: unknown = await chain.public.request({ method: 'eth_getBlockReceipts', params: [hex(BigInt(b.number))] } as never, { retryCount: 0 }).catch(() => null);
  // Every transaction's, in order: anything less is not this block's whole list.
  if (!Array.isArray(got) || got.length !== b.transactions.length) return null;
  const receipts = got as WireReceipt[];
  return receipts.every((r, i) => r?.transactionHash?.toLowerCase() === b.transactions[i]!.toLowerCase()) ? receipts : null;
}

async function receiptsOneByOne(chain: ChainClient, b: WireBlock): Promise<Array<WireReceipt | null>> {
  const out: Array<WireReceipt | null> = [];
  for (let i = 0; i < b.transactions.length; i += RECEIPTS_AT_ONCE) {
    const group = b.transactions.slice(i, i + RECEIPTS_AT_ONCE);
    out.push(...((await Promise.all(group.map((hash) => chain.public.request({ method: 'eth_getTransactionReceipt', params: [hash] } as never)))) as Array<WireReceipt | null>));
  }
  return out;
}

function toChainLog(l: WireLog): ChainLog {
  return {
    address: l.address,
    topics: l.topics,
    data: l.data,
    blockNumber: BigInt(l.blockNumber),
    blockHash: l.blockHash,
    transactionHash: l.transactionHash,
    transactionIndex: Number(l.transactionIndex),
    logIndex: Number(l.logIndex),
    blockTimestamp: l.blockTimestamp !== undefined && l.blockTimestamp !== null ? BigInt(l.blockTimestamp) : undefined,
  };
}
