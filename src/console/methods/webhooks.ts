import { z } from 'zod';
import { ChainArg, MetadataErrors, type MethodDef, RpcError, WebhookUrlArg, method } from '../../http/index.ts';
import { appendEvents, EVENT_TYPES } from '../../events/outbox.ts';
import type { Delivery, Webhook } from '../../events/webhook-store.ts';
import { Id, ProjectId, chainIdArg, type ConsoleArgDeps } from '../args.ts';
import type { ConsoleDeps } from '../deps.ts';
import type { Services } from '../../services.ts';

/** What the webhook methods use: the events' endpoints and the database. */
export type WebhookServices = ConsoleArgDeps & Pick<Services, 'db' | 'events'>;

const EventList = z
  .array(z.enum([...EVENT_TYPES, '*']))
  .min(1, 'subscribe to at least one event type (or "*")')
  .max(EVENT_TYPES.length + 1);
const Description = z.string().trim().max(500);

/** Webhook endpoints per project, their deliveries, a test event and a manual redelivery (docs/webhooks.md). */
export function webhookMethods({ s, q }: ConsoleDeps<WebhookServices>): Record<string, MethodDef<any>> {
  const store = s.events.webhooks;
  const requireProject = async (id: number) => {
    if (!(await q.project(id))) throw new RpcError(MetadataErrors.ProjectNotFound, `no project ${id}`);
  };
  const existing = async (id: number) => {
    const w = await store.get(id);
    if (!w) throw new RpcError(MetadataErrors.NotFound, `no webhook ${id}`);
    return w;
  };
  const chainIds = (list: string[] | null | undefined) => (list == null ? list : [...new Set(list.map((c) => chainIdArg(s, c)))]);
  const wire = (w: Webhook) => ({
    id: w.id,
    projectId: w.projectId,
    url: w.url,
    events: w.events,
    chainIds: w.chainIds,
    description: w.description,
    enabled: w.enabled,
    // The console's notice for an endpoint the worker disabled.
    disabledReason: w.disabledReason,
    failingSince: w.failingSince?.toISOString() ?? null,
    createdAt: w.createdAt.toISOString(),
    updatedAt: w.updatedAt.toISOString(),
  });
  const deliveryWire = (d: Delivery) => ({
    id: d.id,
    webhookId: d.webhookId,
    eventId: `evt_${d.eventId}`,
    eventType: d.eventType,
    status: d.status,
    attempts: d.attempts,
    nextAttemptAt: d.nextAttemptAt?.toISOString() ?? null,
    statusCode: d.lastStatus,
    error: d.lastError,
    latencyMs: d.lastLatencyMs,
    responseSnippet: d.responseSnippet,
    createdAt: d.createdAt.toISOString(),
    deliveredAt: d.deliveredAt?.toISOString() ?? null,
  });

  return {
    /** Answers the signing secret once: it is never listed again. */
    CreateWebhook: method({
      input: z.object({ projectId: ProjectId, url: WebhookUrlArg, events: EventList, chainIds: z.array(ChainArg).max(100).optional(), description: Description.optional() }),
      handler: async (a) => {
        await requireProject(a.projectId);
        const { webhook, secret } = await store.create({
          projectId: a.projectId,
          url: a.url,
          events: [...new Set(a.events)],
          chainIds: chainIds(a.chainIds) ?? null,
          description: a.description ?? '',
        });
        return { webhook: wire(webhook), secret };
      },
    }),
    ListWebhooks: method({
      input: z.object({ projectId: ProjectId }),
      handler: async (a) => {
        await requireProject(a.projectId);
        return { webhooks: (await store.list(a.projectId)).map(wire) };
      },
    }),
    /** `allChains: true` clears the chain filter (a JSON null would be dropped before validation). */
    UpdateWebhook: method({
      input: z.object({
        id: Id,
        url: WebhookUrlArg.optional(),
        events: EventList.optional(),
        chainIds: z.array(ChainArg).min(1).max(100).optional(),
        allChains: z.boolean().optional(),
        description: Description.optional(),
        enabled: z.boolean().optional(),
      }),
      handler: async (a) => {
        await existing(a.id);
        if (a.allChains && a.chainIds) throw new RpcError(MetadataErrors.InvalidArgument, 'give chainIds or allChains, not both');
        const w = await store.update(a.id, {
          url: a.url,
          events: a.events ? [...new Set(a.events)] : undefined,
          chainIds: a.allChains ? null : chainIds(a.chainIds),
          description: a.description,
          enabled: a.enabled,
        });
        return { webhook: wire(w!) };
      },
    }),
    DeleteWebhook: method({
      input: z.object({ id: Id }),
      handler: async (a) => {
        if (!(await store.remove(a.id))) throw new RpcError(MetadataErrors.NotFound, `no webhook ${a.id}`);
        return { status: true };
      },
    }),
    ListWebhookDeliveries: method({
      input: z.object({ webhookId: Id, limit: z.number().int().min(1).max(200).optional(), beforeId: Id.optional() }),
      handler: async (a) => {
        await existing(a.webhookId);
        return { deliveries: (await store.deliveries(a.webhookId, a.limit ?? 50, a.beforeId)).map(deliveryWire) };
      },
    }),
    RedeliverWebhook: method({
      input: z.object({ deliveryId: Id }),
      handler: async (a) => {
        const d = await store.delivery(a.deliveryId);
        if (!d) throw new RpcError(MetadataErrors.NotFound, `no webhook delivery ${a.deliveryId}`);
        const w = await existing(d.webhookId);
        if (!w.enabled) throw new RpcError(MetadataErrors.InvalidArgument, `webhook ${w.id} is disabled: enable it first`);
        const again = (await store.redeliver(a.deliveryId))!;
        s.events.bell.ring();
        return { delivery: deliveryWire(again) };
      },
    }),
    /** Queues a `webhook.test` event to this endpoint only; its delivery shows in ListWebhookDeliveries. */
    TestWebhook: method({
      input: z.object({ id: Id }),
      handler: async (a) => {
        const w = await existing(a.id);
        if (!w.enabled) throw new RpcError(MetadataErrors.InvalidArgument, `webhook ${w.id} is disabled: enable it first`);
        const [eventId] = await appendEvents(
          s.db,
          [{ type: 'webhook.test', chainId: null, projectId: w.projectId, subject: null, data: { webhookId: w.id, message: 'a test event from metarelay' } }],
          w.id,
        );
        s.events.bell.ring();
        return { eventId: `evt_${eventId}` };
      },
    }),
  };
}
