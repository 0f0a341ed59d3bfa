import { encodeFunctionData, parseAbi, type Address, type Hex } from 'viem';
import type { ChainClient } from '../../chain/client.ts';
import { findDeploymentBlock } from '../../chain/deployment-block.ts';
import { LogReader } from '../../chain/logs.ts';
import { multicall } from '../../chain/multicall.ts';
import { MINT_EVENT_BY_TOPIC, mintedIds } from './mint-logs.ts';

const abi = parseAbi(['function supportsInterface(bytes4) view returns (bool)', 'function totalSupply() view returns (uint256)', 'function tokenByIndex(uint256) view returns (uint256)']);
const IFACE_ERC721_ENUMERABLE = '0x780e9d63';

export interface EnumerateOptions {
  logChunkBlocks: number;
  /** The operator's first block for this contract (chains[].startBlocks), else found from the node. */
  startBlock?: bigint;
  onProgress?: (found: number) => void;
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

/**
 * Every token id ever minted, read from mint logs by the shared reader (block ranges that halve when
 * a node refuses one, a block too big for one answer read split). A block it cannot read at all
 * fails the task, which its own attempts and backoff retry.
 */
async function viaLogs(chain: ChainClient, address: Address, opts: EnumerateOptions): Promise<string[]> {
  const head = await chain.head.number();
  const ids = new Set<string>();
  const mintTopics = [...MINT_EVENT_BY_TOPIC.keys()];
  const reader = new LogReader(chain, opts.logChunkBlocks, mintTopics);
  // Never a guess: a node that cannot say where the contract starts fails the task (retried), and a
  // contract without code is refused, rather than read from a wrong block and finished with no token.
  const start = await findDeploymentBlock(chain, address, head, { configured: opts.startBlock, topics: mintTopics, logChunkBlocks: opts.logChunkBlocks });
  if (!start) throw new Error(`no contract code at ${address} by block ${head}`);
  let from = start.block;
  while (from <= head) {
    const { to, logs } = await reader.read(from, head, [address]);
    for (const log of logs) {
      const topics = log.topics as Hex[];
      for (const id of mintedIds({ eventName: MINT_EVENT_BY_TOPIC.get(topics[0]?.toLowerCase() as Hex), topics, data: log.data })) ids.add(id);
    }
    opts.onProgress?.(ids.size);
    from = to + 1n;
  }
  return [...ids];
}

/** The configured first block of `address` (keys compared case-insensitively). */
export function startBlockOf(startBlocks: Readonly<Record<string, number>> | undefined, address: string): bigint | undefined {
  const hit = Object.entries(startBlocks ?? {}).find(([a]) => a.toLowerCase() === address.toLowerCase());
  return hit ? BigInt(hit[1]) : undefined;
}

/** Token ids of a contract: ERC721Enumerable when it says so, mint logs otherwise. */
export async function enumerateTokens(chain: ChainClient, address: Address, opts: EnumerateOptions): Promise<string[]> {
  return (await viaEnumerable(chain, address)) ?? viaLogs(chain, address, opts);
}
