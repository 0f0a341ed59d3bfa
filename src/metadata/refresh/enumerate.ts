import { encodeFunctionData, parseAbi, type Address, type Hex } from 'viem';
import type { ChainClient } from '../../chain/client.ts';
import { multicall } from '../../chain/multicall.ts';
import { MINT_EVENTS, mintedIds } from './mint-logs.ts';

const abi = parseAbi([
  'function supportsInterface(bytes4) view returns (bool)',
  'function totalSupply() view returns (uint256)',
  'function tokenByIndex(uint256) view returns (uint256)',
]);
const IFACE_ERC721_ENUMERABLE = '0x780e9d63';

export interface EnumerateOptions {
  logChunkBlocks: number;
  onProgress?: (found: number) => void;
}

/** The first block at which the contract has code, by binary search over eth_getCode. */
export async function deploymentBlock(chain: ChainClient, address: Address, head: bigint): Promise<bigint> {
  let lo = 0n;
  let hi = head;
  while (lo < hi) {
    const mid = (lo + hi) / 2n;
    const code = await chain.public.getCode({ address, blockNumber: mid }).catch(() => undefined);
    if (code && code !== '0x') hi = mid;
    else lo = mid + 1n;
  }
  return lo;
}

async function viaEnumerable(chain: ChainClient, address: Address): Promise<string[] | null> {
  const [iface, supply] = await multicall(chain, [
    { target: address, data: encodeFunctionData({ abi, functionName: 'supportsInterface', args: [IFACE_ERC721_ENUMERABLE] }) },
    { target: address, data: encodeFunctionData({ abi, functionName: 'totalSupply' }) },
  ]);
  if (!iface.ok || iface.data.length !== 66 || BigInt(iface.data) !== 1n || !supply.ok || supply.data.length !== 66) return null;
  const total = Number(BigInt(supply.data));
  const calls = Array.from({ length: total }, (_, i) => ({ target: address, data: encodeFunctionData({ abi, functionName: 'tokenByIndex', args: [BigInt(i)] }) }));
  const res = await multicall(chain, calls, { chunkSize: 500 });
  return res.filter((r) => r.ok && r.data.length === 66).map((r) => BigInt(r.data).toString());
}

/** Every token id ever minted, read from mint logs in block ranges that halve when a node refuses one. */
async function viaLogs(chain: ChainClient, address: Address, opts: EnumerateOptions): Promise<string[]> {
  const head = await chain.public.getBlockNumber();
  const ids = new Set<string>();
  let from = await deploymentBlock(chain, address, head);
  let span = BigInt(opts.logChunkBlocks);
  while (from <= head) {
    const to = from + span - 1n > head ? head : from + span - 1n;
    try {
      const logs = await chain.public.getLogs({ address, events: MINT_EVENTS, fromBlock: from, toBlock: to, strict: false });
      for (const log of logs) for (const id of mintedIds({ eventName: log.eventName, topics: log.topics as Hex[], data: log.data })) ids.add(id);
      opts.onProgress?.(ids.size);
      from = to + 1n;
    } catch (err) {
      if (span <= 1n) throw err;
      span /= 2n;
    }
  }
  return [...ids];
}

/** Token ids of a contract: ERC721Enumerable when it says so, mint logs otherwise. */
export async function enumerateTokens(chain: ChainClient, address: Address, opts: EnumerateOptions): Promise<string[]> {
  return (await viaEnumerable(chain, address)) ?? viaLogs(chain, address, opts);
}
