import { z } from 'zod';
import type { Delivery } from '../../events/webhook-store.ts';
import type { Listener } from '../../events/listener-store.ts';
import { ChainArg, MetadataErrors, type MethodDef, RpcError, method } from '../../http/index.ts';
import { Id, ProjectId, chainIdArg, chainName, type ConsoleArgDeps } from '../args.ts';
import type { ConsoleDeps } from '../deps.ts';
import type { Services } from '../../services.ts';

/** What the listener methods use: the events' listeners, the indexed chains, and the chains' names. */
export type ListenerServices = ConsoleArgDeps & Pick<Services, 'events' | 'indexers'>;

/**
 * A project's indexer webhook listeners (docs/webhooks.md, "Indexer webhook listeners") on every indexed
 * chain, each one's filter and recent deliveries, and removal. A project makes and edits them with its
 * key through the Indexer's …WebhookListener methods; the console reads them and removes one, as the
 * Indexer's RemoveWebhookListener does (the same store call: pending deliveries dead-lettered, history kept).
 */
export function listenerMethods({ s, q }: ConsoleDeps<ListenerServices>): Record<string, MethodDef<any>> {
  const store = s.events.listeners;
  const requireProject = async (id: number) => {
    if (!(await q.project(id))) throw new RpcError(MetadataErrors.ProjectNotFound, `no project ${id}`);
  };
  const wire = (l: Listener) => ({
    id: l.id,
    chainId: l.chainId,
    network: chainName(s, l.chainId),
    url: l.url,
    name: l.name,
    active: l.active,
    disabledReason: l.disabledReason,
    filter: l.filter,
    fromBlock: l.fromBlock,
    // Logs it was not told: its project reached webhooks.maxListenerDeliveriesPerBlock in their block.
    droppedLogs: l.droppedLogs,
    lastDroppedBlock: l.lastDroppedBlock,
    updatedAt: l.updatedAt.toISOString(),
  });
  const deliveryWire = (d: Delivery) => ({
    id: d.id,
    eventId: `evt_${d.eventId}`,
    status: d.status,
    attempts: d.attempts,
    statusCode: d.lastStatus,
    error: d.lastError,
    latencyMs: d.lastLatencyMs,
    createdAt: d.createdAt.toISOString(),
    deliveredAt: d.deliveredAt?.toISOString() ?? null,
  });
  const one = async (a: { projectId: number; chainID: string; id: number }) => {
    await requireProject(a.projectId);
    const chainId = chainIdArg(s, a.chainID);
    const l = await store.get(a.projectId, chainId, a.id);
    if (!l) throw new RpcError(MetadataErrors.NotFound, `no webhook listener ${a.id} of project ${a.projectId} on ${chainName(s, chainId)}`);
    return l;
  };
  const ById = z.object({ projectId: ProjectId, chainID: ChainArg, id: Id });
  return {
    /** The project's listeners on every indexed chain, in id order per chain. */
    ListProjectListeners: method({
      input: z.object({ projectId: ProjectId }),
      handler: async (a) => {
        await requireProject(a.projectId);
        const chains = [...s.indexers.keys()];
        const lists = await Promise.all(chains.map((c) => store.list(a.projectId, c)));
        return { listeners: lists.flat().map(wire), indexedChains: chains.map((c) => ({ chainId: c, network: chainName(s, c) })) };
      },
    }),
    /** One listener with its 20 latest deliveries. */
    GetProjectListener: method({
      input: ById,
      handler: async (a) => {
        const l = await one(a);
        return { listener: wire(l), deliveries: (await s.events.webhooks.deliveries(l.id, 20)).map(deliveryWire) };
      },
    }),
    RemoveProjectListener: method({
      input: ById,
      handler: async (a) => {
        const l = await one(a);
        await store.remove(a.projectId, l.chainId, l.id);
        return { removed: true };
      },
    }),
  };
}
