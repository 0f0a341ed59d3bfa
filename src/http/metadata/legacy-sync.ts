import { z } from 'zod';
import { MintMonitorArgumentError, MintMonitorNotFoundError } from '../../metadata/refresh/mint-monitors.ts';
import type { TaskRow } from '../../metadata/refresh/task-store.ts';
import type { Services } from '../../services.ts';
import { MetadataErrors, RpcError, metadataErrorMap as E } from '../core/errors.ts';
import { method, type MethodDef, type RpcContext } from '../core/webrpc.ts';
import { AddressArg, ChainArg, chainFor, type ChainArgDeps } from '../core/args.ts';
import { TaskIdArgs, guard, taskToWire } from './refresh.ts';

/** What the legacy sync methods use: mint monitors, the refresh queue and its worker, and the chain arguments' lookup. */
export type LegacySyncDeps = ChainArgDeps & Pick<Services, 'mintMonitors' | 'refresh' | 'worker'>;

const ContractArgs = z.object({ chainID: ChainArg, contractAddress: AddressArg });

/** The mint monitor's domain errors, then the refresh engine's (guard), in the metadata catalog. */
function legacyGuard<T>(fn: () => Promise<T>): Promise<T> {
  return guard(async () => {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof MintMonitorNotFoundError) throw new RpcError(MetadataErrors.NotFound, err.message);
      if (err instanceof MintMonitorArgumentError) throw new RpcError(MetadataErrors.InvalidArgument, err.message);
      throw err;
    }
  });
}

/**
 * A contract sync is one whole-contract refresh task seen as its two phases: the sync (listing every
 * token the contract minted) is DONE once the tokens are listed, the refresh is the task itself. Both
 * carry the task's id; a cancel ends both (the listing too, if it had not finished).
 */
function syncTaskToWire(t: TaskRow) {
  return {
    ...taskToWire(t),
    queue: 'sync_contract_tokens',
    status: t.enumerated ? 'DONE' : t.status,
    result: { tokens: t.enumerated ? t.total : null, cancelled: t.cancelled, error: t.enumerated ? null : t.last_error },
  };
}

/**
 * The legacy mint-monitor and contract-sync methods that @0xsequence/metadata 1.10 … 2.2 still call,
 * on the refresh queue and the chain watcher. Like every refresh method they need an access key, and
 * what they register or queue is the key's project's alone.
 */
export function legacySyncMethods(s: LegacySyncDeps): Record<string, MethodDef<any>> {
  // The monitors and syncs are a key's project's; an admin token (which the secret-key methods admit) names none.
  const project = (ctx: RpcContext) => {
    if (!ctx.project) throw new RpcError(MetadataErrors.PermissionDenied, 'these methods act for the project of the key: send its secret key, not an admin token');
    return ctx.project.id;
  };
  /** A sync job of the project: another project's task, or one that is no whole-contract refresh, is refused. */
  const syncTask = async (ctx: RpcContext, id: number) => {
    const t = await s.refresh.taskFor(project(ctx), id);
    if (t.kind !== 'tokens' || !t.refresh_all) throw new RpcError(MetadataErrors.InvalidArgument, `task ${id} refreshes listed ${t.kind}, it is no contract sync`);
    return t;
  };
  const req = 'required' as const;
  return {
    // Adding or removing a monitor writes the project's state: a secret key (http/core/access-pipeline.ts).
    AddContractToMintMonitor: method({
      auth: 'secret',
      input: ContractArgs,
      handler: (a, ctx) =>
        legacyGuard(async () => {
          await s.mintMonitors.add(project(ctx), chainFor(s, a.chainID, E), a.contractAddress);
          return { ok: true };
        }),
    }),
    RemoveContractFromMintMonitor: method({
      auth: 'secret',
      input: ContractArgs,
      handler: (a, ctx) =>
        legacyGuard(async () => {
          await s.mintMonitors.remove(project(ctx), chainFor(s, a.chainID, E), a.contractAddress);
          return { ok: true };
        }),
    }),
    MintMonitorTriggerJob: method({
      auth: req,
      input: ContractArgs,
      handler: (a, ctx) =>
        legacyGuard(async () => {
          await s.mintMonitors.trigger(project(ctx), chainFor(s, a.chainID, E), a.contractAddress);
          s.worker.nudge();
          return { ok: true };
        }),
    }),
    MintMonitorJobStatus: method({
      auth: req,
      input: ContractArgs,
      handler: (a, ctx) => legacyGuard(async () => ({ task: taskToWire(await s.mintMonitors.status(project(ctx), chainFor(s, a.chainID, E), a.contractAddress)) })),
    }),
    SyncContractTokens: method({
      auth: req,
      input: ContractArgs,
      handler: (a, ctx) =>
        legacyGuard(async () => {
          const r = await s.refresh.enqueueAllTokens(project(ctx), chainFor(s, a.chainID, E), a.contractAddress, { source: 'sync' });
          s.worker.nudge();
          return { taskID: r.taskId };
        }),
    }),
    AbortContractSync: method({
      auth: req,
      input: TaskIdArgs,
      handler: (id, ctx) =>
        legacyGuard(async () => {
          await syncTask(ctx, id);
          return { ok: await s.refresh.cancel(project(ctx), id) };
        }),
    }),
    ContractSyncJobStatus: method({
      auth: req,
      input: TaskIdArgs,
      handler: (id, ctx) =>
        legacyGuard(async () => {
          const t = await syncTask(ctx, id);
          return { refreshTask: taskToWire(t), syncTask: syncTaskToWire(t) };
        }),
    }),
  };
}
