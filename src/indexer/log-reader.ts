import type { Hex } from 'viem';
import type { ChainClient } from '../chain/client.ts';
import { TRANSFER_TOPICS, type RawLog } from './decode.ts';

interface WireLog {
  address: string;
  topics: Hex[];
  data: Hex;
  blockNumber: Hex;
  blockHash: Hex;
  transactionHash: Hex;
  transactionIndex: Hex;
  logIndex: Hex;
  blockTimestamp?: Hex;
  removed?: boolean;
}

const hex = (n: bigint) => `0x${n.toString(16)}`;

/**
 * eth_getLogs over block ranges the node accepts. The span starts at `maxSpan`; a refused request
 * (too many results, range too wide, a timeout — nodes word these differently, so any failure of a
 * range wider than one block counts) halves it and retries; each success lets it grow back towards
 * `maxSpan`. One reader per chain and worker: the span it learned is kept between calls.
 */
export class LogReader {
  private span: bigint;

  constructor(
    private readonly chain: ChainClient,
    private readonly maxSpan: number,
    /** Undefined: every contract (a chain-wide scan); else only these. */
    private readonly addresses?: () => Promise<string[] | undefined>,
  ) {
    this.span = BigInt(maxSpan);
  }

  get currentSpan(): number {
    return Number(this.span);
  }

  /** Logs of blocks [from, to'] for some to' ≤ to (as far as the current span reaches), and to'. */
  async read(from: bigint, to: bigint): Promise<{ to: bigint; logs: RawLog[] }> {
    const address = this.addresses ? await this.addresses() : undefined;
    if (address && address.length === 0) {
      const end = from + this.span - 1n < to ? from + this.span - 1n : to;
      return { to: end, logs: [] };
    }
    for (;;) {
      const end = from + this.span - 1n < to ? from + this.span - 1n : to;
      try {
        const raw = (await this.chain.public.request({
          method: 'eth_getLogs',
          params: [{ fromBlock: hex(from), toBlock: hex(end), topics: [TRANSFER_TOPICS], ...(address ? { address } : {}) }],
        } as never)) as WireLog[];
        if (this.span < BigInt(this.maxSpan)) {
          const grown = this.span * 2n;
          this.span = grown > BigInt(this.maxSpan) ? BigInt(this.maxSpan) : grown;
        }
        return { to: end, logs: raw.filter((l) => !l.removed).map(toRawLog) };
      } catch (err) {
        if (end === from) throw err;
        const half = (end - from + 1n) / 2n;
        this.span = half < 1n ? 1n : half;
      }
    }
  }
}

function toRawLog(l: WireLog): RawLog {
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
