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
  /** The sender's client network (null: none known) and what one may hold of its project's share (or the keyless share). */
  clientNet: string | null;
  perClient: number;
  /** The meta-transaction's wallet and what one may hold of that share. */
  wallet: string;
  perWallet: number;
}

/** Which share of the pool refused a waiting meta-transaction (metarelay_relayer_precondition_refused_total). */
export type WaitShare = 'chain' | 'keyless' | 'project' | 'client' | 'wallet';

/** QueueFull, saying which share was full. */
export class WaitShareFull extends QueueFull {
  constructor(
    readonly share: WaitShare,
    message: string,
  ) {
    super(message);
  }
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
     * pool, the caller's project share, or — without an access key — the keyless share, or the share of
     * it its client network or its wallet may hold. Keyless callers share one small part of the pool, so
     * they can never crowd out the projects (issue 29); a project's key is public, so one client of it
     * fills only its own part of the project's share (issue 54). The pool is at most
     * maxPendingPreconditions rows: counting them is a bounded read.
     */
    async insert(q: Queryable, chainId: number, metaTxnId: string, w: NewWait, caps: WaitCaps) {
      const r = await q.query<{ total: string; mine: string; client: string; wallet: string }>(
        `SELECT count(*)::text AS total, count(*) FILTER (WHERE project_id IS NOT DISTINCT FROM $2::bigint)::text AS mine,
           count(*) FILTER (WHERE project_id IS NOT DISTINCT FROM $2::bigint AND client_net = $3)::text AS client,
           count(*) FILTER (WHERE project_id IS NOT DISTINCT FROM $2::bigint AND lower(wallet) = lower($4))::text AS wallet
         FROM meta_txns WHERE chain_id = $1 AND status = 'PENDING_PRECONDITION'`,
        [chainId, caps.projectId, caps.clientNet, caps.wallet],
      );
      // The row being inserted is counted already.
      const total = Number(r.rows[0].total);
      const mine = Number(r.rows[0].mine);
      const full = (share: WaitShare, who: string, n: number, why: string, then = 'or later') =>
        new WaitShareFull(share, `${who} already ${who.startsWith('callers') ? 'have' : 'has'} ${n} meta-transactions waiting on preconditions on this chain${why}; send it once they hold, ${then}`);
      if (total > caps.max) throw full('chain', 'the relayer', caps.max, '');
      if (caps.projectId == null && mine > caps.anonymous) throw full('keyless', 'callers without an access key', caps.anonymous, ' (their share)', 'with an access key, or later');
      if (caps.projectId != null && mine > caps.perProject) throw full('project', 'the project', caps.perProject, ' (its share)');
      const of = caps.projectId == null ? "the keyless callers' share" : "its project's share";
      if (caps.clientNet != null && Number(r.rows[0].client) > caps.perClient) {
        throw full('client', `client network ${caps.clientNet}`, caps.perClient, ` (its part of ${of}: pendingPreconditionsPerClientPercent)`);
      }
      if (Number(r.rows[0].wallet) > caps.perWallet) throw full('wallet', `wallet ${caps.wallet}`, caps.perWallet, ` (its part of ${of}: pendingPreconditionsPerWalletPercent)`);
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

/** Deletes what these meta-transactions waited for, if anything is left of it (a prune's batch). */
export async function deleteWaitsOf(tx: Queryable, chainIds: number[], ids: string[]): Promise<number> {
  const r = await tx.query('DELETE FROM meta_txn_waits WHERE (chain_id, meta_txn_id) IN (SELECT * FROM unnest($1::bigint[], $2::text[]))', [chainIds, ids]);
  return r.rowCount;
}
