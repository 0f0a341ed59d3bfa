import { z } from 'zod';
import type { Listener } from '../../events/listener-store.ts';
import type { ChainIndexer } from '../../indexer/index.ts';
import type { Services } from '../../services.ts';
import { IndexerErrors, RpcError } from '../core/errors.ts';
import { method, type MethodDef, type RpcContext } from '../core/webrpc.ts';
import { WebhookUrlArg } from '../core/args.ts';
import { EventFilterArg, ListenerArg, ListenerId, ProjectIdArg, bad, listenerFilter, projectOf, vetUrl, type ListenerArgDeps } from './listener-args.ts';

/** What the webhook listener methods use: the events' listeners, the config's limits, and the arguments' checks. */
export type ListenerDeps = ListenerArgDeps & Pick<Services, 'config' | 'events'>;

/** Sequence's WebhookListener; `disabledReason` is metarelay's own, when the delivery worker disabled it. */
function wire(l: Listener) {
  return {
    id: l.id,
    projectID: l.projectId,
    url: l.url,
    filters: { events: l.filter.events, contractAddresses: l.filter.contractAddresses, accounts: l.filter.accounts, tokenIDs: l.filter.tokenIDs },
    name: l.name,
    updatedAt: l.updatedAt.toISOString(),
    active: l.active,
    ...(l.disabledReason && !l.active ? { disabledReason: l.disabledReason } : {}),
    // metarelay's own: logs it was not told because its project reached webhooks.maxListenerDeliveriesPerBlock.
    ...(l.droppedLogs ? { droppedLogs: l.droppedLogs, lastDroppedBlock: l.lastDroppedBlock } : {}),
  };
}

/** The first block a new listener is not told of: the confirmed head now (the cursor when the node does not answer). */
async function startBlock(ix: ChainIndexer): Promise<number> {
  const head = await ix.chain.head.number().catch(() => null);
  if (head !== null) return Math.max(0, Number(head) - ix.cfg.confirmations);
  const cursor = await ix.cursor();
  if (cursor) return Number(cursor.block);
  throw new RpcError(IndexerErrors.Unavailable, `${ix.chain.name}'s head could not be read, so where the listener starts is not known: try again`);
}

const Scoped = { projectId: ProjectIdArg };
const ById = z.object({ id: ListenerId, ...Scoped }).strict();

/**
 * The Indexer's webhook-listener methods (docs/webhooks.md, "Indexer webhook listeners"): a
 * project's listeners on the chain of the path. A project access key acts on its project's; an admin
 * token on the project `projectId` names. Another project's listener is not found.
 */
export function indexerListenerMethods(s: ListenerDeps, chainOf: (ctx: RpcContext) => ChainIndexer): Record<string, MethodDef<z.ZodType>> {
  const store = s.events.listeners;
  const scope = async (ctx: RpcContext, projectId: number | null | undefined) => {
    const ix = chainOf(ctx);
    return { ix, chainId: ix.chain.chainId, projectId: await projectOf(s, ctx, projectId) };
  };
  const notFound = (id: number, ix: ChainIndexer) => new RpcError(IndexerErrors.NotFound, `no webhook listener ${id} of this project on ${ix.chain.name}`);
  const setAll = (active: boolean) =>
    method({
      input: z.object(Scoped).strict(),
      handler: async (a, ctx) => {
        const { chainId, projectId } = await scope(ctx, a.projectId);
        await store.setAllActive(projectId, chainId, active);
        return { status: true };
      },
    });

  const methods: Record<string, MethodDef<any>> = {
    /** `secret` is metarelay's own: the key deliveries are signed with, answered this once. */
    AddWebhookListener: method({
      input: z.object({ url: WebhookUrlArg, filters: EventFilterArg, ...Scoped }).strict(),
      handler: async (a, ctx) => {
        const { ix, chainId, projectId } = await scope(ctx, a.projectId);
        const filter = await listenerFilter(ix, a.filters);
        const url = await vetUrl(s, a.url);
        const max = s.config.webhooks.maxListeners;
        const added = await store.add({ projectId, chainId, url, name: '', filter, fromBlock: await startBlock(ix), max });
        if (!added) {
          throw new RpcError(IndexerErrors.ResourceExhausted, `this project has ${max} webhook listeners on ${ix.chain.name}, the most it may (webhooks.maxListeners): remove one first`);
        }
        return { status: true, listener: wire(added.listener), secret: added.secret };
      },
    }),
    GetWebhookListener: method({
      input: ById,
      handler: async (a, ctx) => {
        const { ix, chainId, projectId } = await scope(ctx, a.projectId);
        const l = await store.get(projectId, chainId, a.id);
        if (!l) throw notFound(a.id, ix);
        return { listener: wire(l) };
      },
    }),
    GetAllWebhookListeners: method({
      input: z.object(Scoped).strict(),
      handler: async (a, ctx) => {
        const { chainId, projectId } = await scope(ctx, a.projectId);
        return { listeners: (await store.list(projectId, chainId)).map(wire) };
      },
    }),
    /**
     * Sets what the listener sent back says: url, filters, name, active (absent: unchanged). `projectID`
     * must be its project's; `updatedAt`, when sent, must be the listener's (it changed since it was read:
     * RequestConflict). `listener` in the answer is metarelay's own.
     */
    UpdateWebhookListener: method({
      input: z.object({ listener: ListenerArg, ...Scoped }).strict(),
      handler: async (a, ctx) => {
        const { ix, chainId, projectId } = await scope(ctx, a.projectId);
        const l = a.listener;
        if (l.projectID && l.projectID !== projectId) throw bad(`listener.projectID ${l.projectID}: the listener is project ${projectId}'s (a listener cannot move between projects)`);
        const seen = l.updatedAt ? new Date(l.updatedAt) : undefined;
        if (seen && Number.isNaN(seen.getTime())) throw bad(`listener.updatedAt: "${l.updatedAt}" is not a date (send the one GetWebhookListener answered, or leave it out)`);
        const filter = l.filters ? await listenerFilter(ix, l.filters) : undefined;
        const url = l.url === undefined ? undefined : await vetUrl(s, l.url);
        const changed = await store.update(projectId, chainId, l.id, (now) => {
          if (seen && seen.getTime() !== now.updatedAt.getTime()) {
            // Says the stored date, then the sent one: the caller's copy is older than the listener (or not one this server answered).
            throw new RpcError(
              IndexerErrors.RequestConflict,
              `listener ${l.id} was last changed at ${now.updatedAt.toISOString()}, not at the updatedAt ${l.updatedAt} sent: it changed since that copy was read. Read it again (GetWebhookListener) and send its updatedAt`,
            );
          }
          return { url, filter, name: l.name, active: l.active };
        });
        if (!changed) throw notFound(l.id, ix);
        return { status: true, listener: wire(changed) };
      },
    }),
    ToggleWebhookListener: method({
      input: ById,
      handler: async (a, ctx) => {
        const { ix, chainId, projectId } = await scope(ctx, a.projectId);
        const l = await store.update(projectId, chainId, a.id, (now) => ({ active: !now.active }));
        if (!l) throw notFound(a.id, ix);
        return { webhookListener: wire(l) };
      },
    }),
    PauseAllWebhookListeners: setAll(false),
    ResumeAllWebhookListeners: setAll(true),
    RemoveWebhookListener: method({
      input: ById,
      handler: async (a, ctx) => {
        const { ix, chainId, projectId } = await scope(ctx, a.projectId);
        if ((await store.remove(projectId, chainId, a.id)) === 0) throw notFound(a.id, ix);
        return { status: true };
      },
    }),
    RemoveAllWebhookListeners: method({
      input: z.object(Scoped).strict(),
      handler: async (a, ctx) => {
        const { chainId, projectId } = await scope(ctx, a.projectId);
        await store.remove(projectId, chainId, null);
        return { status: true };
      },
    }),
  };
  // Whatever the indexer's own rule (it may let reads go without a key), listeners belong to a project,
  // and their URLs and secrets are its backend's business: a secret key (or an admin token) for all of them.
  return Object.fromEntries(Object.entries(methods).map(([name, def]) => [name, { ...def, auth: 'secret' as const }]));
}
