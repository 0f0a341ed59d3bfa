import { prepared, type Db, type Queryable } from '../store/db.ts';
import { toEvent, type StoredEvent } from './outbox.ts';
import { newSecret } from './signature.ts';
import { COLS, toDelivery, toWebhook, type Delivery, type Webhook, type WebhookKind } from './webhook-rows.ts';

export type { Delivery, Webhook, WebhookKind };

/** A claimed delivery with what sending it needs. */
export interface ClaimedDelivery {
  id: number;
  webhookId: number;
  /** The endpoint's project: the worker shares its lanes out by project. */
  projectId: number;
  attempts: number;
  url: string;
  secret: string;
  event: StoredEvent;
  firstAt: Date;
}

/** Endpoints and projects a claim passes over (the worker's lanes for them are full). */
export interface ClaimSkip {
  webhooks: readonly number[];
  projects: readonly number[];
}
const NO_SKIP: ClaimSkip = { webhooks: [], projects: [] };

/** What the worker settled of its claim: delivered (`status` the receiver's 2xx), or released unsent (`status` 0). */
export interface Settled {
  id: number;
  status: number;
  ms: number;
  snippet: string;
}

export interface WebhookPatch {
  url?: string;
  events?: string[];
  /** null: every chain. */
  chainIds?: number[] | null;
  description?: string;
  enabled?: boolean;
}

/** A disabled endpoint's pending deliveries wait at 'infinity' (out of the claim's reads) until it is enabled. */
const parkPending = (q: Queryable, webhookId: number) => q.query(`UPDATE webhook_deliveries SET next_attempt_at = 'infinity' WHERE webhook_id = $1 AND status = 'PENDING'`, [webhookId]);

/**
 * Endpoints and their deliveries. Reads and changes by id are of one kind ('webhook' unless said), so
 * the console never sees or changes a listener, nor the listener API a console webhook. `q`: the
 * caller's transaction, when the change is part of a larger one (a listener's filter changes with it).
 */
export function webhookStore(db: Db) {
  const within = <T>(q: Queryable | undefined, fn: (tx: Queryable) => Promise<T>) => (q ? fn(q) : db.transaction(fn));
  return {
    /** Returns the endpoint and its signing secret (the only time the secret leaves the store). */
    async create(
      w: { projectId: number; url: string; events: string[]; chainIds: number[] | null; description: string; kind?: WebhookKind },
      q: Queryable = db,
    ): Promise<{ webhook: Webhook; secret: string }> {
      const secret = newSecret();
      const r = await q.query<Record<string, unknown>>(`INSERT INTO webhooks (project_id, url, events, chain_ids, description, secret, kind) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${COLS}`, [
        w.projectId,
        w.url,
        w.events,
        w.chainIds,
        w.description,
        secret,
        w.kind ?? 'webhook',
      ]);
      return { webhook: toWebhook(r.rows[0]), secret };
    },
    /** The console's endpoints (listeners are listed by listener-store.ts). */
    async list(projectId: number | null): Promise<Webhook[]> {
      const r = await db.query<Record<string, unknown>>(`SELECT ${COLS} FROM webhooks WHERE ($1::bigint IS NULL OR project_id = $1) AND deleted_at IS NULL AND kind = 'webhook' ORDER BY id`, [
        projectId,
      ]);
      return r.rows.map(toWebhook);
    },
    async get(id: number, kind: WebhookKind = 'webhook'): Promise<Webhook | undefined> {
      const r = await db.query<Record<string, unknown>>(`SELECT ${COLS} FROM webhooks WHERE id = $1 AND deleted_at IS NULL AND kind = $2`, [id, kind]);
      return r.rows[0] ? toWebhook(r.rows[0]) : undefined;
    },
    /** Re-enabling clears the disabled notice and the failure streak, and makes its waiting deliveries due. */
    async update(id: number, p: WebhookPatch, kind: WebhookKind = 'webhook', q?: Queryable): Promise<Webhook | undefined> {
      return within(q, async (tx) => {
        const found = await tx.query(`SELECT 1 FROM webhooks WHERE id = $1 AND deleted_at IS NULL AND kind = $2 FOR UPDATE`, [id, kind]);
        if (found.rows.length === 0) return undefined;
        if (p.enabled === false) await parkPending(tx, id);
        if (p.enabled === true) await tx.query(`UPDATE webhook_deliveries SET next_attempt_at = now() WHERE webhook_id = $1 AND status = 'PENDING' AND next_attempt_at = 'infinity'`, [id]);
        const r = await tx.query<Record<string, unknown>>(
          `UPDATE webhooks SET url = COALESCE($2, url), events = COALESCE($3, events),
             chain_ids = CASE WHEN $4::boolean THEN $5::bigint[] ELSE chain_ids END,
             description = COALESCE($6, description), enabled = COALESCE($7, enabled),
             disabled_reason = CASE WHEN $7::boolean IS TRUE THEN NULL ELSE disabled_reason END,
             failing_since = CASE WHEN $7::boolean IS TRUE THEN NULL ELSE failing_since END, updated_at = now()
           WHERE id = $1 AND deleted_at IS NULL RETURNING ${COLS}`,
          [id, p.url ?? null, p.events ?? null, p.chainIds !== undefined, p.chainIds ?? null, p.description ?? null, p.enabled ?? null],
        );
        return r.rows[0] ? toWebhook(r.rows[0]) : undefined;
      });
    },
    /** Soft delete: its pending deliveries stop (they are dead-lettered), its history stays readable. */
    async remove(id: number, kind: WebhookKind = 'webhook', q?: Queryable): Promise<boolean> {
      return within(q, async (tx) => {
        const r = await tx.query(`UPDATE webhooks SET deleted_at = now(), enabled = false, updated_at = now() WHERE id = $1 AND deleted_at IS NULL AND kind = $2`, [id, kind]);
        if (r.rowCount === 0) return false;
        await tx.query(`UPDATE webhook_deliveries SET status = 'DEAD', last_error = 'the endpoint was deleted' WHERE webhook_id = $1 AND status = 'PENDING'`, [id]);
        return true;
      });
    },
    async deliveries(webhookId: number, limit: number, beforeId?: number): Promise<Delivery[]> {
      const r = await db.query<Record<string, unknown>>(
        `SELECT d.*, e.type FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
         WHERE d.webhook_id = $1 AND ($3::bigint IS NULL OR d.id < $3) ORDER BY d.id DESC LIMIT $2`,
        [webhookId, limit, beforeId ?? null],
      );
      return r.rows.map(toDelivery);
    },
    async delivery(id: number): Promise<Delivery | undefined> {
      const r = await db.query<Record<string, unknown>>(`SELECT d.*, e.type FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE d.id = $1`, [id]);
      return r.rows[0] ? toDelivery(r.rows[0]) : undefined;
    },
    /** A new delivery of the same event to the same endpoint, due now (the old one keeps its history). */
    async redeliver(deliveryId: number): Promise<Delivery | undefined> {
      const r = await db.query<{ id: number }>(
        `INSERT INTO webhook_deliveries (webhook_id, project_id, event_id, subject) SELECT webhook_id, project_id, event_id, subject FROM webhook_deliveries WHERE id = $1 RETURNING id`,
        [deliveryId],
      );
      return r.rows[0] ? this.delivery(Number(r.rows[0].id)) : undefined;
    },

    /**
     * One statement per wake of the delivery worker: records what `owner` has settled since its last
     * one (`settled`: delivered, or released unsent) and claims up to `limit` due deliveries of enabled
     * endpoints until `leaseSec` from now, each with its event and its endpoint's URL and secret. Due
     * rows are taken from each project in turn, oldest first within a project (cand), none of the
     * endpoints or projects in `skip`.
     *
     * SKIP LOCKED: two workers never claim one row, and the lease outlives the deadline, so a claim is
     * never taken over while its attempt may still be running (the worker sends nothing whose lease could
     * run out before the deadline: it releases it). A delivery waits while an older one of the same subject
     * to the same endpoint is pending, so one meta-transaction's events arrive in order; one recorded as
     * delivered by this same statement no longer holds the next back (the claim reads the snapshot from
     * before the statement's own writes, so it is named to it).
     */
    async claim(owner: string, limit: number, leaseSec: number, settled: readonly Settled[] = [], skip: ClaimSkip = NO_SKIP): Promise<ClaimedDelivery[]> {
      const r = await db.query<Record<string, unknown>>(
        prepared(`WITH RECURSIVE u AS (
           SELECT * FROM unnest($5::bigint[], $6::int[], $7::int[], $8::text[]) AS u(id, status, ms, snippet)),
         rec AS (
           -- status 0: released unsent (the attempt the claim counted was not made).
           UPDATE webhook_deliveries d SET
             status = CASE WHEN u.status > 0 THEN 'DELIVERED' ELSE d.status END,
             attempts = CASE WHEN u.status > 0 THEN d.attempts ELSE d.attempts - 1 END,
             last_status = CASE WHEN u.status > 0 THEN u.status ELSE d.last_status END,
             last_error = CASE WHEN u.status > 0 THEN NULL ELSE d.last_error END,
             last_latency_ms = CASE WHEN u.status > 0 THEN u.ms ELSE d.last_latency_ms END,
             response_snippet = CASE WHEN u.status > 0 THEN u.snippet ELSE d.response_snippet END,
             delivered_at = CASE WHEN u.status > 0 THEN now() ELSE d.delivered_at END,
             claimed_by = NULL, claimed_until = NULL
           FROM u WHERE d.id = u.id AND d.claimed_by = $1 AND d.status = 'PENDING'
           RETURNING d.id, d.webhook_id, d.status),
         healthy AS (
           UPDATE webhooks SET failing_since = NULL
           WHERE id IN (SELECT webhook_id FROM rec WHERE status = 'DELIVERED') AND failing_since IS NOT NULL RETURNING id),
         busy(project_id) AS (
           -- The projects with pending deliveries, one index probe each (a skip scan of the partial index):
           -- a few rows however many deliveries wait.
           (SELECT project_id FROM webhook_deliveries WHERE status = 'PENDING' ORDER BY project_id LIMIT 1)
           UNION ALL
           SELECT (SELECT d.project_id FROM webhook_deliveries d WHERE d.status = 'PENDING' AND d.project_id > busy.project_id ORDER BY d.project_id LIMIT 1)
           FROM busy WHERE busy.project_id IS NOT NULL),
         cand AS (
           -- Each project's oldest due rows, numbered within the project: claimed in turns (every project's
           -- first, then every project's second...), so one project's backlog never queues another's behind
           -- it. Filtered only on their own columns: top-N reads that stay cheap whatever the planner's
           -- statistics. Rows not worth reading are kept out instead: a disabled endpoint's wait at
           -- 'infinity', and a failing delivery's later ones of the same subject wait with it (record()).
           SELECT x.id, x.rn, x.next_attempt_at FROM busy CROSS JOIN LATERAL (
             SELECT id, next_attempt_at, row_number() OVER (ORDER BY next_attempt_at, id) AS rn FROM (
               SELECT id, next_attempt_at FROM webhook_deliveries
               WHERE project_id = busy.project_id AND status = 'PENDING' AND next_attempt_at <= now() AND (claimed_until IS NULL OR claimed_until < now())
                 AND id <> ALL($5::bigint[]) AND webhook_id <> ALL($9::bigint[])
               ORDER BY next_attempt_at, id LIMIT $4) o) x
           WHERE busy.project_id IS NOT NULL AND busy.project_id <> ALL($10::bigint[])),
         c AS (
           SELECT d.id, cand.rn, cand.next_attempt_at FROM webhook_deliveries d JOIN cand ON cand.id = d.id
           WHERE d.status = 'PENDING' AND (d.claimed_until IS NULL OR d.claimed_until < now())
             AND (SELECT w.enabled AND w.deleted_at IS NULL FROM webhooks w WHERE w.id = d.webhook_id)
             AND (d.subject IS NULL OR NOT EXISTS (SELECT 1 FROM webhook_deliveries p
                  WHERE p.webhook_id = d.webhook_id AND p.subject = d.subject AND p.status = 'PENDING' AND p.id < d.id
                    AND p.id NOT IN (SELECT id FROM rec WHERE status = 'DELIVERED')))
           ORDER BY cand.rn, cand.next_attempt_at, d.id
           LIMIT $2 FOR UPDATE OF d SKIP LOCKED),
         claimed AS (
           UPDATE webhook_deliveries d SET claimed_by = $1, claimed_until = now() + make_interval(secs => $3), attempts = d.attempts + 1
           FROM c WHERE d.id = c.id
           RETURNING d.id, d.webhook_id, d.project_id, d.event_id, d.attempts, d.created_at)
         -- The event and the endpoint are joined to the few claimed rows (looked up by key), not into the UPDATE.
         -- In the turns they were claimed in: the worker sends them in this order.
         SELECT cl.id, cl.webhook_id, cl.project_id AS d_project_id, cl.attempts, cl.created_at AS first_at, w.url, w.secret,
           e.id AS e_id, e.seq, e.type, e.chain_id, e.project_id, e.subject, e.payload, e.created_at AS e_created_at
         FROM claimed cl JOIN c ON c.id = cl.id JOIN events e ON e.id = cl.event_id JOIN webhooks w ON w.id = cl.webhook_id
         ORDER BY c.rn, c.next_attempt_at, cl.id`),
        [owner, limit, leaseSec, limit * 4, settled.map((x) => x.id), settled.map((x) => x.status), settled.map((x) => x.ms), settled.map((x) => x.snippet), [...skip.webhooks], [...skip.projects]],
      );
      return r.rows.map((x) => ({
        id: Number(x.id),
        webhookId: Number(x.webhook_id),
        projectId: Number(x.d_project_id),
        attempts: Number(x.attempts),
        url: x.url as string,
        secret: x.secret as string,
        firstAt: new Date(x.first_at as string),
        event: toEvent({
          id: x.e_id as number,
          seq: x.seq as number | null,
          type: x.type as string,
          chain_id: x.chain_id as number | null,
          project_id: x.project_id as number | null,
          subject: x.subject as string | null,
          payload: x.payload,
          created_at: x.e_created_at as string,
        }),
      }));
    },

    /**
     * Records one attempt's outcome, only while `owner` still holds the claim. `retryAt` null with a
     * failure: dead-lettered. Also keeps the endpoint's failure streak, and disables an endpoint that
     * has failed everything for `disableAfterSec`.
     */
    async record(
      owner: string,
      d: { id: number; webhookId: number; subject: string | null },
      o: { ok: boolean; status: number; error: string | null; ms: number; snippet: string; retryAt: Date | null; disableAfterSec: number },
    ): Promise<{ disabled: boolean }> {
      return db.transaction(async (tx) => {
        const r = await tx.query(
          `UPDATE webhook_deliveries SET status = CASE WHEN $3 THEN 'DELIVERED' WHEN $8::timestamptz IS NULL THEN 'DEAD' ELSE 'PENDING' END,
             last_status = $4, last_error = $5, last_latency_ms = $6, response_snippet = $7, next_attempt_at = COALESCE($8, next_attempt_at),
             delivered_at = CASE WHEN $3 THEN now() ELSE delivered_at END, claimed_by = NULL, claimed_until = NULL
           WHERE id = $1 AND claimed_by = $2 AND status = 'PENDING'`,
          [d.id, owner, o.ok, o.status || null, o.error, o.ms, o.snippet, o.retryAt],
        );
        if (r.rowCount === 0) return { disabled: false };
        if (o.ok) {
          await tx.query('UPDATE webhooks SET failing_since = NULL WHERE id = $1 AND failing_since IS NOT NULL', [d.webhookId]);
          return { disabled: false };
        }
        // Later deliveries of the same subject wait for this one's retry (they could not go before it anyway).
        if (o.retryAt && d.subject != null) {
          await tx.query(`UPDATE webhook_deliveries SET next_attempt_at = GREATEST(next_attempt_at, $4) WHERE webhook_id = $1 AND subject = $2 AND status = 'PENDING' AND id > $3`, [
            d.webhookId,
            d.subject,
            d.id,
            o.retryAt,
          ]);
        }
        const w = await tx.query(
          `UPDATE webhooks SET failing_since = COALESCE(failing_since, now()),
             enabled = CASE WHEN failing_since < now() - make_interval(secs => $2) THEN false ELSE enabled END,
             disabled_reason = CASE WHEN failing_since < now() - make_interval(secs => $2)
               THEN 'disabled at ' || to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') || ' UTC: every delivery failed since ' || to_char(failing_since AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') || ' UTC (last: ' || $3 || ')'
               ELSE disabled_reason END, updated_at = now()
           WHERE id = $1 AND enabled RETURNING enabled`,
          [d.webhookId, o.disableAfterSec, (o.error ?? `HTTP ${o.status}`).slice(0, 200)],
        );
        const disabled = w.rows[0] ? !(w.rows[0] as { enabled: boolean }).enabled : false;
        if (disabled) await parkPending(tx, d.webhookId);
        return { disabled };
      });
    },
  };
}
export type WebhookStore = ReturnType<typeof webhookStore>;
