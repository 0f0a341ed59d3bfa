import { z } from 'zod';
import type { Queryable } from '../../store/db.ts';
import { askAgain, every } from '../../util/ask-again.ts';

export type TaskKind = 'tokens' | 'contracts';
export type TaskStatus = 'QUEUED' | 'PAUSED' | 'FAILED' | 'DONE';

const ts = z.union([z.date(), z.string()]).transform((v) => new Date(v));

const TaskRowSchema = z.object({
  id: z.coerce.number(),
  project_id: z.coerce.number().nullable(),
  kind: z.enum(['tokens', 'contracts']),
  chain_id: z.coerce.number(),
  contract_address: z.string().nullable(),
  status: z.enum(['QUEUED', 'PAUSED', 'FAILED', 'DONE']),
  cancelled: z.boolean(),
  priority: z.coerce.number(),
  refresh_all: z.boolean(),
  only_new: z.boolean(),
  enumerated: z.boolean(),
  source: z.string(),
  total: z.coerce.number(),
  succeeded: z.coerce.number(),
  failed: z.coerce.number(),
  tries: z.coerce.number(),
  last_error: z.string().nullable(),
  created_at: ts,
  updated_at: ts,
  last_ran_at: ts.nullable(),
  finished_at: ts.nullable(),
});
export type TaskRow = z.infer<typeof TaskRowSchema>;

const ItemSchema = z.object({
  task_id: z.coerce.number(),
  item: z.string(),
  chain_id: z.coerce.number(),
  contract_address: z.string(),
  status: z.string(),
  attempts: z.coerce.number(),
  failure_reason: z.string().nullable(),
});
export type TaskItem = z.infer<typeof ItemSchema>;

export interface NewTask {
  projectId: number | null;
  kind: TaskKind;
  chainId: number;
  contract: string | null;
  items: { item: string; contract: string }[];
  priority: number;
  refreshAll?: boolean;
  onlyNew?: boolean;
  source?: string;
}

/** One finished attempt of one item; `retryAt` set means "try again then". */
export interface ItemOutcome {
  taskId: number;
  item: string;
  contract: string;
  ok: boolean;
  reason?: string;
  retryAt?: Date;
}

/** The advisory lock claims take turns on (any fixed key: "mrcl" in ASCII). */
const CLAIM_LOCK_KEY = 0x6d72636c;
/** How often a claim asks for its turn (20 ms apart) before it gives up on it for this turn. */
const CLAIM_TRIES = 5;
/** Another claim holds the turn (thrown to ask again). */
const NOT_OUR_TURN = Symbol('not our turn');

/** Items inserted at once from which the table's statistics are refreshed (see afterBulkInsert). */
const ANALYZE_AFTER_ITEMS = 1_000;

/** Called with the tasks that just reached a final state (DONE or FAILED), once each, on the transaction that ended them. */
export type TaskFinishedHook = (q: Queryable, tasks: TaskRow[]) => Promise<void>;

/** What a task list keeps: a project's tasks (null: all), of a status. */
export interface TaskFilter {
  projectId?: number | null;
  status?: string;
}
const TASK_FILTER = '($1::bigint IS NULL OR project_id = $1) AND ($2::text IS NULL OR status = $2)';

export function taskStore(db: Queryable & { kind?: 'pglite' | 'postgres'; transaction?: <T>(fn: (tx: Queryable) => Promise<T>) => Promise<T> }, opts: { onFinished?: TaskFinishedHook } = {}) {
  const parseTask = (r: unknown) => TaskRowSchema.parse(r);
  /** Tasks newest first, before a task id (the cursor), of a project and a status. */
  const page = async (f: TaskFilter, before: number | undefined, limit: number): Promise<TaskRow[]> => {
    const res = await db.query(`SELECT * FROM tasks WHERE ${TASK_FILTER} AND ($3::bigint IS NULL OR id < $3) ORDER BY id DESC LIMIT $4`, [
      f.projectId ?? null,
      f.status ?? null,
      before ?? null,
      limit,
    ]);
    return res.rows.map(parseTask);
  };
  const inTx = <T>(fn: (q: Queryable) => Promise<T>): Promise<T> => (db.transaction ? db.transaction(fn) : fn(db));
  /**
   * Marks final tasks among `ids` announced and passes them to the hook. The flag flips under the row
   * lock, so however many paths (or processes) end a task, one of them announces it.
   */
  const announce = async (q: Queryable, ids: number[]) => {
    if (!opts.onFinished || !ids.length) return;
    const r = await q.query(`UPDATE tasks SET finish_announced = true WHERE id = ANY($1::bigint[]) AND status IN ('DONE', 'FAILED') AND NOT finish_announced RETURNING *`, [ids]);
    if (r.rows.length) await opts.onFinished(q, r.rows.map(parseTask));
  };
  /** Runs a write that may end tasks and announces those it ended, in one transaction. */
  const ending = async <T>(fn: (q: Queryable) => Promise<T>, ids: (out: T) => number[]): Promise<T> => {
    if (!opts.onFinished) return fn(db);
    return inTx(async (q) => {
      const out = await fn(q);
      await announce(q, ids(out));
      return out;
    });
  };

  /** Inserts the items (a repeated one once) and returns how many rows that made. */
  const insertItems = async (q: Queryable, taskId: number, chainId: number, priority: number, items: { item: string; contract: string }[]): Promise<number> => {
    let inserted = 0;
    for (let i = 0; i < items.length; i += 5_000) {
      const chunk = items.slice(i, i + 5_000);
      const res = await q.query<{ n: number | string }>(
        `WITH ins AS (
           INSERT INTO task_items (task_id, item, chain_id, contract_address, priority)
           SELECT $1, x.item, $2, x.contract, $3 FROM jsonb_to_recordset($4::jsonb) AS x(item text, contract text)
           ON CONFLICT DO NOTHING RETURNING 1)
         SELECT count(*) AS n FROM ins`,
        [taskId, chainId, priority, JSON.stringify(chunk)],
      );
      inserted += Number(res.rows[0].n);
    }
    return inserted;
  };

  /**
   * Refreshes the planner's statistics after many items arrive at once. The claim query walks the
   * claim index in order and stops after `limit` rows, but only when the planner knows many items
   * are queued: with statistics from an emptier table (PGlite never analyses by itself, PostgreSQL's
   * autovacuum only after a while) it reads and sorts every queued item on each claim instead, which
   * made claims of a 10 000-item task cost 20-40 ms each rather than 2-3 ms. Best effort: the queue
   * works without it, only slower. Not inside a caller's transaction (a store without transaction()),
   * where a failure would abort the caller's work.
   */
  const afterBulkInsert = async (count: number) => {
    if (count < ANALYZE_AFTER_ITEMS || !db.transaction) return;
    await db.query('ANALYZE task_items').catch(() => undefined);
  };

  /** The claim itself (see claim()). */
  const claimIn = async (q: Queryable, owner: string, limit: number, leaseSec: number): Promise<TaskItem[]> => {
    const res = await q.query(
      `WITH c AS (
         SELECT task_id, item FROM task_items i
          WHERE status = 'QUEUED' AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())
            -- The same token held by another worker for another task: that work is joined, not repeated.
            AND NOT EXISTS (SELECT 1 FROM task_items j
                             WHERE j.chain_id = i.chain_id AND j.contract_address = i.contract_address AND j.item = i.item
                               AND j.status = 'QUEUED' AND j.lease_until > now() AND j.task_id <> i.task_id)
          ORDER BY priority, next_attempt_at, task_id
          LIMIT $1 FOR UPDATE SKIP LOCKED)
       UPDATE task_items i SET lease_owner = $2, lease_until = now() + make_interval(secs => $3),
              attempts = i.attempts + 1, updated_at = now()
         FROM c WHERE i.task_id = c.task_id AND i.item = c.item
       RETURNING i.task_id, i.item, i.chain_id, i.contract_address, i.status, i.attempts, i.failure_reason`,
      [limit, owner, leaseSec],
    );
    return res.rows.map((r) => ItemSchema.parse(r));
  };

  return {
    async create(t: NewTask): Promise<TaskRow> {
      const run = async (q: Queryable) => {
        const res = await q.query(
          `INSERT INTO tasks (project_id, kind, chain_id, contract_address, priority, refresh_all, only_new, enumerated, source, total)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING *`,
          [t.projectId, t.kind, t.chainId, t.contract, t.priority, !!t.refreshAll, !!t.onlyNew, !t.refreshAll, t.source ?? 'api', t.items.length],
        );
        const task = parseTask(res.rows[0]);
        const inserted = await insertItems(q, task.id, t.chainId, t.priority, t.items);
        if (inserted !== task.total) {
          // `total` is what complete() counts towards: the rows there are, not the ids asked for.
          await q.query('UPDATE tasks SET total = $2 WHERE id = $1', [task.id, inserted]);
          task.total = inserted;
        }
        if (!t.refreshAll && inserted === 0) {
          await q.query(`UPDATE tasks SET status = 'DONE', finished_at = now() WHERE id = $1`, [task.id]);
          task.status = 'DONE';
        }
        await announce(q, task.status === 'DONE' ? [task.id] : []);
        return task;
      };
      // A task and its items appear together or not at all.
      const task = await (db.transaction ? db.transaction(run) : run(db));
      await afterBulkInsert(t.items.length);
      return task;
    },

    async get(id: number): Promise<TaskRow | null> {
      const res = await db.query('SELECT * FROM tasks WHERE id = $1', [id]);
      return res.rows[0] ? parseTask(res.rows[0]) : null;
    },

    async items(taskId: number): Promise<TaskItem[]> {
      const res = await db.query('SELECT task_id, item, chain_id, contract_address, status, attempts, failure_reason FROM task_items WHERE task_id = $1 ORDER BY item', [taskId]);
      return res.rows.map((r) => ItemSchema.parse(r));
    },

    list: (projectId: number | null, limit = 50): Promise<TaskRow[]> => page({ projectId }, undefined, limit),

    page,

    /** How many tasks the filter keeps, per status (the status filter aside). */
    async counts(f: TaskFilter): Promise<Record<string, number>> {
      const res = await db.query<{ status: string; n: string }>(`SELECT status, count(*)::text AS n FROM tasks WHERE ${TASK_FILTER} GROUP BY status`, [f.projectId ?? null, null]);
      return Object.fromEntries(res.rows.map((r) => [r.status, Number(r.n)]));
    },

    /** Items of a project still waiting, across its tasks: the per-project limit counts these. */
    async queuedCount(projectId: number): Promise<number> {
      const res = await db.query<{ n: number | string }>(`SELECT count(*) AS n FROM task_items i JOIN tasks t ON t.id = i.task_id WHERE t.project_id = $1 AND i.status = 'QUEUED'`, [projectId]);
      return Number(res.rows[0].n);
    },

    /** Queued items of these targets in the project's live tasks, with their task. */
    async queuedFor(projectId: number | null, chainId: number, contract: string, items: string[]): Promise<Map<string, number>> {
      const res = await db.query<{ item: string; task_id: number | string }>(
        `SELECT i.item, i.task_id FROM task_items i JOIN tasks t ON t.id = i.task_id
          WHERE i.chain_id = $1 AND i.contract_address = $2 AND i.item = ANY($3::text[]) AND i.status = 'QUEUED'
            AND t.project_id IS NOT DISTINCT FROM $4 AND NOT t.cancelled`,
        [chainId, contract, items, projectId],
      );
      return new Map(res.rows.map((r) => [r.item, Number(r.task_id)]));
    },

    /**
     * A refreshAll of the project for this contract that has not listed the tokens yet: it will list
     * every token there is when it runs, so a like request joins it. One of only the new tokens
     * covers only requests for new tokens.
     */
    async pendingRefreshAll(projectId: number | null, chainId: number, contract: string, onlyNew: boolean): Promise<number | null> {
      const res = await db.query<{ id: number | string }>(
        `SELECT id FROM tasks
          WHERE NOT enumerated AND status = 'QUEUED' AND refresh_all AND NOT cancelled
            AND project_id IS NOT DISTINCT FROM $1 AND chain_id = $2 AND contract_address = $3 AND (NOT only_new OR $4)
          ORDER BY id LIMIT 1`,
        [projectId, chainId, contract, onlyNew],
      );
      return res.rows[0] ? Number(res.rows[0].id) : null;
    },

    /** The latest finished task of the project that refreshed each item within `sinceSec`. */
    async recentlyDone(projectId: number | null, chainId: number, contract: string, items: string[], sinceSec: number): Promise<Map<string, number>> {
      if (sinceSec <= 0) return new Map();
      const res = await db.query<{ item: string; task_id: number | string }>(
        `SELECT DISTINCT ON (i.item) i.item, i.task_id FROM task_items i JOIN tasks t ON t.id = i.task_id
          WHERE i.chain_id = $1 AND i.contract_address = $2 AND i.item = ANY($3::text[]) AND i.status = 'DONE'
            AND i.updated_at > now() - make_interval(secs => $5) AND t.project_id IS NOT DISTINCT FROM $4
          ORDER BY i.item, i.updated_at DESC`,
        [chainId, contract, items, projectId, sinceSec],
      );
      return new Map(res.rows.map((r) => [r.item, Number(r.task_id)]));
    },

    /**
     * Claims ready items: lowest priority value first, skipping rows other workers hold.
     * A claim is a lease; items whose lease ran out are claimable again.
     *
     * Claims take turns (a transaction-scoped advisory lock, across processes): a claim that finds the
     * lock taken tries again a few times over ~100 ms (a claim is a few milliseconds), then claims
     * nothing this turn rather than wait on (a frozen holder would stall every worker of every process
     * until lock_timeout, turn after turn: issue #53). Row locks keep two
     * workers from claiming the same item, but not the same token queued in two tasks: each claim
     * skips tokens leased in another task, and a claim running alongside another would not see the
     * other's leases before it commits, so both would fetch the token. A claim is a few milliseconds.
     * PGlite runs one statement at a time for its only process, so claims there take turns anyway.
     */
    async claim(owner: string, limit: number, leaseSec: number): Promise<TaskItem[]> {
      if (db.kind === 'pglite') return claimIn(db, owner, limit, leaseSec);
      const run = async (q: Queryable) => {
        try {
          return await askAgain(
            async () => {
              const turn = await q.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock($1) AS ok', [CLAIM_LOCK_KEY]);
              if (!turn.rows[0]?.ok) throw NOT_OUR_TURN;
              return claimIn(q, owner, limit, leaseSec);
            },
            (err) => err === NOT_OUR_TURN,
            CLAIM_TRIES,
            every(20),
          );
        } catch (err) {
          if (err === NOT_OUR_TURN) return [];
          throw err;
        }
      };
      return db.transaction ? db.transaction(run) : run(db);
    },

    /**
     * Records outcomes. A success or final failure also settles the same target queued in other
     * tasks (they joined this work); a retry puts the item back with its next attempt time.
     *
     * In the same statement, every task whose items changed has its counters moved on and is closed
     * when nothing is left: DONE, or FAILED when every item failed. Each item leaves QUEUED once
     * (both updates require it), so the counters stay exact without recounting the task's items,
     * which would make a task of n items cost O(n²); and no task is left open because a separate
     * closing step failed after its items were recorded. Returns the tasks touched.
     */
    async complete(owner: string, chainId: number, outcomes: ItemOutcome[]): Promise<number[]> {
      if (!outcomes.length) return [];
      const rows = outcomes.map((o) => ({
        task_id: o.taskId,
        item: o.item,
        contract: o.contract,
        status: o.ok ? 'DONE' : o.retryAt ? 'QUEUED' : 'FAILED',
        reason: o.ok ? null : (o.reason ?? 'FAILED'),
        retry_at: o.retryAt?.toISOString() ?? null,
      }));
      const res = await ending(
        (q) =>
          q.query<{ task_id: number | string }>(
            `WITH x AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(task_id bigint, item text, contract text, status text, reason text, retry_at timestamptz)),
         own AS (
           UPDATE task_items i SET status = x.status, failure_reason = x.reason, lease_owner = NULL, lease_until = NULL,
                  next_attempt_at = COALESCE(x.retry_at, i.next_attempt_at), updated_at = now()
             FROM x WHERE i.task_id = x.task_id AND i.item = x.item AND i.lease_owner = $2 AND i.status = 'QUEUED'
           RETURNING i.task_id, i.status),
         joined AS (
           UPDATE task_items i SET status = x.status, failure_reason = x.reason, updated_at = now()
             FROM x WHERE x.status <> 'QUEUED' AND i.chain_id = $3 AND i.contract_address = x.contract AND i.item = x.item
              AND i.status = 'QUEUED' AND i.lease_owner IS NULL AND i.task_id <> x.task_id
           RETURNING i.task_id, i.status),
         d AS (
           SELECT task_id, count(*) FILTER (WHERE status = 'DONE') AS ok, count(*) FILTER (WHERE status = 'FAILED') AS bad
             FROM (SELECT task_id, status FROM own UNION ALL SELECT task_id, status FROM joined) u GROUP BY task_id),
         counted AS (
           UPDATE tasks t SET succeeded = t.succeeded + d.ok, failed = t.failed + d.bad, updated_at = now(), last_ran_at = now(),
                  status = CASE WHEN t.status = 'QUEUED' AND t.enumerated AND t.succeeded + d.ok + t.failed + d.bad >= t.total
                                THEN (CASE WHEN t.total > 0 AND t.succeeded + d.ok = 0 THEN 'FAILED' ELSE 'DONE' END)
                                ELSE t.status END,
                  finished_at = CASE WHEN t.status = 'QUEUED' AND t.enumerated AND t.succeeded + d.ok + t.failed + d.bad >= t.total
                                     THEN now() ELSE t.finished_at END
             FROM d WHERE t.id = d.task_id
           RETURNING t.id)
         SELECT id AS task_id FROM counted`,
            [JSON.stringify(rows), owner, chainId],
          ),
        (r) => r.rows.map((x) => Number(x.task_id)),
      );
      return res.rows.map((r) => Number(r.task_id));
    },

    /**
     * Recounts tasks from their items and closes those with nothing left: DONE, or FAILED when every
     * item failed. complete() keeps the counts as it goes; this is for a task whose items were just
     * listed (a refreshAll), and repairs counts should they ever drift.
     */
    async settle(taskIds: number[]): Promise<void> {
      if (!taskIds.length) return;
      await ending(
        (q) =>
          q.query(
            `WITH c AS (
           SELECT t.id,
                  count(*) FILTER (WHERE i.status = 'DONE') AS ok,
                  count(*) FILTER (WHERE i.status = 'FAILED') AS bad,
                  count(*) FILTER (WHERE i.status = 'QUEUED') AS left_,
                  count(i.item) AS n
             FROM tasks t LEFT JOIN task_items i ON i.task_id = t.id
            WHERE t.id = ANY($1::bigint[]) GROUP BY t.id)
         UPDATE tasks t SET succeeded = c.ok, failed = c.bad, total = c.n, updated_at = now(), last_ran_at = now(),
                status = CASE WHEN t.cancelled THEN 'FAILED'
                              WHEN c.left_ = 0 AND t.enumerated THEN (CASE WHEN c.n > 0 AND c.ok = 0 THEN 'FAILED' ELSE 'DONE' END)
                              ELSE t.status END,
                finished_at = CASE WHEN c.left_ = 0 AND t.enumerated AND t.finished_at IS NULL THEN now() ELSE t.finished_at END
           FROM c WHERE t.id = c.id AND t.status = 'QUEUED'`,
            [taskIds],
          ),
        () => taskIds,
      );
    },

    /** Cancels a live task: its waiting items are dropped; returns false when it had already ended. */
    async cancel(id: number): Promise<boolean> {
      return ending(
        async (q) => {
          const res = await q.query(
            `UPDATE tasks SET cancelled = true, status = 'FAILED', last_error = 'cancelled', finished_at = now(), updated_at = now()
            WHERE id = $1 AND status IN ('QUEUED', 'PAUSED') RETURNING id`,
            [id],
          );
          if (!res.rows.length) return false;
          await q.query(`UPDATE task_items SET status = 'CANCELLED', updated_at = now() WHERE task_id = $1 AND status = 'QUEUED'`, [id]);
          return true;
        },
        (ok) => (ok ? [id] : []),
      );
    },

    /** Claims one refreshAll task whose tokens have not been listed yet. */
    async claimEnumeration(owner: string, leaseSec: number): Promise<TaskRow | null> {
      const res = await db.query(
        `WITH c AS (SELECT id FROM tasks WHERE NOT enumerated AND status = 'QUEUED' AND (lease_until IS NULL OR lease_until < now())
                     ORDER BY priority, id LIMIT 1 FOR UPDATE SKIP LOCKED)
         UPDATE tasks t SET lease_owner = $1, lease_until = now() + make_interval(secs => $2), tries = t.tries + 1, updated_at = now()
           FROM c WHERE t.id = c.id RETURNING t.*`,
        [owner, leaseSec],
      );
      return res.rows[0] ? parseTask(res.rows[0]) : null;
    },

    /**
     * Stores the tokens a listing found. A task cancelled while its tokens were being listed gets
     * none: claims do not look at the task, so items queued under it would still be fetched. The
     * row lock taken first orders this with cancel(): whichever commits second sees the other.
     */
    async finishEnumeration(taskId: number, items: { item: string; contract: string }[], chainId: number, priority: number): Promise<void> {
      const run = async (q: Queryable) => {
        const live = await q.query(`UPDATE tasks SET enumerated = true, lease_owner = NULL, lease_until = NULL, updated_at = now() WHERE id = $1 AND NOT cancelled RETURNING id`, [taskId]);
        if (!live.rows.length) return;
        const inserted = await insertItems(q, taskId, chainId, priority, items);
        await q.query('UPDATE tasks SET total = $2 WHERE id = $1', [taskId, inserted]);
      };
      await (db.transaction ? db.transaction(run) : run(db));
      await afterBulkInsert(items.length);
    },

    async failTask(taskId: number, error: string): Promise<void> {
      await ending(
        (q) => q.query(`UPDATE tasks SET status = 'FAILED', last_error = $2, finished_at = now(), lease_owner = NULL, lease_until = NULL, updated_at = now() WHERE id = $1`, [taskId, error]),
        () => [taskId],
      );
    },

    async releaseEnumeration(taskId: number, error: string): Promise<void> {
      await db.query(`UPDATE tasks SET last_error = $2, lease_owner = NULL, lease_until = now() + interval '5 seconds', updated_at = now() WHERE id = $1`, [taskId, error]);
    },
  };
}
export type TaskStore = ReturnType<typeof taskStore>;
