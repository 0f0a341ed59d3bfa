import type { Address } from 'viem';
import type { ChainClient } from '../chain/client.ts';
import { findDeploymentBlock } from '../chain/deployment-block.ts';
import { TRANSFER_TOPICS } from './decode.ts';
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
 * The first block to read `address`'s transfers from: where eth_getCode first sees code, or, on a node
 * without old state, its first transfer (chain/deployment-block.ts); null when it has no code at `head`.
 * A node that fails the search (rate limited, behind) throws: it is never read as "not deployed".
 */
export async function deploymentBlock(chain: ChainClient, address: Address, head: bigint, chunkBlocks = 2_000): Promise<bigint | null> {
  return (await findDeploymentBlock(chain, address, head, { topics: TRANSFER_TOPICS, logChunkBlocks: chunkBlocks }))?.block ?? null;
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
  // The start is found before the contract is added: a node that fails the search (rate limited,
  // behind) leaves nothing half done, and the call can simply be repeated.
  const seen = (await ix.chain.head.number()) - BigInt(ix.cfg.confirmations);
  const from = opts.fromBlock ?? (seen < 0n ? null : await deploymentBlock(ix.chain, address, seen, ix.cfg.chunkBlocks));
  await ix.watchlist.add(address, opts.projectId);
  // Read again after the add: a follower step that began before it ends no later than this head.
  const head = (await ix.chain.head.number()) - BigInt(ix.cfg.confirmations);
  if (head < 0n) return { contract: address, added: true, backfill: null, note: 'the chain has no confirmed block yet' };
  if (from === null) return { contract: address, added: true, backfill: null, note: `no code at ${address} by block ${seen}: nothing to backfill` };
  if (from > head) return { contract: address, added: true, backfill: null, note: `block ${from} is not confirmed yet: the follower will read it` };
  const id = await backfillStore(ix.db).create(ix.chain.chainId, ix.scope, from, head, { rangeBlocks: opts.rangeBlocks, contracts: [address] });
  return { contract: address, added: true, backfill: { id, fromBlock: Number(from), toBlock: Number(head) } };
}
