import type { Queryable } from '../../store/db.ts';

/*
 * Which meta-transactions a prune may delete (relayer/prune.ts): the rule as one subquery, and the reads
 * that take and count them. Reads only; the deletion itself is store/writes.ts's (deleteMetaTxns).
 */

/**
 * The meta-transactions a prune may delete (relayer/prune.ts), as a subquery of (chain_id, id, sender,
 * txn_nonce) with the cutoff in $1: final, last changed before the cutoff, confirmed when mined (a reorg
 * within the confirmations may still reopen it), no attempt still open at its slot, and every
 * meta-transaction queued in the same project and UTC hour prunable too (the usage roll-up recounts an
 * hour whole from meta_txns when one of its rows changes: relayer/usage.ts).
 */
export const PRUNABLE_META_SQL = `SELECT m.chain_id, m.id, m.sender, m.txn_nonce, m.updated_at FROM meta_txns m
  WHERE m.status IN ('SUCCEEDED', 'PARTIALLY_FAILED', 'FAILED', 'DROPPED') AND m.updated_at < $1 AND (m.confirmed OR m.block_number IS NULL)
    AND NOT EXISTS (SELECT 1 FROM relay_txs t WHERE t.chain_id = m.chain_id AND t.sender = m.sender AND t.nonce = m.txn_nonce AND t.status IN ('PENDING', 'MINED'))
    AND NOT EXISTS (SELECT 1 FROM meta_txns o WHERE o.project_id = m.project_id AND o.chain_id = m.chain_id
      AND o.queued_at >= to_timestamp(floor(extract(epoch FROM m.queued_at) / 3600) * 3600) AND o.queued_at < to_timestamp(floor(extract(epoch FROM m.queued_at) / 3600) * 3600 + 3600)
      AND (o.status NOT IN ('SUCCEEDED', 'PARTIALLY_FAILED', 'FAILED', 'DROPPED') OR o.updated_at >= $1))`;

/** Up to `limit` prunable meta-transactions, oldest change first, locked for the caller's transaction (rows another holds are passed over). */
export async function claimPrunable(tx: Queryable, cutoff: Date, limit: number): Promise<Array<{ chain_id: number; id: string }>> {
  const r = await tx.query<{ chain_id: number | string; id: string }>(
    `SELECT chain_id, id FROM meta_txns WHERE (chain_id, id) IN (SELECT p.chain_id, p.id FROM (${PRUNABLE_META_SQL}) p ORDER BY p.updated_at LIMIT $2)
      FOR UPDATE SKIP LOCKED`,
    [cutoff, limit],
  );
  return r.rows.map((x) => ({ chain_id: Number(x.chain_id), id: x.id }));
}

/** How many meta-transactions and bundles a prune at `cutoff` would delete (--dry-run). */
export async function countPrunable(q: Queryable, cutoff: Date): Promise<{ metaTxns: number; bundles: number }> {
  const r = await q.query<{ m: string; b: string }>(
    `WITH p AS (${PRUNABLE_META_SQL})
     SELECT (SELECT count(*) FROM p)::text AS m, (SELECT count(*) FROM meta_txn_bundles b JOIN p ON b.chain_id = p.chain_id AND b.meta_txn_id = p.id)::text AS b`,
    [cutoff],
  );
  return { metaTxns: Number(r.rows[0]!.m), bundles: Number(r.rows[0]!.b) };
}
