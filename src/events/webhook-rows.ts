// The rows of webhooks and webhook_deliveries as webhook-store.ts reads them.

/** 'webhook': made in the console; 'listener': an indexer webhook listener (listener-store.ts). */
export type WebhookKind = 'webhook' | 'listener';

export interface Webhook {
  id: number;
  kind: WebhookKind;
  projectId: number;
  url: string;
  events: string[];
  chainIds: number[] | null;
  description: string;
  enabled: boolean;
  disabledReason: string | null;
  failingSince: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface Delivery {
  id: number;
  webhookId: number;
  eventId: number;
  eventType: string;
  status: 'PENDING' | 'DELIVERED' | 'DEAD';
  attempts: number;
  nextAttemptAt: Date | null;
  lastStatus: number | null;
  lastError: string | null;
  lastLatencyMs: number | null;
  responseSnippet: string | null;
  createdAt: Date;
  deliveredAt: Date | null;
}

const num = (v: unknown) => (v == null ? null : Number(v));
const date = (v: unknown) => {
  if (v == null) return null;
  const d = new Date(v as string);
  // 'infinity' (a disabled endpoint's parked delivery) has no date to show.
  return Number.isFinite(d.getTime()) ? d : null;
};

export const toWebhook = (r: Record<string, unknown>): Webhook => ({
  id: Number(r.id),
  kind: r.kind as WebhookKind,
  projectId: Number(r.project_id),
  url: r.url as string,
  events: r.events as string[],
  chainIds: r.chain_ids == null ? null : (r.chain_ids as unknown[]).map(Number),
  description: r.description as string,
  enabled: r.enabled as boolean,
  disabledReason: (r.disabled_reason as string | null) ?? null,
  failingSince: date(r.failing_since),
  createdAt: new Date(r.created_at as string),
  updatedAt: new Date(r.updated_at as string),
});

export const toDelivery = (r: Record<string, unknown>): Delivery => ({
  id: Number(r.id),
  webhookId: Number(r.webhook_id),
  eventId: Number(r.event_id),
  eventType: r.type as string,
  status: r.status as Delivery['status'],
  attempts: Number(r.attempts),
  nextAttemptAt: r.status === 'PENDING' ? date(r.next_attempt_at) : null,
  lastStatus: num(r.last_status),
  lastError: (r.last_error as string | null) ?? null,
  lastLatencyMs: num(r.last_latency_ms),
  responseSnippet: (r.response_snippet as string | null) ?? null,
  createdAt: new Date(r.created_at as string),
  deliveredAt: date(r.delivered_at),
});

export const COLS = 'id, kind, project_id, url, events, chain_ids, description, enabled, disabled_reason, failing_since, created_at, updated_at';
