import { EventEmitter } from 'node:events';
import { prepared, type Db, type Queryable, type Tx } from '../store/db.ts';

/**
 * The event types metarelay emits, and so the ones an endpoint or a stream may subscribe to
 * (webhook.test goes only to the endpoint it tests). A type is added here when it is emitted:
 * a subscription to one that never fires would be a silent promise.
 */
export const EVENT_TYPES = ['metatxn.status', 'token.metadata_updated', 'sender.low_balance', 'sender.recovered', 'refresh.task_finished', 'contract.info_updated', 'balance.updated'] as const;
export type EventType = (typeof EVENT_TYPES)[number] | 'webhook.test';

/**
 * An indexed log an indexer webhook listener's filter matched (listener-events.ts): written with its
 * listeners as the only targets, never offered to subscriptions or streams, and POSTed as Sequence's
 * EventLog itself rather than in metarelay's envelope.
 */
export const LISTENER_EVENT = 'indexer.event_log';
/** Events that go only to the endpoints they were written for. */
const DIRECTED = ['webhook.test', LISTENER_EVENT];

export interface NewEvent {
  type: EventType;
  chainId: number | null;
  /** The project it belongs to; null: the deployment's (every project's endpoints may subscribe). */
  projectId: number | null;
  /** What it is about: deliveries of one subject to one endpoint go out in order. */
  subject: string | null;
  /** The event's `data`: the full current state, so a late or repeated delivery cannot mislead. */
  data: unknown;
}

export interface StoredEvent {
  id: number;
  seq: number | null;
  type: string;
  chainId: number | null;
  projectId: number | null;
  subject: string | null;
  data: unknown;
  createdAt: Date;
}

/** The JSON body of a delivery and of an SSE message. */
export function envelope(e: StoredEvent) {
  return { id: `evt_${e.id}`, type: e.type, createdAt: e.createdAt.toISOString(), chainId: e.chainId, projectId: e.projectId, data: e.data };
}

/** What a delivery POSTs: the envelope, or for a listener the EventLog, its `id` the event's (the same on every retry). */
export function deliveryBody(e: StoredEvent): unknown {
  return e.type === LISTENER_EVENT ? { id: e.id, ...(e.data as object) } : envelope(e);
}

/**
 * Which endpoints an event goes to: enabled, subscribed to its type (or '*'), on its chain, of its
 * project; a deployment event (no project: tokens, senders) to any project's. A meta-transaction sent
 * without an access key has no project, and its events go to nobody's endpoint.
 */
const MATCHING = `w.enabled AND w.deleted_at IS NULL AND (e.type = ANY(w.events) OR '*' = ANY(w.events))
  AND (e.chain_id IS NULL OR w.chain_ids IS NULL OR e.chain_id = ANY(w.chain_ids))
  AND (w.project_id = e.project_id OR (e.project_id IS NULL AND e.type NOT LIKE 'metatxn.%'))`;

/**
 * Writes events and their deliveries in one statement, on the caller's transaction: they commit or roll
 * back with the state change that causes them. `webhookId` restricts the deliveries to one endpoint
 * (a test event).
 */
export async function appendEvents(q: Queryable, events: readonly NewEvent[], webhookId?: number): Promise<number[]> {
  return (await appendEventsCounting(q, events, webhookId)).ids;
}

/** appendEvents, also saying how many webhook deliveries the events made (none: no worker need look). */
export async function appendEventsCounting(q: Queryable, events: readonly NewEvent[], webhookId?: number): Promise<{ ids: number[]; deliveries: number }> {
  if (events.length === 0) return { ids: [], deliveries: 0 };
  const r = await q.query<AppendRow>(APPEND, appendParams(events, webhookId));
  return { ids: r.rows.map((x) => Number(x.id)), deliveries: Number(r.rows[0]?.deliveries ?? 0) };
}

/**
 * appendEvents as one of the transaction's last statements, sent with its COMMIT (Tx.atCommit), for a
 * writer that needs no event id before then: no round trip while the transaction holds its connection
 * (the intake's: docs/performance-log.md, "30 Nov 2026 (ninth session)"). Settles once the transaction
 * has ended: with the webhook deliveries the events made when they were committed, undefined when they
 * were not.
 */
export async function appendEventsAtCommit(tx: Tx, events: readonly NewEvent[]): Promise<{ deliveries: number } | undefined> {
  if (events.length === 0) return undefined;
  const r = await tx.atCommit<AppendRow>(APPEND, appendParams(events));
  return r && { deliveries: Number(r.rows[0]?.deliveries ?? 0) };
}

/** A row of APPEND: an event's id, and the deliveries the whole statement made (on every row). */
interface AppendRow {
  id: number | string;
  deliveries: number | string;
}

const APPEND = prepared(`WITH e AS (
   INSERT INTO events (type, chain_id, project_id, subject, payload)
   SELECT type, chain_id, project_id, subject, payload::jsonb FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[])
     AS u(type, chain_id, project_id, subject, payload)
   RETURNING id, type, chain_id, project_id, subject),
 d AS (
   INSERT INTO webhook_deliveries (webhook_id, project_id, event_id, subject)
   SELECT w.id, w.project_id, e.id, e.subject FROM e JOIN webhooks w ON ($6::bigint IS NULL AND ${MATCHING}) OR w.id = $6
   ORDER BY e.id, w.id
   RETURNING id)
 SELECT id, (SELECT count(*) FROM d) AS deliveries FROM e ORDER BY id`);

function appendParams(events: readonly NewEvent[], webhookId?: number): unknown[] {
  return [
    events.map((e) => e.type),
    events.map((e) => e.chainId),
    events.map((e) => e.projectId),
    events.map((e) => e.subject),
    events.map((e) => JSON.stringify(e.data, (_k, v) => (typeof v === 'bigint' ? v.toString() : v))),
    webhookId ?? null,
  ];
}

/** An event for the endpoints named, and those only. */
export interface DirectedEvent {
  type: typeof LISTENER_EVENT;
  chainId: number | null;
  subject: string | null;
  data: unknown;
  webhookIds: readonly number[];
}

/**
 * Writes events and a delivery of each to its `webhookIds`, in one statement on the caller's
 * transaction. The events belong to no project (they are never matched to subscriptions: DIRECTED).
 * Ids are drawn first so each delivery row can name its event.
 */
export async function appendDirectedEvents(q: Queryable, events: readonly DirectedEvent[]): Promise<number[]> {
  const sent = events.filter((e) => e.webhookIds.length > 0);
  if (sent.length === 0) return [];
  const targets = sent.flatMap((e, i) => e.webhookIds.map((w) => [i + 1, w] as const));
  const r = await q.query<{ id: number | string }>(
    prepared(`WITH src AS (
       SELECT nextval(pg_get_serial_sequence('events', 'id')) AS id, u.* FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[])
         WITH ORDINALITY AS u(type, chain_id, subject, payload, n)),
     e AS (
       INSERT INTO events (id, type, chain_id, project_id, subject, payload)
       SELECT id, type, chain_id, NULL, subject, payload::jsonb FROM src ORDER BY n
       RETURNING id),
     d AS (
       INSERT INTO webhook_deliveries (webhook_id, project_id, event_id, subject)
       SELECT t.w, w.project_id, src.id, src.subject FROM src JOIN unnest($5::bigint[], $6::bigint[]) AS t(n, w) ON t.n = src.n JOIN webhooks w ON w.id = t.w
       ORDER BY src.id, t.w
       RETURNING id)
     SELECT id FROM e ORDER BY id`),
    [sent.map((e) => e.type), sent.map((e) => e.chainId), sent.map((e) => e.subject), sent.map((e) => JSON.stringify(e.data)), targets.map(([n]) => n), targets.map(([, w]) => w)],
  );
  return r.rows.map((x) => Number(x.id));
}

/**
 * The listener events told of logs (BLOCK_ADDED) in these blocks of a chain, with the endpoints each
 * was delivered to: what a reorg that takes the blocks away must take back (listener-events.ts). The
 * type is written out so the partial index (migration 0049) serves the read.
 */
export async function listenerLogsOf(q: Queryable, chainId: number, blockNumbers: readonly number[]): Promise<Array<{ subject: string | null; data: Record<string, unknown>; webhookIds: number[] }>> {
  if (blockNumbers.length === 0) return [];
  const r = await q.query<{ subject: string | null; payload: unknown; hooks: Array<number | string> }>(
    `SELECT e.subject, e.payload, array_agg(DISTINCT d.webhook_id) AS hooks FROM events e JOIN webhook_deliveries d ON d.event_id = e.id
     WHERE e.type = '${LISTENER_EVENT}' AND e.chain_id = $1 AND ((e.payload->>'blockNumber')::bigint) = ANY($2::bigint[]) AND e.payload->>'type' = 'BLOCK_ADDED'
     GROUP BY e.id, e.subject, e.payload ORDER BY e.id`,
    [chainId, blockNumbers],
  );
  return r.rows.map((x) => ({ subject: x.subject, data: (typeof x.payload === 'string' ? JSON.parse(x.payload) : x.payload) as Record<string, unknown>, webhookIds: x.hooks.map(Number) }));
}

interface EventRow {
  id: number | string;
  seq: number | string | null;
  type: string;
  chain_id: number | string | null;
  project_id: number | string | null;
  subject: string | null;
  payload: unknown;
  created_at: Date | string;
}

export const toEvent = (r: EventRow): StoredEvent => ({
  id: Number(r.id),
  seq: r.seq == null ? null : Number(r.seq),
  type: r.type,
  chainId: r.chain_id == null ? null : Number(r.chain_id),
  projectId: r.project_id == null ? null : Number(r.project_id),
  subject: r.subject,
  data: typeof r.payload === 'string' ? JSON.parse(r.payload) : r.payload,
  createdAt: new Date(r.created_at),
});

/** What one project's stream reads: `since`'s SQL filter, for events read once for every stream (keep the two alike). */
export interface StreamFilter {
  projectId: number;
  types?: string[];
  chainIds?: number[];
}

export function streamMatches(e: StoredEvent, f: StreamFilter): boolean {
  if (DIRECTED.includes(e.type)) return false;
  if (e.projectId !== f.projectId && !(e.projectId === null && !e.type.startsWith('metatxn.'))) return false;
  if (f.types && !f.types.includes(e.type)) return false;
  return !f.chainIds || e.chainId === null || f.chainIds.includes(e.chainId);
}

// An arbitrary constant: the one sequencer at a time, across processes.
const SEQUENCER_LOCK = 727_015;

export function outbox(db: Db) {
  return {
    /**
     * Gives committed events their `seq`, in id order, under a lock held to commit: any `seq` a reader
     * sees is larger than every `seq` committed before it, so following `seq` never skips one.
     */
    async sequence(): Promise<number> {
      return db.transaction(async (tx) => {
        const got = await tx.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock($1) AS ok', [SEQUENCER_LOCK]);
        if (!got.rows[0].ok) return 0;
        const r = await tx.query(
          `UPDATE events e SET seq = s.n FROM (SELECT id, nextval('events_seq') AS n FROM (SELECT id FROM events WHERE seq IS NULL ORDER BY id LIMIT 5000) x ORDER BY id) s
           WHERE e.id = s.id`,
        );
        return r.rowCount;
      });
    },

    /**
     * Sequenced events after `afterSeq` (and at most `upTo`), in order, filtered for one project's reader
     * (null: every event, for the shared stream reader, which filters with `streamMatches`).
     */
    async since(afterSeq: number, f: { projectId: number | null; types?: string[]; chainIds?: number[]; upTo?: number; limit: number }): Promise<StoredEvent[]> {
      const r = await db.query<EventRow>(
        `SELECT * FROM events WHERE seq > $1 AND ($6::bigint IS NULL OR seq <= $6) AND type <> ALL($7::text[])
           AND ($2::bigint IS NULL OR project_id = $2 OR (project_id IS NULL AND type NOT LIKE 'metatxn.%'))
           AND ($3::text[] IS NULL OR type = ANY($3)) AND ($4::bigint[] IS NULL OR chain_id IS NULL OR chain_id = ANY($4))
         ORDER BY seq LIMIT $5`,
        [afterSeq, f.projectId, f.types ?? null, f.chainIds ?? null, f.limit, f.upTo ?? null, DIRECTED],
      );
      return r.rows.map(toEvent);
    },

    /** The newest sequenced position (a new SSE reader without Last-Event-ID starts here). */
    async head(): Promise<number> {
      const r = await db.query<{ n: string | number | null }>('SELECT max(seq) AS n FROM events');
      return Number(r.rows[0].n ?? 0);
    },

    /** When the first sequenced event after `afterSeq` was written (null: none): how old a resume from there is. */
    async firstAfter(afterSeq: number): Promise<Date | null> {
      const r = await db.query<{ created_at: Date | string }>(prepared('SELECT created_at FROM events WHERE seq > $1 ORDER BY seq LIMIT 1'), [afterSeq]);
      return r.rows[0] ? new Date(r.rows[0].created_at) : null;
    },

    /** Drops events older than the retention that no delivery still needs. */
    async prune(retentionSec: number): Promise<number> {
      const r = await db.query(
        `DELETE FROM events e WHERE e.created_at < now() - make_interval(secs => $1) AND e.seq IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id AND d.status = 'PENDING')`,
        [retentionSec],
      );
      return r.rowCount;
    },
  };
}
export type Outbox = ReturnType<typeof outbox>;

/** In-process nudge that events were written, so the delivery worker and SSE readers look at once. */
export class EventBell {
  private readonly emitter = new EventEmitter();
  constructor() {
    this.emitter.setMaxListeners(0);
  }
  /**
   * `deliveries`: whether the events written made webhook deliveries. Without them the delivery worker
   * is not woken (its claim would find nothing: a statement per event on a service without webhooks,
   * a ninth of the statements of an intake burst); SSE readers always are. Unknown: true.
   */
  ring(deliveries = true) {
    this.emitter.emit('ring', deliveries);
  }
  on(fn: (deliveries: boolean) => void): () => void {
    this.emitter.on('ring', fn);
    return () => this.emitter.off('ring', fn);
  }
}
