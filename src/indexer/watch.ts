import type { Address } from 'viem';
import type { ChainClient } from '../chain/client.ts';
import { backfillStore } from './backfill.ts';
import type { ChainIndexer } from './chain-indexer.ts';

export interface WatchOutcome {
  contract: string;
  /** False when the contract was on the watchlist already (nothing is scheduled again). */
  added: boolean;
  /** The backfill that gives the contract its history, when it has blocks the follower read without it. */
  backfill: { id: number; fromBlock: number; toBlock: number } | null;
  /** Why no backfill was scheduled. */
  note?: string;
}

/**
 * The first block at which `address` has code: a binary search over eth_getCode (about log2(head)
 * reads of the node's history); null when it has none at `head` (not deployed, or not a contract).
 */
export async function deploymentBlock(chain: ChainClient, address: Address, head: bigint): Promise<bigint | null> {
  const hasCode = async (b: bigint) => ((await chain.public.getCode({ address, blockNumber: b })) ?? '0x') !== '0x';
  if (!(await hasCode(head))) return null;
  let lo = 0n;
  let hi = head;
  while (lo < hi) {
    const mid = (lo + hi) / 2n;
    if (await hasCode(mid)) hi = mid;
    else lo = mid + 1n;
  }
  return lo;
}

/**
 * Adds a contract to a watchlist chain and schedules the backfill of its history: from its deployment
 * block (or `fromBlock`) to the confirmed head, through the leased ranges any worker process takes
 * (the background runner of serve/worker, `metarelay indexer work`). The follower reads the contract
 * from its next step on; the blocks both read are counted once (transfers are idempotent), so the
 * backfill may safely reach past the follower's cursor, and must: a follower step that began before
 * the contract was added ends no later than the confirmed head of now.
 */
export async function watchContract(ix: ChainIndexer, contract: Address, opts: { projectId: number | null; fromBlock?: bigint; rangeBlocks: number }): Promise<WatchOutcome> {
  const address = contract.toLowerCase() as Address;
  const before = await ix.watchlist.list();
  if (before.includes(address)) return { contract: address, added: false, backfill: null, note: 'already on the watchlist' };
  await ix.watchlist.add(address, opts.projectId);
  const head = (await ix.chain.public.getBlockNumber()) - BigInt(ix.cfg.confirmations);
  if (head < 0n) return { contract: address, added: true, backfill: null, note: 'the chain has no confirmed block yet' };
  const from = opts.fromBlock ?? (await deploymentBlock(ix.chain, address, head));
  if (from === null) return { contract: address, added: true, backfill: null, note: `no code at ${address} by block ${head}: nothing to backfill` };
  if (from > head) return { contract: address, added: true, backfill: null, note: `block ${from} is not confirmed yet: the follower will read it` };
  const id = await backfillStore(ix.db).create(ix.chain.chainId, ix.scope, from, head, { rangeBlocks: opts.rangeBlocks, contracts: [address] });
  return { contract: address, added: true, backfill: { id, fromBlock: Number(from), toBlock: Number(head) } };
}
