import type { PublicClient } from 'viem';
import { pauseAbout } from './ask-again.ts';

/** Asks for the block at a height before it is taken to be gone: each ask a fresh chance at another node of a load balancer. */
export const GONE_ASKS = 8;

/**
 * Whether the chain has no block at height `n` any more (a dev node reverted, a deep reorg): every one
 * of `asks` reads of it answered null, on the one schedule of reads a node behind may refuse (at once,
 * at once again, then pausing a little longer each time: about 2 s in all). A node behind answers null
 * too, but a load balancer's next node, or the same node a block time later, has the block: one answer
 * with a block and it is not gone. A failed read is no answer, so it is not taken for gone either.
 */
export async function blockGone(client: PublicClient, n: bigint, asks = GONE_ASKS): Promise<boolean> {
  for (let attempt = 1; attempt <= asks; attempt++) {
    if (attempt > 2) await pauseAbout(100 * (attempt - 2));
    const block = await client.request({ method: 'eth_getBlockByNumber', params: [`0x${n.toString(16)}`, false] } as never).then(
      (b) => b as unknown,
      () => undefined,
    );
    if (block !== null) return false;
  }
  return true;
}
