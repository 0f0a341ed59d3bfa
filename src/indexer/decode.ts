import { decodeAbiParameters, toEventSelector, type Hex } from 'viem';
import type { ChainLog } from '../chain/logs.ts';

/** The three transfer events, by topic0. ERC20 and ERC721 share Transfer and differ in topic count. */
export const TRANSFER_TOPIC = toEventSelector('Transfer(address,address,uint256)');
export const SINGLE_TOPIC = toEventSelector('TransferSingle(address,address,address,uint256,uint256)');
export const BATCH_TOPIC = toEventSelector('TransferBatch(address,address,address,uint256[],uint256[])');
export const TRANSFER_TOPICS: Hex[] = [TRANSFER_TOPIC, SINGLE_TOPIC, BATCH_TOPIC];

export const ZERO_ADDRESS = '0x0000000000000000000000000000000000000000';

export type TokenType = 'ERC20' | 'ERC721' | 'ERC1155';

/** A log as eth_getLogs gives it (chain/logs.ts ChainLog); read elsewhere, its block's timestamp may come as hex, and a node may flag it removed. */
export type RawLog = Omit<ChainLog, 'blockTimestamp'> & { blockTimestamp?: bigint | Hex; removed?: boolean };

/** One token moved by one log (a TransferBatch gives one per id; `part` numbers them). */
export interface TransferEntry {
  blockNumber: bigint;
  blockHash: string;
  txHash: string;
  txIndex: number;
  logIndex: number;
  part: number;
  contract: string;
  type: TokenType;
  from: string;
  to: string;
  tokenId: string;
  amount: string;
  /** The log as read (shared by a batch's parts): what an indexer webhook listener is sent as its rawLog. */
  topics: readonly Hex[];
  data: Hex;
}

/** An indexed address topic: 12 zero bytes then the address; anything else is not an address. */
function topicAddress(t: Hex): string | null {
  if (t.length !== 66 || !/^0x0{24}/i.test(t)) return null;
  return `0x${t.slice(26).toLowerCase()}`;
}

const WORD = 64;
const dataWords = (data: Hex) => (data.length - 2) / WORD;

/**
 * The token movements of a log, or null when the log does not have the shape its event's standard
 * gives it (wrong topic count, wrong data length, an address topic with high bits set): such a log
 * is counted and skipped, never half-applied.
 */
export function decodeTransfer(log: RawLog): TransferEntry[] | null {
  const t = log.topics;
  const base = {
    blockNumber: log.blockNumber,
    blockHash: log.blockHash.toLowerCase(),
    txHash: log.transactionHash.toLowerCase(),
    txIndex: log.transactionIndex,
    logIndex: log.logIndex,
    contract: log.address.toLowerCase(),
    topics: t,
    data: log.data,
  };
  if ((log.data.length - 2) % 2 !== 0) return null;
  try {
    switch (t[0]?.toLowerCase()) {
      case TRANSFER_TOPIC: {
        const from = t[1] ? topicAddress(t[1]) : null;
        const to = t[2] ? topicAddress(t[2]) : null;
        if (!from || !to) return null;
        if (t.length === 3 && log.data.length === 2 + WORD) {
          return [{ ...base, part: 0, type: 'ERC20', from, to, tokenId: '0', amount: BigInt(log.data).toString() }];
        }
        if (t.length === 4 && log.data === '0x') {
          return [{ ...base, part: 0, type: 'ERC721', from, to, tokenId: BigInt(t[3]!).toString(), amount: '1' }];
        }
        return null;
      }
      case SINGLE_TOPIC: {
        if (t.length !== 4 || log.data.length !== 2 + 2 * WORD) return null;
        const from = topicAddress(t[2]!);
        const to = topicAddress(t[3]!);
        if (!from || !to || !topicAddress(t[1]!)) return null;
        const [id, value] = decodeAbiParameters([{ type: 'uint256' }, { type: 'uint256' }], log.data);
        return [{ ...base, part: 0, type: 'ERC1155', from, to, tokenId: id.toString(), amount: value.toString() }];
      }
      case BATCH_TOPIC: {
        if (t.length !== 4 || dataWords(log.data) < 4 || !Number.isInteger(dataWords(log.data))) return null;
        const from = topicAddress(t[2]!);
        const to = topicAddress(t[3]!);
        if (!from || !to || !topicAddress(t[1]!)) return null;
        const [ids, values] = decodeAbiParameters([{ type: 'uint256[]' }, { type: 'uint256[]' }], log.data);
        if (ids.length !== values.length) return null;
        return ids.map((id, i) => ({ ...base, part: i, type: 'ERC1155' as const, from, to, tokenId: id.toString(), amount: values[i]!.toString() }));
      }
      default:
        return null;
    }
  } catch {
    // decodeAbiParameters throws on offsets or lengths that point outside the data.
    return null;
  }
}
