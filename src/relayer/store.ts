import type { Db } from '../store/db.ts';
import { intakeGroups, type IntakeGroupOptions, type MetaTxnIntake } from './store/intake-group.ts';
import { metaTxnReads, type MetaTxnReads } from './store/reads.ts';
import { metaTxnWrites, type MetaTxnWrites } from './store/writes.ts';

/*
 * The meta-transactions' store (meta_txns and meta_txn_bundles): one repository the relayer's stages are
 * given, declared here as what it offers and put together from its parts in store/: the reads
 * (store/reads.ts), the writes, the tables' one writer (store/writes.ts), intake in groups
 * (store/intake-group.ts) and the prune's rule (store/prunable.ts). Callers import from this file only.
 */

export { LIVE_IN, LIVE_STATUSES } from './live.ts';
export { QueueFull, type QueueLimits } from './queue-limits.ts';
export * from './meta-txn-rows.ts';
export { GROUP_KNOWN_SQL } from './store/intake-group.ts';
export { FIND_MANY_SQL } from './store/reads.ts';
export { deleteMetaTxns } from './store/writes.ts';
export { PRUNABLE_META_SQL, claimPrunable, countPrunable } from './store/prunable.ts';

/** What the relayer does with its meta-transactions: admit them (intake), read them, and change them as they are sent and settled. */
export interface MetaTxnRepo extends MetaTxnIntake, MetaTxnReads, MetaTxnWrites {}

/** The repository on `db`; `onStatus` hears of every status change (and every insert), on the transaction that made it. */
export function metaTxnRepo(db: Db, opts: IntakeGroupOptions = {}): MetaTxnRepo {
  return { ...intakeGroups(db, opts), ...metaTxnReads(db), ...metaTxnWrites(db, opts.onStatus) };
}
