import type { Db, Queryable } from '../store/db.ts';
import { toEvent, type StoredEvent } from './outbox.ts';
import { newSecret } from './signature.ts';
import { COLS, toDelivery, toWebhook, type Delivery, type Webhook, type WebhookKind } from './webhook-rows.ts';

export type { Delivery, Webhook, WebhookKind };

/** A claimed delivery with what sending it needs. */
export interface ClaimedDelivery {
  id: number;
  webhookId: number;
  attempts: number;
  url: string;
  secret: string;
  event: StoredEvent;
  firstAt: Date;
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
        `INSERT INTO webhook_deliveries (webhook_id, event_id, subject) SELECT webhook_id, event_id, subject FROM webhook_deliveries WHERE id = $1 RETURNING id`,
        [deliveryId],
      );
      return r.rows[0] ? this.delivery(Number(r.rows[0].id)) : undefined;
    },

    /**
     * Claims due deliveries of enabled endpoints for `owner` until `leaseSec` from now (SKIP LOCKED: two
     * workers never claim one row; the lease outlives the deadline, so a claim is never taken over while
     * its attempt may still be running). A delivery waits while an older one of the same subject to the
     * same endpoint is pending, so one meta-transaction's events arrive in order.
     */
    async claim(owner: string, limit: number, leaseSec: number): Promise<ClaimedDelivery[]> {
      const r = await db.query<Record<string, unknown>>(
        `WITH cand AS (
           -- The oldest due rows first, filtered only on their own columns: a top-N read that stays cheap
           -- whatever the planner's statistics. Rows not worth reading are kept out of it instead: a
           -- disabled endpoint's wait at 'infinity', and a failing delivery's later ones of the same subject
           -- wait with it (record()).
           SELECT id FROM webhook_deliveries
           WHERE status = 'PENDING' AND next_attempt_at <= now() AND (claimed_until IS NULL OR claimed_until < now())
           ORDER BY next_attempt_at, id LIMIT $4),
         c AS (
           SELECT d.id FROM webhook_deliveries d JOIN cand ON cand.id = d.id
           WHERE d.status = 'PENDING' AND (d.claimed_until IS NULL OR d.claimed_until < now())
             AND (SELECT w.enabled AND w.deleted_at IS NULL FROM webhooks w WHERE w.id = d.webhook_id)
             AND (d.subject IS NULL OR NOT EXISTS (SELECT 1 FROM webhook_deliveries p
                  WHERE p.webhook_id = d.webhook_id AND p.subject = d.subject AND p.status = 'PENDING' AND p.id < d.id))
           ORDER BY d.next_attempt_at, d.id LIMIT $2 FOR UPDATE OF d SKIP LOCKED)
         UPDATE webhook_deliveries d SET claimed_by = $1, claimed_until = now() + make_interval(secs => $3), attempts = d.attempts + 1
         FROM c WHERE d.id = c.id
         RETURNING d.id, d.webhook_id, d.event_id, d.attempts, d.created_at`,
        [owner, limit, leaseSec, limit * 4],
      );
      if (r.rows.length === 0) return [];
      // Read apart from the claim: joined into the UPDATE, the planner may scan the whole outbox.
      const [events, hooks] = await Promise.all([
        db.query<Record<string, unknown>>('SELECT * FROM events WHERE id = ANY($1::bigint[])', [r.rows.map((x) => x.event_id)]),
        db.query<{ id: number | string; url: string; secret: string }>('SELECT id, url, secret FROM webhooks WHERE id = ANY($1::bigint[])', [[...new Set(r.rows.map((x) => x.webhook_id))]]),
      ]);
      const eventById = new Map(events.rows.map((e) => [Number(e.id), toEvent(e as never)]));
      const hookById = new Map(hooks.rows.map((w) => [Number(w.id), w]));
      return r.rows
        .map((x) => ({ x, e: eventById.get(Number(x.event_id)), w: hookById.get(Number(x.webhook_id)) }))
        .filter((y) => y.e && y.w)
        .sort((a, b) => Number(a.x.id) - Number(b.x.id))
        .map(({ x, e, w }) => ({
          id: Number(x.id),
          webhookId: Number(x.webhook_id),
          attempts: Number(x.attempts),
          url: w!.url,
          secret: w!.secret,
          firstAt: new Date(x.created_at as string),
          event: e!,
        }));
    },

    /** Records many successful attempts at once (the worker batches them: one statement instead of one transaction each). */
    async recordDelivered(owner: string, items: { id: number; webhookId: number; status: number; ms: number; snippet: string }[]): Promise<void> {
      if (items.length === 0) return;
      await db.transaction(async (tx) => {
        await tx.query(
          `UPDATE webhook_deliveries d SET status = 'DELIVERED', last_status = u.status, last_error = NULL, last_latency_ms = u.ms, response_snippet = u.snippet,
             delivered_at = now(), claimed_by = NULL, claimed_until = NULL
           FROM unnest($2::bigint[], $3::int[], $4::int[], $5::text[]) AS u(id, status, ms, snippet)
           WHERE d.id = u.id AND d.claimed_by = $1 AND d.status = 'PENDING'`,
          [owner, items.map((x) => x.id), items.map((x) => x.status), items.map((x) => x.ms), items.map((x) => x.snippet)],
        );
        await tx.query('UPDATE webhooks SET failing_since = NULL WHERE id = ANY($1) AND failing_since IS NOT NULL', [[...new Set(items.map((x) => x.webhookId))]]);
      });
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
