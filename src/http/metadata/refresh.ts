import type { Address } from 'viem';
import { z } from 'zod';
import { RefreshLimitError, TaskNotFoundError } from '../../metadata/refresh/refresh.ts';
import type { TaskRow } from '../../metadata/refresh/task-store.ts';
import type { Services } from '../../services.ts';
import { MetadataErrors, RpcError, metadataErrorMap as E } from '../core/errors.ts';
import { method, type MethodDef, type RpcContext } from '../core/webrpc.ts';
import { AddressArg, ChainArg, TokenIdArg, chainFor, type ChainArgDeps } from '../core/args.ts';

/** What the refresh methods use: the refresh queue and its worker, and the chain arguments' lookup. */
export type RefreshDeps = ChainArgDeps & Pick<Services, 'refresh' | 'worker'>;

const MAX_TOKENS = 10_000;

export const TaskIdArgs = z
  .object({
    taskId: z.coerce.number().int().positive().optional(),
    taskID: z.coerce.number().int().positive().optional(),
  })
  .refine((a) => a.taskId !== undefined || a.taskID !== undefined, { message: 'required', path: ['taskId'] })
  .transform((a) => (a.taskId ?? a.taskID)!);

/** Old clients send `chainHandle`, new ones `chainID`. */
const ChainEither = z
  .object({ chainID: ChainArg.optional(), chainHandle: ChainArg.optional() })
  .refine((a) => a.chainID !== undefined || a.chainHandle !== undefined, { message: 'required', path: ['chainID'] });

const TokenIds = z.array(TokenIdArg).max(MAX_TOKENS, `at most ${MAX_TOKENS} tokenIDs per refresh`);

/** Domain errors of the refresh engine, in the metadata catalog. */
export async function guard<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof TaskNotFoundError) throw new RpcError(MetadataErrors.NotFound, err.message);
    if (err instanceof RefreshLimitError) throw new RpcError(MetadataErrors.RateLimited, err.message);
    throw err;
  }
}

export function taskToWire(t: TaskRow) {
  return {
    id: t.id,
    queue: t.kind === 'tokens' ? 'refresh_tokens' : 'refresh_contracts',
    status: t.status,
    try: t.tries,
    runAt: t.created_at.toISOString(),
    lastRanAt: t.last_ran_at?.toISOString() ?? null,
    createdAt: t.created_at.toISOString(),
    payload: { chainId: t.chain_id, contractAddress: t.contract_address, refreshAll: t.refresh_all, newMints: t.only_new, source: t.source },
    result: { total: t.total, succeeded: t.succeeded, failed: t.failed, enumerated: t.enumerated, cancelled: t.cancelled, error: t.last_error, finishedAt: t.finished_at?.toISOString() ?? null },
  };
}

/** Refresh tasks: every method needs a key, and a task is visible only to the project that made it. */
export function refreshMethods(s: RefreshDeps): Record<string, MethodDef<any>> {
  const project = (ctx: RpcContext) => ctx.project!.id;
  const tokens = async (ctx: RpcContext, chainID: string, contract: Address, ids: string[] | undefined, all: boolean, onlyNew = false) => {
    const chain = chainFor(s, chainID, E);
    const r = all || !ids?.length ? await s.refresh.enqueueAllTokens(project(ctx), chain, contract, { onlyNew }) : await s.refresh.enqueueTokens(project(ctx), chain, contract, ids);
    s.worker.nudge();
    return r.taskId;
  };
  const req = 'required' as const;
  return {
    EnqueueTokensForRefresh: method({
      auth: req,
      input: z.object({ chainID: ChainArg, contractAddress: AddressArg, tokenIDs: TokenIds.optional(), refreshAll: z.boolean().optional() }),
      handler: (a, ctx) => guard(async () => ({ taskId: await tokens(ctx, a.chainID, a.contractAddress, a.tokenIDs, !!a.refreshAll) })),
    }),
    RefreshTokenMetadata: method({
      auth: req,
      input: z.object({ chainID: ChainArg, contractAddress: AddressArg, tokenIDs: TokenIds.optional(), newMints: z.boolean().optional(), refreshAll: z.boolean().optional() }),
      handler: (a, ctx) =>
        guard(async () => {
          const id = await tokens(ctx, a.chainID, a.contractAddress, a.tokenIDs, !!a.refreshAll || (!!a.newMints && !a.tokenIDs?.length), !!a.newMints);
          return { taskID: id, taskId: id };
        }),
    }),
    RefreshContractTokens: method({
      auth: req,
      input: z.intersection(ChainEither, z.object({ contractAddress: AddressArg, tokenIDs: TokenIds.min(1) })),
      handler: (a, ctx) => guard(async () => ({ taskID: await tokens(ctx, (a.chainID ?? a.chainHandle)!, a.contractAddress, a.tokenIDs, false) })),
    }),
    RefreshAllContractTokens: method({
      auth: req,
      input: z.intersection(ChainEither, z.object({ contractAddress: AddressArg })),
      handler: (a, ctx) => guard(async () => ({ taskID: await tokens(ctx, (a.chainID ?? a.chainHandle)!, a.contractAddress, undefined, true), retryAfter: 0 })),
    }),
    RefreshContractInfo: method({
      auth: req,
      input: z.intersection(ChainEither, z.object({ contractAddress: AddressArg })),
      handler: (a, ctx) =>
        guard(async () => {
          const r = await s.refresh.enqueueContracts(project(ctx), chainFor(s, (a.chainID ?? a.chainHandle)!, E), [a.contractAddress]);
          s.worker.nudge();
          return { taskID: r.taskId };
        }),
    }),
    RefreshContractInfoBatch: method({
      auth: req,
      input: z.object({ chainID: ChainArg, contractAddresses: z.array(AddressArg).min(1).max(100, 'at most 100 contractAddresses per call') }),
      handler: (a, ctx) =>
        guard(async () => {
          const r = await s.refresh.enqueueContracts(project(ctx), chainFor(s, a.chainID, E), a.contractAddresses);
          s.worker.nudge();
          return { taskID: r.taskId };
        }),
    }),
    GetTokenRefreshStatus: method({ auth: req, input: TaskIdArgs, handler: (id, ctx) => guard(async () => ({ status: (await s.refresh.taskFor(project(ctx), id)).status })) }),
    GetTaskStatus: method({ auth: req, input: TaskIdArgs, handler: (id, ctx) => guard(async () => ({ status: (await s.refresh.taskFor(project(ctx), id)).status })) }),
    GetTask: method({ auth: req, input: TaskIdArgs, handler: (id, ctx) => guard(async () => ({ task: taskToWire(await s.refresh.taskFor(project(ctx), id)) })) }),
    GetTokenRefreshResult: method({
      auth: req,
      input: TaskIdArgs,
      handler: (id, ctx) =>
        guard(async () => {
          const r = await s.refresh.result(project(ctx), id);
          return { status: r.task.status, tokens: r.tokens, failureReasons: r.failureReasons };
        }),
    }),
    CancelRefreshJob: method({ auth: req, input: TaskIdArgs, handler: (id, ctx) => guard(async () => ({ ok: await s.refresh.cancel(project(ctx), id) })) }),
  };
}
