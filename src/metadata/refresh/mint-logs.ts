import { decodeAbiParameters, parseAbiItem, toEventSelector, type Hex } from 'viem';

/** The transfer events of ERC721 and ERC1155; a transfer from the zero address is a mint. */
export const MINT_EVENTS = [
  parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 indexed tokenId)'),
  parseAbiItem('event TransferSingle(address indexed operator, address indexed from, address indexed to, uint256 id, uint256 value)'),
  parseAbiItem('event TransferBatch(address indexed operator, address indexed from, address indexed to, uint256[] ids, uint256[] values)'),
] as const;

/** Their names by topic0, for raw logs (ERC20 and ERC721 share Transfer's). */
export const MINT_EVENT_BY_TOPIC: ReadonlyMap<Hex, string> = new Map(MINT_EVENTS.map((e) => [toEventSelector(e), e.name]));

const ZERO_TOPIC: Hex = `0x${'0'.repeat(64)}`;

/**
 * The token ids a log mints; none for any other transfer, for an ERC20 Transfer (three topics,
 * the amount in data) and for a log that does not decode as the standard says.
 */
export function mintedIds(log: { eventName?: string; topics: readonly Hex[]; data: Hex }): string[] {
  const t = log.topics;
  try {
    switch (log.eventName) {
      case 'Transfer':
        return t.length === 4 && t[1] === ZERO_TOPIC ? [BigInt(t[3]).toString()] : [];
      case 'TransferSingle':
        return t[2] === ZERO_TOPIC ? [decodeAbiParameters([{ type: 'uint256' }, { type: 'uint256' }], log.data)[0].toString()] : [];
      case 'TransferBatch':
        return t[2] === ZERO_TOPIC ? decodeAbiParameters([{ type: 'uint256[]' }, { type: 'uint256[]' }], log.data)[0].map(String) : [];
      default:
        return [];
    }
  } catch {
    return [];
  }
}
