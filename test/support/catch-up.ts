import type { ChainIndexer } from '../../src/indexer/index.ts';

/**
 * Runs the indexer's follower until a poll finds nothing more and the cursor stands at the chain's head,
 * so a test reads what the indexer stored for every block mined so far. `head` defaults to the
 * indexer's own chain client; a test that reads the head through another client passes it, since
 * each client caches the block number on its own.
 */
export async function catchUp(ix: ChainIndexer, head: () => Promise<bigint> = () => ix.chain.public.getBlockNumber()) {
  for (let i = 0; i < 200; i++) {
    const more = await ix.follower.poll();
    const [cur, at] = await Promise.all([ix.cursor(), head()]);
    if (!more && cur && cur.block === at) return;
  }
  throw new Error('indexer did not catch up');
}
