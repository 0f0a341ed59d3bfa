import type { ChainClient } from '../chain/client.ts';
import { decodeTransfer, type RawLog } from './decode.ts';
import type { TimedEntry } from './transfer-store.ts';

export interface DecodedChunk {
  entries: TimedEntry[];
  /** Logs with a transfer's topic0 but not its shape: skipped. */
  malformed: number;
  logs: number;
  /** Hash per block number of the blocks that had logs (as the logs say). */
  blockHashes: Map<bigint, string>;
}

/** Decodes a range's logs and dates them (from the logs when the node sends timestamps, else from the blocks). */
export async function decodeChunk(chain: ChainClient, logs: RawLog[]): Promise<DecodedChunk> {
  const entries: TimedEntry[] = [];
  const blockHashes = new Map<bigint, string>();
  const times = new Map<bigint, number>();
  let malformed = 0;
  const undated = new Set<bigint>();
  for (const log of logs) {
    blockHashes.set(log.blockNumber, log.blockHash.toLowerCase());
    if (log.blockTimestamp !== undefined) times.set(log.blockNumber, Number(log.blockTimestamp));
    else undated.add(log.blockNumber);
  }
  for (const n of undated) if (times.has(n)) undated.delete(n);
  if (undated.size) {
    // Issued together: the transport sends them as one JSON-RPC batch.
    const blocks = await Promise.all([...undated].map((n) => chain.public.getBlock({ blockNumber: n })));
    for (const b of blocks) times.set(b.number!, Number(b.timestamp));
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
  return { entries, malformed, logs: logs.length, blockHashes };
}
