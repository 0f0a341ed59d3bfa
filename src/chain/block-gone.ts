import { toHex, type PublicClient } from 'viem';
import { askAgain } from '../util/ask-again.ts';

/** Asks for the block at a height before it is taken to be gone: each ask a fresh chance at another node of a load balancer. */
export const GONE_ASKS = 8;

const NO_BLOCK = Symbol('no block');

/**
 * Whether the chain has no block at height `n` any more (a dev node reverted, a deep reorg): every one
 * of `asks` reads of it answered null, on the one schedule of reads a node behind may refuse
 * (util/ask-again.ts: about 2 s for 8). A node behind answers null too, but a load balancer's next node, or
 * the same node a block time later, has the block: one answer with a block and it is not gone. A failed
 * read is no answer, so it is not taken for gone either.
 */
export async function blockGone(client: PublicClient, n: bigint, asks = GONE_ASKS): Promise<boolean> {
  try {
    await askAgain(
      async () => {
        if ((await client.request({ method: 'eth_getBlockByNumber', params: [toHex(n), false] } as never)) === null) throw NO_BLOCK;
      },
      (err) => err === NO_BLOCK,
      asks,
    );
    return false;
  } catch (err) {
    return err === NO_BLOCK;
  }
}
