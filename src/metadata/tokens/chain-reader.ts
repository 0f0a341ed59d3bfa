import { decodeErrorResult, decodeFunctionResult, encodeFunctionData, parseAbi, type Address, type Hex } from 'viem';
import type { ChainClient } from '../../chain/client.ts';
import { MULTICALL3_ADDRESS, multicall, type Call } from '../../chain/multicall.ts';

export type TokenStandard = 'ERC721' | 'ERC1155' | 'UNKNOWN';

export const IFACE_ERC721 = '0x80ac58cd';
export const IFACE_ERC1155 = '0xd9b67a26';

const abi = parseAbi([
  'function supportsInterface(bytes4 id) view returns (bool)',
  'function tokenURI(uint256 id) view returns (string)',
  'function uri(uint256 id) view returns (string)',
  'function getBlockNumber() view returns (uint256)',
  'error Error(string)',
]);

function decodeBool(data: Hex): boolean | undefined {
  // ERC165 answers are exactly one word; anything else (an EOA, a fallback) is not an answer.
  if (data.length !== 66) return undefined;
  return BigInt(data) === 1n;
}

/** ERC165 for each address in one eth_call: two supportsInterface calls per contract. */
export async function detectStandards(chain: ChainClient, addresses: Address[]): Promise<Map<Address, TokenStandard>> {
  const calls: Call[] = addresses.flatMap((a) => [
    { target: a, data: encodeFunctionData({ abi, functionName: 'supportsInterface', args: [IFACE_ERC721] }) },
    { target: a, data: encodeFunctionData({ abi, functionName: 'supportsInterface', args: [IFACE_ERC1155] }) },
  ]);
  const res = await multicall(chain, calls);
  const out = new Map<Address, TokenStandard>();
  addresses.forEach((a, i) => {
    const is721 = res[2 * i].ok && decodeBool(res[2 * i].data);
    const is1155 = res[2 * i + 1].ok && decodeBool(res[2 * i + 1].data);
    out.set(a, is1155 ? 'ERC1155' : is721 ? 'ERC721' : 'UNKNOWN');
  });
  return out;
}

export type UriRead = { ok: true; uri: string; method: 'tokenURI' | 'uri' } | { ok: false; reason: 'TOKEN_NOT_FOUND' | 'INVALID_URI' | 'NOT_A_CONTRACT'; message: string; method: 'tokenURI' | 'uri' };

function revertMessage(data: Hex): string {
  if (!data || data === '0x') return 'reverted without a reason';
  try {
    const e = decodeErrorResult({ abi, data });
    return `reverted: ${String(e.args?.[0] ?? e.errorName)}`;
  } catch {
    return `reverted with data ${data.slice(0, 74)}`;
  }
}

function decodeUri(method: 'tokenURI' | 'uri', id: bigint, r: { ok: boolean; data: Hex }): UriRead {
  if (!r.ok) return { ok: false, reason: 'TOKEN_NOT_FOUND', method, message: `${method}(${id}) ${revertMessage(r.data)}` };
  if (r.data === '0x') return { ok: false, reason: 'NOT_A_CONTRACT', method, message: `${method}(${id}) returned nothing: no contract code at this address?` };
  try {
    const uri = decodeFunctionResult({ abi, functionName: method, data: r.data }) as string;
    return { ok: true, uri, method };
  } catch {
    return { ok: false, reason: 'INVALID_URI', method, message: `${method}(${id}) did not return an ABI string` };
  }
}

export interface UriReadBatch {
  reads: UriRead[];
  /** The block the reads saw, when Multicall3 could report it. */
  blockNumber: bigint | null;
}

/**
 * Reads tokenURI (ERC721) or uri (ERC1155) for every id in as few eth_calls as possible.
 * An UNKNOWN standard tries tokenURI first and uri for the ids where that failed.
 */
export async function readTokenUris(chain: ChainClient, contract: Address, standard: TokenStandard, ids: bigint[]): Promise<UriReadBatch> {
  const method = standard === 'ERC1155' ? 'uri' : 'tokenURI';
  const calls: Call[] = ids.map((id) => ({ target: contract, data: encodeFunctionData({ abi, functionName: method, args: [id] }) }));
  // Asking Multicall3 for the block number in the same batch dates the reads without another round trip.
  calls.push({ target: MULTICALL3_ADDRESS, data: encodeFunctionData({ abi, functionName: 'getBlockNumber' }) });
  // All in one aggregate for a request's worth of ids (the node splits it if it must); bigger sets in chunks.
  const res = await multicall(chain, calls, { chunkSize: calls.length <= 1_001 ? calls.length : 500 });
  const blockRes = res.pop()!;
  const blockNumber = blockRes.ok && blockRes.data.length === 66 ? BigInt(blockRes.data) : null;
  const reads = ids.map((id, i) => decodeUri(method, id, res[i]));
  if (standard === 'UNKNOWN') {
    const retry = ids.map((id, i) => ({ id, i })).filter(({ i }) => !reads[i].ok);
    if (retry.length) {
      const res2 = await multicall(
        chain,
        retry.map(({ id }) => ({ target: contract, data: encodeFunctionData({ abi, functionName: 'uri', args: [id] }) })),
      );
      retry.forEach(({ id, i }, k) => {
        const second = decodeUri('uri', id, res2[k]);
        if (second.ok) reads[i] = second;
      });
    }
  }
  return { reads, blockNumber };
}
