import { prepared, type Db, type Queryable } from '../../store/db.ts';
import { QueueFull, normalise, type MetaTxnRow } from '../store.ts';
import { fromJson, toJson, type Precondition } from './conditions.ts';

/** What a waiting meta-transaction waits for (written with its meta_txns row, in the same transaction). */
export interface NewWait {
  conditions: Precondition[];
  deadline: Date;
  quote: string | null;
}

/** The precondition pool of a chain and the shares in it (config: maxPendingPreconditions and the two below it). */
export interface WaitCaps {
  max: number;
  /** The sender's project; null without an access key. */
  projectId: number | null;
  perProject: number;
  /** What every keyless caller together may hold. */
  anonymous: number;
}

export interface Waiting {
  row: MetaTxnRow;
  conditions: Precondition[];
  deadline: Date;
  quote: string | null;
  expired: boolean;
}

/** How many meta-transactions of a chain wait on preconditions now (RuntimeStatus `queue.waiting`). */
export async function waitingCount(db: Db, chainId: number): Promise<number> {
  const r = await db.query<{ n: string }>(`SELECT count(*)::text AS n FROM meta_txns WHERE chain_id = $1 AND status = 'PENDING_PRECONDITION'`, [chainId]);
  return Number(r.rows[0].n);
}

export function waitRepo(db: Db) {
  return {
    /**
     * Called inside the intake transaction that inserts the PENDING_PRECONDITION row (which holds the
     * chain's intake lock, so concurrent sends cannot all pass the caps); throws QueueFull past the chain's
     * pool, the caller's project share, or — without an access key — the keyless share. Keyless callers
     * share one small part of the pool, so they can never crowd out the projects (issue 29).
     */
    async insert(q: Queryable, chainId: number, metaTxnId: string, w: NewWait, caps: WaitCaps) {
      const r = await q.query<{ total: string; mine: string }>(
        `SELECT count(*)::text AS total, count(*) FILTER (WHERE project_id IS NOT DISTINCT FROM $2::bigint)::text AS mine
         FROM meta_txns WHERE chain_id = $1 AND status = 'PENDING_PRECONDITION'`,
        [chainId, caps.projectId],
      );
      // The row being inserted is counted already.
      const total = Number(r.rows[0].total);
      const mine = Number(r.rows[0].mine);
      if (total > caps.max) throw new QueueFull(`the relayer already has ${caps.max} meta-transactions waiting on preconditions on this chain; send it once they hold, or later`);
      if (caps.projectId == null && mine > caps.anonymous) {
        throw new QueueFull(
          `callers without an access key already have ${caps.anonymous} meta-transactions waiting on preconditions on this chain (their share); send it once they hold, with an access key, or later`,
        );
      }
      if (caps.projectId != null && mine > caps.perProject) {
        throw new QueueFull(`the project already has ${caps.perProject} meta-transactions waiting on preconditions on this chain (its share); send it once they hold, or later`);
      }
      // A DROPPED meta-transaction sent again starts over under the same id.
      await q.query('DELETE FROM meta_txn_waits WHERE chain_id = $1 AND meta_txn_id = $2', [chainId, metaTxnId]);
      await q.query('INSERT INTO meta_txn_waits (chain_id, meta_txn_id, conditions, deadline, quote) VALUES ($1, $2, $3, $4, $5)', [chainId, metaTxnId, toJson(w.conditions), w.deadline, w.quote]);
    },

    /** Every meta-transaction of a chain still waiting, oldest first, with whether its deadline has passed (by the database's clock). */
    async waiting(chainId: number, limit: number): Promise<Waiting[]> {
      const r = await db.query<Record<string, unknown> & { w_conditions: string; w_deadline: string | Date; w_quote: string | null; w_expired: boolean }>(
        prepared(`SELECT m.*, w.conditions AS w_conditions, w.deadline AS w_deadline, w.quote AS w_quote, (w.deadline <= now()) AS w_expired
         FROM meta_txns m JOIN meta_txn_waits w ON w.chain_id = m.chain_id AND w.meta_txn_id = m.id
         WHERE m.chain_id = $1 AND m.status = 'PENDING_PRECONDITION' ORDER BY m.queued_at, m.id LIMIT $2`),
        [chainId, limit],
      );
      return r.rows.map(({ w_conditions, w_deadline, w_quote, w_expired, ...row }) => ({
        row: normalise(row),
        conditions: fromJson(w_conditions),
        deadline: new Date(w_deadline),
        quote: w_quote,
        expired: w_expired === true,
      }));
    },
  };
}
export type WaitRepo = ReturnType<typeof waitRepo>;
