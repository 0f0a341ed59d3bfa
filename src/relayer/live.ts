/**
 * Statuses whose wallet nonces are spoken for: a new bundle may not reuse them. They are also what counts
 * against a caller's share of the queue, so a meta-transaction waiting on preconditions counts too.
 */
export const LIVE_STATUSES = ['QUEUED', 'SENT', 'PENDING_PRECONDITION'];
/**
 * The live statuses written into the SQL, not passed as a parameter: the partial indexes over live rows
 * (migration 0027) are usable only when the planner can see the statement's statuses are theirs.
 */
export const LIVE_IN = `(${LIVE_STATUSES.map((x) => `'${x}'`).join(', ')})`;
