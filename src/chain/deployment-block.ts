import type { Address, Hex } from 'viem';
import { causeOf } from '../util/cause.ts';
import { MetarelayError } from '../util/error.ts';
import type { ChainClient } from './client.ts';
import { askAgainIfBehind } from '../util/ask-again.ts';
import { refusedByNode, stateReadFault, type StateReadFault } from './node-errors.ts';
import { LogReader } from './logs.ts';

/**
 * Where a contract's history starts, on any node: an archive node, a full node that keeps the state of
 * its last 128 blocks only, a hosted provider that rate-limits or answers from a node a block behind.
 *
 * A binary search over eth_getCode is exact on an archive node. Elsewhere a read of an old block fails
 * ("missing trie node", "header not found", anvil's "BlockOutOfRangeError", a 429): such a failure is
 * never read as "no code there", which would move the start past the contract's first events and make
 * its history silently empty. Where the node has no state, the first log of the contract (of the events
 * the caller reads) gives the start: nothing the caller reads happened before it.
 *
 * "No state there" is decided by what the node does, not by its words, which every client and provider
 * chooses for itself: an old block's read the node refuses with a JSON-RPC error (not a 429, not a
 * transport failure) while the same read at the head succeeds. The phrases (node-errors.ts,
 * stateReadFault) are only a hint, for a block near the head, where a refusal in those words is a node
 * behind and worth asking again.
 */

/**
 * A block this close to the head whose state is missing means the node is behind, not pruned: the
 * search stops and is retried. Further back it is taken as pruned; wrongly so costs nothing, as the
 * log search then covers the blocks the code search could not decide.
 */
const NEAR_HEAD = 8n;

/** The start could not be found: the search stopped on a node failure it must not guess through. */
export class DeploymentBlockError extends MetarelayError {
  override readonly name = 'DeploymentBlockError';
  constructor(
    readonly address: string,
    readonly block: bigint,
    readonly fault: StateReadFault,
    cause: unknown,
  ) {
    const why = fault === 'rate-limited' ? 'the node rate-limits us' : fault === 'no-state' ? 'the node is behind (no state for a recent block)' : 'the node failed';
    super(`first block of ${address}: the code at block ${block} could not be read, ${why} (${causeOf(cause).slice(0, 200)}); retried later`, {
      cause,
      kind: fault,
      retryable: true,
      docsPath: 'production.md#hosted-providers',
    });
  }
}

export interface DeploymentBlock {
  block: bigint;
  /** configured: given by the operator; code: where eth_getCode first sees code; logs: the contract's first log (the node had no state that far back). */
  source: 'configured' | 'code' | 'logs';
  /** The lowest block the search found the node without state for, when it met one. */
  noStateAt?: bigint;
}

export interface DeploymentBlockOptions {
  /** The operator's start block for this contract (chains[].startBlocks): used as is. */
  configured?: bigint;
  /** The events the caller reads: the first of them bounds the start where the node has no state. */
  topics: readonly Hex[];
  /** Most blocks per eth_getLogs of the log search (shrinks when refused). */
  logChunkBlocks: number;
}

/**
 * The first block to read `address`'s events from, by `head`; null when it has no code at `head`
 * (not deployed, or not a contract). Throws DeploymentBlockError when the node fails in a way that
 * says nothing about the contract (rate limited, behind, down).
 */
export async function findDeploymentBlock(chain: ChainClient, address: Address, head: bigint, opts: DeploymentBlockOptions): Promise<DeploymentBlock | null> {
  if (opts.configured !== undefined) return { block: opts.configured, source: 'configured' };
  /** Whether the node serves the same read at the head now: asked after each refusal of an old block. */
  const readsAtHead = () =>
    chain.public.getCode({ address, blockNumber: head }).then(
      () => true,
      () => false,
    );
  /** true / false: code or none; 'no-state': the node keeps no state that far back. */
  const codeAt = async (block: bigint): Promise<boolean | 'no-state'> => {
    try {
      // Near the head, no state is a node behind the one that gave the head: asked again (util/ask-again.ts).
      const code = await askAgainIfBehind(
        () => chain.public.getCode({ address, blockNumber: block }),
        (err) => stateReadFault(err) === 'no-state' && head - block <= NEAR_HEAD,
      );
      return (code ?? '0x') !== '0x';
    } catch (err) {
      const fault = stateReadFault(err);
      // Refused in the node's own words (whatever they are) while the head's state reads fine: no state that far back.
      if (head - block > NEAR_HEAD && fault !== 'rate-limited' && refusedByNode(err) && (await readsAtHead())) return 'no-state';
      throw new DeploymentBlockError(address, block, fault, err);
    }
  };
  const atHead = await codeAt(head);
  if (atHead === 'no-state') throw new DeploymentBlockError(address, head, 'no-state', new Error('no state at the head'));
  if (!atHead) return null;
  let lo = 0n;
  let hi = head;
  /** The highest block read without code, and the highest read without state. */
  let noCode = -1n;
  let noState = -1n;
  while (lo < hi) {
    const mid = (lo + hi) / 2n;
    const has = await codeAt(mid);
    if (has === true) hi = mid;
    else {
      if (has === false) noCode = mid;
      else noState = mid;
      lo = mid + 1n;
    }
  }
  // Exact when the block just below was read without code (or there is none below).
  if (lo === 0n || noCode === lo - 1n || noState < 0n) return { block: lo, source: 'code' };
  // The node had no state below lo: the contract may be older. Its first log in (noCode, lo] bounds it.
  const first = await firstLog(chain, address, noCode + 1n, lo, opts);
  return { block: first ?? lo, source: first === undefined ? 'code' : 'logs', noStateAt: noState };
}

/** The block of the first log of `address` with one of `topics` in [from, to], read forward with ranges that halve when refused. */
async function firstLog(chain: ChainClient, address: Address, from: bigint, to: bigint, opts: DeploymentBlockOptions): Promise<bigint | undefined> {
  const reader = new LogReader(chain, opts.logChunkBlocks, opts.topics);
  for (let next = from; next <= to; ) {
    const { to: end, logs } = await reader.read(next, to, [address]);
    if (logs.length) return logs.reduce((m, l) => (l.blockNumber < m ? l.blockNumber : m), logs[0]!.blockNumber);
    next = end + 1n;
  }
  return undefined;
}
