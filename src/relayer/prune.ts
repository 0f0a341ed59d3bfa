import type { Db } from '../store/db.ts';
import { countPrunableAttempts, deleteAttemptsOf, pruneLooseAttempts } from './engine/attempts.ts';
import { countChargesOf, deleteChargesOf } from './intake/spend-caps.ts';
import { deleteWaitsOf } from './preconditions/store.ts';
import { PRUNABLE_META_SQL, claimPrunable, countPrunable, deleteMetaTxns } from './store.ts';
import { metaTxnUsage } from './usage.ts';

/**
 * The youngest cutoff a prune accepts: past the usage roll-up's look-back (it recounts an hour from the
 * rows), and far past any chain's confirmations, so nothing a reorg may still reopen is deleted.
 */
export const PRUNE_MIN_AGE_MS = 3_600_000;

export interface PruneCounts {
  metaTxns: number;
  bundles: number;
  attempts: number;
  charges: number;
}

export interface PruneOptions {
  /** Meta-transactions last changed before this are pruned (never within PRUNE_MIN_AGE_MS of now). */
  cutoff: Date;
  /** Meta-transactions per transaction: each batch's row locks are held for one short transaction. */
  batch: number;
  dryRun?: boolean;
  /** Told each committed batch's counts (progress). */
  onBatch?: (counts: PruneCounts) => void;
}

/**
 * Deletes finished meta-transactions and what hangs off them (bundles, attempts, sponsorship charges,
 * precondition waits), batch by batch, each batch one transaction that locks its rows SKIP LOCKED (a
 * row another transaction holds is left for the next prune). Nothing live is touched: see
 * PRUNABLE_META_SQL (store.ts) and the attempts' rule (attempts.ts). What is kept: the project balances'
 * ledger and holds (money, audited by their own rows), bars, the usage roll-ups and the events outbox.
 * The usage roll-up runs first, so the pruned rows are counted in meta_txn_usage_hourly.
 */
export async function pruneFinished(db: Db, o: PruneOptions): Promise<PruneCounts> {
  if (Date.now() - o.cutoff.getTime() < PRUNE_MIN_AGE_MS) throw new RangeError(`the cutoff must be at least ${PRUNE_MIN_AGE_MS / 60_000} minutes ago`);
  if (o.dryRun) {
    const [m, attempts, charges] = await Promise.all([countPrunable(db, o.cutoff), countPrunableAttempts(db, o.cutoff, PRUNABLE_META_SQL), countChargesOf(db, o.cutoff, PRUNABLE_META_SQL)]);
    return { ...m, attempts, charges };
  }
  await metaTxnUsage(db).rollUp();
  const total: PruneCounts = { metaTxns: 0, bundles: 0, attempts: 0, charges: 0 };
  // Counted once committed.
  const add = (c: PruneCounts) => {
    for (const k of Object.keys(total) as Array<keyof PruneCounts>) total[k] += c[k];
    o.onBatch?.(c);
  };
  for (;;) {
    const done = await db.transaction(async (tx) => {
      const rows = await claimPrunable(tx, o.cutoff, o.batch);
      if (!rows.length) return { rows: 0, counts: undefined };
      const chainIds = rows.map((r) => r.chain_id);
      const ids = rows.map((r) => r.id);
      const attempts = await deleteAttemptsOf(tx, chainIds, ids);
      const charges = await deleteChargesOf(tx, chainIds, ids);
      await deleteWaitsOf(tx, chainIds, ids);
      const m = await deleteMetaTxns(tx, chainIds, ids);
      return { rows: rows.length, counts: { ...m, attempts, charges } };
    });
    if (done.counts) add(done.counts);
    if (done.rows < o.batch) break;
  }
  // Attempts no row names now (batches, fillers, those of the rows just pruned).
  for (;;) {
    const n = await db.transaction((tx) => pruneLooseAttempts(tx, o.cutoff, o.batch));
    if (n) add({ metaTxns: 0, bundles: 0, attempts: n, charges: 0 });
    if (n < o.batch) break;
  }
  return total;
}
