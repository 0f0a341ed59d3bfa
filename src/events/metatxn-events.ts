import type { Queryable, Tx } from '../store/db.ts';
import { receiptWire, type MetaTxnRepo, type MetaTxnRow, type StatusCause, type StatusKnown } from '../relayer/index.ts';
import { appendEventsAtCommit, appendEventsCounting, type EventBell } from './outbox.ts';

/**
 * The relayer's status hook: one `metatxn.status` event per written status, on the relayer's own
 * transaction. Each carries the whole current state (the receipt GetMetaTxnReceipt would answer), so
 * a receiver that gets them late or twice still ends up right.
 */
export function metaTxnStatusEvents(metaTxns: () => MetaTxnRepo, bell: EventBell) {
  return async (q: Queryable, rows: MetaTxnRow[], cause?: StatusCause, known?: StatusKnown) => {
    if (rows.length === 0) return;
    const tx = isTx(q) ? q : undefined;
    const committing: Array<Promise<{ deliveries: number } | undefined>> = [];
    let deliveries = 0;
    const byChain = new Map<number, MetaTxnRow[]>();
    for (const r of rows) byChain.set(r.chain_id, [...(byChain.get(r.chain_id) ?? []), r]);
    for (const [chainId, list] of byChain) {
      // Given by an insert, which has just written them; read back otherwise.
      const given = known?.bundles;
      const bundles =
        given && list.every((r) => given.has(r.id))
          ? given
          : await metaTxns().bundlesOfMany(
              chainId,
              list.map((r) => r.id),
              q,
            );
      const events = list.map((r) => ({
        type: 'metatxn.status' as const,
        chainId,
        projectId: r.project_id,
        subject: `metatxn:${chainId}:${r.id}`,
        data: {
          chainId,
          metaTxnId: r.id,
          status: r.status,
          // Set when the status is written again for another reason than a new status: 'replaced' (a
          // fee-bumped transaction, new txnHash), 'replacement_refused' (back to the previous hash), 'reorged'.
          cause: cause ?? null,
          txnHash: r.txn_hash ?? null,
          wallet: r.wallet,
          sponsored: r.sponsored,
          attempts: r.attempts,
          sender: r.sender,
          queuedAt: r.queued_at?.toISOString() ?? null,
          sentAt: r.sent_at?.toISOString() ?? null,
          minedAt: r.mined_at?.toISOString() ?? null,
          receipt: receiptWire(r, bundles.get(r.id) ?? []),
        },
      }));
      // On a transaction, with its COMMIT: nothing before it reads them back, and the awaited insert was
      // one of the intake's round trips while it held its connection (docs/performance-log.md, "30 Nov
      // 2026 (ninth session)"). The bell rings once they are committed, when readers can see them.
      if (tx) committing.push(appendEventsAtCommit(tx, events));
      else deliveries += (await appendEventsCounting(q, events)).deliveries;
    }
    if (tx) {
      void Promise.all(committing).then((all) => {
        const committed = all.filter((x) => x !== undefined);
        if (committed.length) bell.ring(committed.some((x) => x.deliveries > 0));
      });
    } else bell.ring(deliveries > 0);
  };
}

const isTx = (q: Queryable): q is Tx => typeof (q as Partial<Tx>).atCommit === 'function';
