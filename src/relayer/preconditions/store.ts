import type { Db, Queryable } from '../../store/db.ts';
import { QueueFull, normalise, type MetaTxnRow } from '../store.ts';
import { fromJson, toJson, type Precondition } from './conditions.ts';

/** What a waiting meta-transaction waits for (written with its meta_txns row, in the same transaction). */
export interface NewWait {
  conditions: Precondition[];
  deadline: Date;
  quote: string | null;
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
     * chain's intake lock, so concurrent sends cannot all pass the cap); throws QueueFull past `max`.
     */
    async insert(q: Queryable, chainId: number, metaTxnId: string, w: NewWait, max: number) {
      const n = Number((await q.query<{ n: string }>(`SELECT count(*)::text AS n FROM meta_txns WHERE chain_id = $1 AND status = 'PENDING_PRECONDITION'`, [chainId])).rows[0].n);
      // The row being inserted is counted already.
      if (n > max) throw new QueueFull(`the relayer already has ${max} meta-transactions waiting on preconditions on this chain; send it once they hold, or later`);
      // A DROPPED meta-transaction sent again starts over under the same id.
      await q.query('DELETE FROM meta_txn_waits WHERE chain_id = $1 AND meta_txn_id = $2', [chainId, metaTxnId]);
      await q.query('INSERT INTO meta_txn_waits (chain_id, meta_txn_id, conditions, deadline, quote) VALUES ($1, $2, $3, $4, $5)', [
        chainId,
        metaTxnId,
        toJson(w.conditions),
        w.deadline,
        w.quote,
      ]);
    },

    /** Every meta-transaction of a chain still waiting, oldest first, with whether its deadline has passed (by the database's clock). */
    async waiting(chainId: number, limit: number): Promise<Waiting[]> {
      const r = await db.query<Record<string, unknown> & { w_conditions: string; w_deadline: string | Date; w_quote: string | null; w_expired: boolean }>(
        `SELECT m.*, w.conditions AS w_conditions, w.deadline AS w_deadline, w.quote AS w_quote, (w.deadline <= now()) AS w_expired
         FROM meta_txns m JOIN meta_txn_waits w ON w.chain_id = m.chain_id AND w.meta_txn_id = m.id
         WHERE m.chain_id = $1 AND m.status = 'PENDING_PRECONDITION' ORDER BY m.queued_at, m.id LIMIT $2`,
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
