import type { Queryable } from '../store/db.ts';
import { toProject, type Project } from '../store/projects.ts';
import { normalise, type MetaTxnRow } from '../relayer/store.ts';

/** The console's reads that no other part of the service needs (its writes go through the tables' own modules). */

export interface ConsoleProject extends Project {
  liveKeys: number;
}

interface ProjectRow {
  id: number | string;
  name: string;
  created_at: Date | string;
  archived_at: Date | string | null;
  allowed_chain_ids: (number | string)[] | null;
  live_keys: number | string;
}

const toConsoleProject = (r: ProjectRow): ConsoleProject => ({ ...toProject(r), liveKeys: Number(r.live_keys) });

const PROJECT_SELECT = `SELECT p.*, (SELECT count(*) FROM access_keys k WHERE k.project_id = p.id AND k.revoked_at IS NULL) AS live_keys FROM projects p`;

export interface ActivityRow extends MetaTxnRow {
  nonce_space: string | null;
  nonce: string | null;
  /** The queued time in microseconds since the epoch (exact, unlike a Date): the cursor's first part. */
  queued_us: string;
}

/** What the activity list keeps: a network, a status, a wallet, an access key, a window of queued time [from, to). */
export interface ActivityFilter {
  chainId?: number;
  status?: string;
  wallet?: string;
  keyId?: number;
  from?: Date;
  to?: Date;
}

/** Where a page of activity resumes: the last row of the page before. */
export interface ActivityCursor {
  queuedUs: string;
  chainId: number;
  id: string;
}

const QUEUED_US = '(extract(epoch FROM m.queued_at) * 1000000)::bigint';
/** The filter's SQL, its six parameters numbered from $n. */
const activityFilter = (n: number) =>
  [
    `($${n}::bigint IS NULL OR m.chain_id = $${n})`,
    `($${n + 1}::text IS NULL OR m.status = $${n + 1})`,
    `($${n + 2}::text IS NULL OR lower(m.wallet) = $${n + 2})`,
    `($${n + 3}::bigint IS NULL OR m.key_id = $${n + 3})`,
    `($${n + 4}::timestamptz IS NULL OR m.queued_at >= $${n + 4})`,
    `($${n + 5}::timestamptz IS NULL OR m.queued_at < $${n + 5})`,
  ].join(' AND ');
const filterParams = (f: ActivityFilter) => [f.chainId ?? null, f.status ?? null, f.wallet?.toLowerCase() ?? null, f.keyId ?? null, f.from ?? null, f.to ?? null];

export interface RelayTxRow {
  id: number;
  sender: string;
  nonce: number;
  hash: string;
  gas_limit: number;
  max_fee: string | null;
  max_priority_fee: string | null;
  gas_price: string | null;
  status: string;
  error: string | null;
  created_at: Date;
  broadcast_at: Date | null;
  mined_block: number | null;
}

export function consoleQueries(db: Queryable) {
  return {
    async projects(): Promise<ConsoleProject[]> {
      const r = await db.query<ProjectRow>(`${PROJECT_SELECT} ORDER BY p.id`);
      return r.rows.map(toConsoleProject);
    },

    async project(id: number): Promise<ConsoleProject | null> {
      const r = await db.query<ProjectRow>(`${PROJECT_SELECT} WHERE p.id = $1`, [id]);
      return r.rows[0] ? toConsoleProject(r.rows[0]) : null;
    },

    /**
     * A project's meta-transactions, newest first (queued time, then network and id: a total order a
     * cursor can resume), with the first bundle's nonce. `after` is the cursor: the last row of the page before.
     */
    async metaTxns(projectId: number, f: ActivityFilter, after: ActivityCursor | null, limit: number, offset = 0): Promise<ActivityRow[]> {
      const r = await db.query<Record<string, unknown>>(
        `SELECT m.*, b.nonce_space::text AS nonce_space, b.nonce::text AS nonce, ${QUEUED_US} AS queued_us FROM meta_txns m
           LEFT JOIN LATERAL (SELECT nonce_space, nonce FROM meta_txn_bundles x WHERE x.chain_id = m.chain_id AND x.meta_txn_id = m.id ORDER BY bundle_id LIMIT 1) b ON true
          WHERE m.project_id = $1 AND ${activityFilter(2)}
            AND ($8::bigint IS NULL OR (${QUEUED_US}, m.chain_id, m.id) < ($8::bigint, $9::bigint, $10::text))
          ORDER BY m.queued_at DESC, m.chain_id DESC, m.id DESC OFFSET $11 LIMIT $12`,
        [projectId, ...filterParams(f), after?.queuedUs ?? null, after?.chainId ?? null, after?.id ?? null, offset, limit],
      );
      // normalise keeps the joined nonce columns as they are.
      return r.rows.map((x) => normalise(x) as ActivityRow);
    },

    /** How many of a project's meta-transactions the filter keeps, per status (the status filter itself aside, so each status shows its count). */
    async metaTxnCounts(projectId: number, f: ActivityFilter): Promise<Record<string, number>> {
      const r = await db.query<{ status: string; n: string }>(`SELECT m.status, count(*)::text AS n FROM meta_txns m WHERE m.project_id = $1 AND ${activityFilter(2)} GROUP BY m.status`, [
        projectId,
        ...filterParams({ ...f, status: undefined }),
      ]);
      return Object.fromEntries(r.rows.map((x) => [x.status, Number(x.n)]));
    },
    /**
     * Every signed transaction of a meta-transaction, in the order it was signed: those that name it, and
     * every attempt at the slot (sender, nonce) it is in now, which a batch shares with its other members.
     */
    async relayTxs(chainId: number, m: { id: string; sender: string | null; txn_nonce: number | null }): Promise<RelayTxRow[]> {
      const r = await db.query<Record<string, unknown>>(
        `SELECT id, sender, nonce, hash, gas_limit, max_fee::text, max_priority_fee::text, gas_price::text, status, error, created_at, broadcast_at, mined_block
           FROM relay_txs WHERE chain_id = $1 AND (meta_txn_id = $2 OR (sender = $3 AND nonce = $4)) ORDER BY id`,
        [chainId, m.id, m.sender, m.txn_nonce],
      );
      return r.rows.map((x) => ({
        ...x,
        id: Number(x.id),
        nonce: Number(x.nonce),
        gas_limit: Number(x.gas_limit),
        mined_block: x.mined_block == null ? null : Number(x.mined_block),
        created_at: new Date(x.created_at as string),
        broadcast_at: x.broadcast_at == null ? null : new Date(x.broadcast_at as string),
      })) as RelayTxRow[];
    },
  };
}
export type ConsoleQueries = ReturnType<typeof consoleQueries>;
