import type { Queryable } from '../store/db.ts';
import type { DocumentChange } from '../metadata/index.ts';
import { appendEventsCounting, type EventBell } from './outbox.ts';

/**
 * The token store's hook: one `token.metadata_updated` per token whose stored document changed (a
 * re-read that finds the same document writes none), on the transaction that stored it. Token
 * metadata is the deployment's, not a project's: every subscribed endpoint gets it.
 */
export function tokenDocumentEvents(bell: EventBell) {
  return async (q: Queryable, changes: DocumentChange[]) => {
    const { deliveries } = await appendEventsCounting(
      q,
      changes.map((c) => ({
        type: 'token.metadata_updated' as const,
        chainId: c.chainId,
        projectId: null,
        subject: `token:${c.chainId}:${c.contract}:${c.tokenId}`,
        data: { chainId: c.chainId, contractAddress: c.contract, tokenId: c.tokenId, oldContentHash: c.oldHash, newContentHash: c.newHash, metadata: c.metadata },
      })),
    );
    bell.ring(deliveries > 0);
  };
}
