import { z } from 'zod';
import { MetadataErrors, RpcError } from '../../http/errors.ts';
import { NoArgs } from '../../http/services/common.ts';
import { ChainArg } from '../../http/services/args.ts';
import { method, type MethodDef } from '../../http/webrpc.ts';
import type { AccessKeyInfo } from '../../store/access-keys.ts';
import { ProjectExistsError } from '../../store/projects.ts';
import { Id, PageArgs, ProjectId, chainIdArg, cutPage, idCursor } from '../args.ts';
import type { ConsoleDeps } from '../deps.ts';
import { projectTotals } from './usage.ts';

const Name = z.string().trim().min(1, 'must not be empty').max(100);
const Label = z.string().trim().max(100);
const Rate = z.number().positive().max(1_000_000);
const Burst = z.number().int().min(1).max(1_000_000);

/** Projects and their access keys. */
export function projectMethods({ s, q }: ConsoleDeps): Record<string, MethodDef<any>> {
  const project = async (id: number) => {
    const p = await q.project(id);
    if (!p) throw new RpcError(MetadataErrors.ProjectNotFound, `no project ${id}`);
    return p;
  };
  const named = async <T>(run: () => Promise<T>) => {
    try {
      return await run();
    } catch (err) {
      if (err instanceof ProjectExistsError) throw new RpcError(MetadataErrors.RequestConflict, err.message);
      throw err;
    }
  };
  const chainIds = (list: string[] | undefined) => (list === undefined ? undefined : [...new Set(list.map((c) => chainIdArg(s, c)))]);
  const keyWire = (k: AccessKeyInfo) => {
    const limit = s.rateLimiter.limitFor(k);
    return { ...k, rateLimit: limit, rateLimitIsDefault: k.ratePerSec == null && k.rateBurst == null };
  };

  return {
    /** Projects, each with its totals over the last 30 days (`totals`, from the usage roll-ups). */
    ListProjects: method({
      input: NoArgs,
      handler: async () => {
        const [projects, totals] = await Promise.all([q.projects(), projectTotals(s, new Date(Date.now() - 30 * 86_400_000))]);
        const none = { requests: 0, metaTxns: 0, succeeded: 0, successRate: null, spendUsd: null, spend: [] };
        return { projects: projects.map((p) => ({ ...p, totals: totals.get(p.id) ?? none })) };
      },
    }),
    CreateProject: method({
      input: z.object({ name: Name, allowedChainIDs: z.array(ChainArg).max(100).optional() }),
      handler: async (a) =>
        named(async () => {
          const ids = chainIds(a.allowedChainIDs);
          const { id } = await s.projects.create(a.name, ids ?? null);
          return { project: await project(id) };
        }),
    }),
    UpdateProject: method({
      input: z.object({ projectId: ProjectId, name: Name.optional(), archived: z.boolean().optional(), allowedChainIDs: z.array(ChainArg).max(100).optional() }),
      handler: async (a) =>
        named(async () => {
          await project(a.projectId);
          await s.projects.update(a.projectId, { name: a.name, archived: a.archived, allowedChainIds: chainIds(a.allowedChainIDs) });
          // Archiving stops the project's keys, and its networks travel with them: drop this process's
          // cached key answers so the change holds at once.
          if (a.archived !== undefined || a.allowedChainIDs !== undefined) s.auth.forgetAll();
          return { project: await project(a.projectId) };
        }),
    }),

    /** A project's keys newest first, live or revoked, whose label or prefix contains `search`, a page at a time, with counts. */
    ListAccessKeys: method({
      input: z.object({ projectId: ProjectId, ...PageArgs, state: z.enum(['live', 'revoked']).optional(), search: z.string().trim().max(100).optional() }),
      handler: async (a) => {
        await project(a.projectId);
        const size = a.pageSize ?? 50;
        const filter = { state: a.state, search: a.search || undefined };
        const [read, counts] = await Promise.all([s.accessKeys.page(a.projectId, filter, idCursor(a.cursor), size + 1), s.accessKeys.counts(a.projectId, filter)]);
        const { rows, nextCursor } = cutPage(read, size, (k) => String(k.id));
        return { accessKeys: rows.map(keyWire), nextCursor, total: a.state ? counts[a.state] : counts.live + counts.revoked, counts };
      },
    }),
    CreateAccessKey: method({
      input: z.object({ projectId: ProjectId, label: Label.optional(), ratePerSec: Rate.optional(), rateBurst: Burst.optional() }),
      handler: async (a) => {
        const p = await project(a.projectId);
        if (p.archivedAt) throw new RpcError(MetadataErrors.Fail, `project ${p.name} is archived`);
        const { key, info } = await s.accessKeys.create(a.projectId, a.label ?? '', { ratePerSec: a.ratePerSec, rateBurst: a.rateBurst });
        // The only time the key is shown: the database keeps its hash.
        return { accessKey: key, key: keyWire(info) };
      },
    }),
    UpdateAccessKey: method({
      input: z.object({
        projectId: ProjectId,
        keyId: Id,
        label: Label.optional(),
        ratePerSec: Rate.optional(),
        rateBurst: Burst.optional(),
        /** Drop the key's own limit: the configured default applies again. */
        defaultRateLimit: z.boolean().optional(),
      }),
      handler: async (a) => {
        const patch = a.defaultRateLimit ? { label: a.label, ratePerSec: null, rateBurst: null } : { label: a.label, ratePerSec: a.ratePerSec, rateBurst: a.rateBurst };
        const key = await s.accessKeys.update(a.projectId, a.keyId, patch);
        if (!key) throw new RpcError(MetadataErrors.NotFound, `no key ${a.keyId} in project ${a.projectId}`);
        // Limits travel with the cached key lookups.
        s.auth.forgetAll();
        return { key: keyWire(key) };
      },
    }),
    RevokeAccessKey: method({
      input: z.object({ projectId: ProjectId, keyId: Id }),
      handler: async (a) => {
        if (!(await s.accessKeys.revokeById(a.keyId, a.projectId))) throw new RpcError(MetadataErrors.NotFound, `no live key ${a.keyId} in project ${a.projectId}`);
        // This process refuses the key at once; others within auth.keyCacheMs.
        s.auth.forgetAll();
        return { ok: true };
      },
    }),
  };
}
