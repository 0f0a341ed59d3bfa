import { prepared, type Db, type Queryable } from '../store/db.ts';
import type { ListenerFilter } from './listener-filter.ts';
import { LISTENER_EVENT } from './outbox.ts';
import type { WebhookStore } from './webhook-store.ts';

/**
 * An indexer webhook listener: a webhooks row of kind 'listener' (URL, secret, enabled, deliveries:
 * webhook-store.ts) and its indexer_listeners row (chain, EventFilter), owned here.
 */
export interface Listener {
  id: number;
  projectId: number;
  chainId: number;
  url: string;
  name: string;
  filter: ListenerFilter;
  active: boolean;
  /** Why the delivery worker disabled it (every delivery failed for webhooks.disableAfterSec). */
  disabledReason: string | null;
  fromBlock: number;
  /** Logs it was not told for its project's cap per block (webhooks.maxListenerDeliveriesPerBlock), and the last block one was in. */
  droppedLogs: number;
  lastDroppedBlock: number | null;
  updatedAt: Date;
}

/** What the indexer's hook needs of a listener that is being told. */
export interface ActiveListener {
  id: number;
  projectId: number;
  filter: ListenerFilter;
  fromBlock: bigint;
}

export interface ListenerPatch {
  url?: string;
  name?: string;
  filter?: ListenerFilter;
  active?: boolean;
}

// An arbitrary constant: adds of one project wait for each other, so the cap on listeners holds.
const ADD_LOCK = 727_034;

const SELECT = `SELECT w.id, w.project_id, w.url, w.description, w.enabled, w.disabled_reason, w.updated_at, l.chain_id, l.filter, l.from_block, l.dropped_logs, l.last_dropped_block
  FROM indexer_listeners l JOIN webhooks w ON w.id = l.webhook_id
  WHERE w.deleted_at IS NULL AND w.kind = 'listener' AND l.project_id = $1 AND l.chain_id = $2`;

const json = <T>(v: unknown): T => (typeof v === 'string' ? JSON.parse(v) : v) as T;

const toListener = (r: Record<string, unknown>): Listener => ({
  id: Number(r.id),
  projectId: Number(r.project_id),
  chainId: Number(r.chain_id),
  url: r.url as string,
  name: r.description as string,
  filter: json<ListenerFilter>(r.filter),
  active: r.enabled as boolean,
  disabledReason: (r.disabled_reason as string | null) ?? null,
  fromBlock: Number(r.from_block),
  droppedLogs: Number(r.dropped_logs ?? 0),
  lastDroppedBlock: r.last_dropped_block == null ? null : Number(r.last_dropped_block),
  updatedAt: new Date(r.updated_at as string),
});

/** Listeners are reached through their project and chain only: another project's id is not found. */
export function listenerStore(db: Db, webhooks: WebhookStore) {
  const read = async (q: Queryable, projectId: number, chainId: number, id: number | null): Promise<Listener[]> => {
    const r = await q.query<Record<string, unknown>>(`${SELECT} AND ($3::bigint IS NULL OR w.id = $3) ORDER BY w.id`, [projectId, chainId, id]);
    return r.rows.map(toListener);
  };
  /** Applies the patch to each listener of `ids` (they are the project's on the chain: read first). */
  const patch = async (tx: Queryable, ids: number[], p: ListenerPatch) => {
    for (const id of ids) {
      await webhooks.update(id, { url: p.url, description: p.name, enabled: p.active }, 'listener', tx);
      if (p.filter) await tx.query('UPDATE indexer_listeners SET filter = $2::jsonb WHERE webhook_id = $1', [id, JSON.stringify(p.filter)]);
    }
  };
  return {
    /** The listener and its signing secret (the only time it leaves the store); null when the project has `max` on the chain. */
    async add(a: { projectId: number; chainId: number; url: string; name: string; filter: ListenerFilter; fromBlock: number; max: number }) {
      return db.transaction(async (tx) => {
        await tx.query('SELECT pg_advisory_xact_lock($1::int, $2::int)', [ADD_LOCK, a.projectId % 2 ** 31]);
        if ((await read(tx, a.projectId, a.chainId, null)).length >= a.max) return null;
        const { webhook, secret } = await webhooks.create({ projectId: a.projectId, url: a.url, events: [LISTENER_EVENT], chainIds: [a.chainId], description: a.name, kind: 'listener' }, tx);
        await tx.query('INSERT INTO indexer_listeners (webhook_id, project_id, chain_id, filter, from_block) VALUES ($1, $2, $3, $4::jsonb, $5)', [
          webhook.id,
          a.projectId,
          a.chainId,
          JSON.stringify(a.filter),
          a.fromBlock,
        ]);
        const [listener] = await read(tx, a.projectId, a.chainId, webhook.id);
        return { listener: listener!, secret };
      });
    },
    list: (projectId: number, chainId: number) => read(db, projectId, chainId, null),
    get: async (projectId: number, chainId: number, id: number): Promise<Listener | undefined> => (await read(db, projectId, chainId, id))[0],
    /**
     * The listener as changed; undefined when the project has no such listener on the chain. `p` may be
     * worked out from the listener as it is, under its row lock (and may throw to refuse the change).
     */
    async update(projectId: number, chainId: number, id: number, p: ListenerPatch | ((now: Listener) => ListenerPatch)): Promise<Listener | undefined> {
      return db.transaction(async (tx) => {
        await tx.query(`SELECT 1 FROM webhooks WHERE id = $1 FOR UPDATE`, [id]);
        const [now] = await read(tx, projectId, chainId, id);
        if (!now) return undefined;
        await patch(tx, [id], typeof p === 'function' ? p(now) : p);
        return (await read(tx, projectId, chainId, id))[0];
      });
    },
    /** Pauses or resumes every listener of the project on the chain; how many changed. */
    async setAllActive(projectId: number, chainId: number, active: boolean): Promise<number> {
      return db.transaction(async (tx) => {
        const ids = (await read(tx, projectId, chainId, null)).filter((l) => l.active !== active).map((l) => l.id);
        await patch(tx, ids, { active });
        return ids.length;
      });
    },
    /** Soft-deletes (webhook-store's remove: pending deliveries dead-lettered, history kept); how many went. */
    async remove(projectId: number, chainId: number, id: number | null): Promise<number> {
      return db.transaction(async (tx) => {
        const ids = (await read(tx, projectId, chainId, id)).map((l) => l.id);
        for (const w of ids) await webhooks.remove(w, 'listener', tx);
        return ids.length;
      });
    },
    /** The listeners of a chain that are told (enabled, not removed), on the caller's transaction (the indexer's step). */
    async active(q: Queryable, chainId: number): Promise<ActiveListener[]> {
      const r = await q.query<{ id: number | string; project_id: number | string; filter: unknown; from_block: number | string }>(
        prepared(`SELECT l.webhook_id AS id, l.project_id, l.filter, l.from_block FROM indexer_listeners l JOIN webhooks w ON w.id = l.webhook_id
         WHERE l.chain_id = $1 AND w.enabled AND w.deleted_at IS NULL`),
        [chainId],
      );
      return r.rows.map((x) => ({ id: Number(x.id), projectId: Number(x.project_id), filter: json<ListenerFilter>(x.filter), fromBlock: BigInt(x.from_block) }));
    },
    /** Counts logs listeners were not told for their project's cap per block, on the step's transaction. */
    async recordDropped(q: Queryable, drops: ReadonlyArray<{ id: number; logs: number; lastBlock: bigint }>): Promise<void> {
      if (drops.length === 0) return;
      await q.query(
        `UPDATE indexer_listeners l SET dropped_logs = l.dropped_logs + u.n, last_dropped_block = GREATEST(l.last_dropped_block, u.b)
         FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS u(id, n, b) WHERE l.webhook_id = u.id`,
        [drops.map((d) => d.id), drops.map((d) => d.logs), drops.map((d) => d.lastBlock.toString())],
      );
    },
  };
}
export type ListenerStore = ReturnType<typeof listenerStore>;
