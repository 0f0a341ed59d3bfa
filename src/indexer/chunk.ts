import type { ChainClient } from '../chain/client.ts';
import { askAgain, growing } from '../util/ask-again.ts';
import { decodeTransfer, type RawLog } from './decode.ts';
import type { TimedEntry } from './transfer-store.ts';

/** Block headers read at once for the timestamps a node left out of its logs. */
const TIMESTAMP_READS_AT_ONCE = 10;
/** Tries of one header: a block the logs came from that a node does not return is a node behind (load-balanced providers). */
const HEADER_TRIES = 4;

/** A block's header: kept by the chain's shared head reader when recent (no call), else read through the caller's client. */
async function headerOf(chain: ChainClient, blockNumber: bigint) {
  return askAgain(
    async () => {
      const b = await chain.head.block(blockNumber, chain.public);
      if (b) return b;
      throw new Error(`block ${blockNumber} not found`);
    },
    () => true,
    HEADER_TRIES,
    growing(100),
  );
}

export interface DecodedChunk {
  entries: TimedEntry[];
  /** Logs with a transfer's topic0 but not its shape: skipped. */
  malformed: number;
  logs: number;
  /** Hash per block number of the blocks that had logs (as the logs say). */
  blockHashes: Map<bigint, string>;
  /** The range's other logs read for the wiring (IndexHooks.logWants), dated. */
  others: Array<RawLog & { ts: number }>;
}

/**
 * Decodes a range's transfer logs and dates them and the range's `others` (from the logs when the node
 * sends timestamps, else from the blocks).
 */
export async function decodeChunk(chain: ChainClient, logs: RawLog[], others: RawLog[] = []): Promise<DecodedChunk> {
  const entries: TimedEntry[] = [];
  const blockHashes = new Map<bigint, string>();
  const times = new Map<bigint, number>();
  let malformed = 0;
  const undated = new Set<bigint>();
  for (const log of [...logs, ...others]) {
    blockHashes.set(log.blockNumber, log.blockHash.toLowerCase());
    if (log.blockTimestamp !== undefined) times.set(log.blockNumber, Number(log.blockTimestamp));
    else undated.add(log.blockNumber);
  }
  for (const n of undated) if (times.has(n)) undated.delete(n);
  // A few at a time: issued together, the transport sends them as one JSON-RPC batch, and a chunk of a
  // busy range has hundreds of blocks; providers that omit blockTimestamp often cap batches too (at 10
  // to 100), and a batch that size stays under any cap a node is likely to set.
  const undatedList = [...undated];
  for (let i = 0; i < undatedList.length; i += TIMESTAMP_READS_AT_ONCE) {
    const blocks = await Promise.all(undatedList.slice(i, i + TIMESTAMP_READS_AT_ONCE).map((n) => headerOf(chain, n)));
    for (const b of blocks) times.set(b.number, Number(b.timestamp));
  }
  for (const log of logs) {
    const decoded = decodeTransfer(log);
    if (!decoded) {
      malformed++;
      continue;
    }
    const ts = times.get(log.blockNumber)!;
    for (const e of decoded) entries.push({ ...e, ts });
  }
  return { entries, malformed, logs: logs.length, blockHashes, others: others.map((l) => ({ ...l, ts: times.get(l.blockNumber)! })) };
}
