import type { Queryable } from '../../store/db.ts';
import type { MetaTxnRow } from '../meta-txn-rows.ts';
import { attemptsByHash, unmine, type Attempt } from './attempts.ts';
import type { EngineContext } from './context.ts';

/** What settling needs of the transaction that won a slot. */
export type Winner = Pick<Attempt, 'hash' | 'kind' | 'meta_txn_id' | 'data' | 'sender' | 'nonce'>;

/**
 * Of the meta-transactions recorded at a slot, those whose bundle `winner` carries. A slot can hold more
 * than one over time (a reorg deeper than the confirmations, a nonce used again after a refusal), so the
 * same (sender, nonce) is not enough: a receipt speaks only for the meta-transaction of its own attempt
 * (`meta_txn_id`), or for a batch member whose latest attempt is the same call at that slot (a
 * replacement changes only the fees). A self-transfer carries no bundle: it frees the slot's SENT ones.
 */
export async function carriedBy(q: Queryable, chainId: number, metas: readonly MetaTxnRow[], winnerOf: (m: MetaTxnRow) => Winner | undefined): Promise<MetaTxnRow[]> {
  const batchHashes = metas.filter((m) => m.batch_index != null && m.txn_hash).map((m) => m.txn_hash!);
  const latest = new Map((await attemptsByHash(q, chainId, batchHashes)).map((a) => [a.hash.toLowerCase(), a]));
  return metas.filter((m) => {
    const w = winnerOf(m);
    if (!w) return false;
    if (w.kind === 'filler') return m.status === 'SENT';
    if (w.kind === 'meta') return w.meta_txn_id === m.id;
    const own = m.batch_index != null && m.txn_hash ? latest.get(m.txn_hash.toLowerCase()) : undefined;
    return own != null && own.kind === 'batch' && own.sender === w.sender && own.nonce === w.nonce && own.data.toLowerCase() === w.data.toLowerCase();
  });
}

/**
 * A reorg took a slot's winning transaction off the chain: the attempt waits again as if broadcast at
 * `head` (the sweep re-broadcasts its signed bytes while the pool lacks it), and the meta-transactions
 * it carries go back to SENT ('reorged'), to be settled again from its next receipt. Returns their ids.
 */
export async function reopenSlot(d: EngineContext, tx: Queryable, winner: Winner, head: number): Promise<string[]> {
  await unmine(tx, d.chainId, winner.hash, head);
  const metas = await carriedBy(tx, d.chainId, await d.metaTxns.atSlots(tx, d.chainId, [winner]), () => winner);
  for (const m of metas) {
    await d.metaTxns.setStatus(
      tx,
      d.chainId,
      m.id,
      { status: 'SENT', revert_reason: null, block_number: null, gas_used: null, gas_price: null, receipt: null, mined_at: null, confirmed: false, txn_hash: winner.hash },
      undefined,
      'reorged',
    );
  }
  return metas.map((m) => m.id);
}
