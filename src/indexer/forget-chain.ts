import { forgetUnreadBlocks } from '../chain/unread-blocks.ts';
import type { Db } from '../store/db.ts';

/** Drops what the indexer holds about a chain (dev mode: each start has a new anvil under the same id). */
export async function forgetIndexedChain(db: Db, chainId: number): Promise<void> {
  await db.transaction(async (tx) => {
    for (const table of ['indexer_transfers', 'indexer_balances', 'indexer_cursors', 'indexer_blocks', 'indexer_backfills']) {
      await tx.query(`DELETE FROM ${table} WHERE chain_id = $1`, [chainId]);
    }
    await forgetUnreadBlocks(tx, chainId, 'indexer');
  });
}
