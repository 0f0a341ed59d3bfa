import { z } from 'zod';
import { ChainArg, MetadataErrors, type MethodDef, NoArgs, RpcError, method } from '../../http/index.ts';
import { KEY_KINDS, type AccessKeyInfo } from '../../store/access-keys.ts';
import { normalOrigin } from '../../access/key-kinds.ts';
import { ProjectExistsError } from '../../store/projects.ts';
import { Id, PageArgs, ProjectId, chainIdArg, cutPage, idCursor } from '../args.ts';
import type { ConsoleDeps } from '../deps.ts';
import type { Services } from '../../services.ts';

/** What the project methods use: projects, access keys, the key cache and the rate limiter. */
export type ProjectServices = UsageServices & Pick<Services, 'accessKeys' | 'auth' | 'projects' | 'rateLimiter'>;
import { projectTotals, type UsageServices } from './usage.ts';

const Name = z.string().trim().min(1, 'must not be empty').max(100);
const Label = z.string().trim().max(100);
const Rate = z.number().positive().max(1_000_000);
const Burst = z.number().int().min(1).max(1_000_000);
const Kind = z.enum(KEY_KINDS);
/** A publishable key's allowed origins, as browsers send them (scheme://host[:port]); an empty list: any. */
const Origins = z
  .array(z.string().max(300))
  .max(100)
  .transform((list, ctx) => {
    const out: string[] = [];
    for (const o of list) {
      const n = normalOrigin(o);
      if (!n) ctx.addIssue({ code: 'custom', message: `"${o.slice(0, 100)}" is not an origin: scheme://host[:port], http or https, no path` });
      else if (!out.includes(n)) out.push(n);
    }
    return out.length ? out : null;
  });

const SECRET_HAS_NO_ORIGINS = 'a secret key has no allowed origins: it is refused from every browser (any Origin header)';

/** Projects and their access keys. */
export function projectMethods({ s, q }: ConsoleDeps<ProjectServices>): Record<string, MethodDef<any>> {
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
    /** `kind`: publishable (the default: reads, relays, streams; may be held to `allowedOrigins`) or secret (also writes; refused from browsers). */
    CreateAccessKey: method({
      input: z.object({ projectId: ProjectId, label: Label.optional(), ratePerSec: Rate.optional(), rateBurst: Burst.optional(), kind: Kind.optional(), allowedOrigins: Origins.optional() }),
      handler: async (a) => {
        const p = await project(a.projectId);
        if (p.archivedAt) throw new RpcError(MetadataErrors.Fail, `project ${p.name} is archived`);
        if (a.kind === 'secret' && a.allowedOrigins) throw new RpcError(MetadataErrors.InvalidArgument, SECRET_HAS_NO_ORIGINS);
        const { key, info } = await s.accessKeys.create(a.projectId, a.label ?? '', { kind: a.kind, allowedOrigins: a.allowedOrigins, ratePerSec: a.ratePerSec, rateBurst: a.rateBurst });
        // The only time the key is shown: the database keeps its hash.
        return { accessKey: key, key: keyWire(info) };
      },
    }),
    /** A new key in place of a live one (same kind, label, origins and limits); the old one is revoked at once. */
    RotateAccessKey: method({
      input: z.object({ projectId: ProjectId, keyId: Id }),
      handler: async (a) => {
        const rotated = await s.accessKeys.rotate(a.projectId, a.keyId);
        if (!rotated) throw new RpcError(MetadataErrors.NotFound, `no live key ${a.keyId} in project ${a.projectId}`);
        s.auth.forgetAll();
        return { accessKey: rotated.key, key: keyWire(rotated.info) };
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
        /** A publishable key's allowed origins; an empty list: any origin. */
        allowedOrigins: Origins.optional(),
      }),
      handler: async (a) => {
        const limits = a.defaultRateLimit ? { ratePerSec: null, rateBurst: null } : { ratePerSec: a.ratePerSec, rateBurst: a.rateBurst };
        const key = await s.accessKeys.update(a.projectId, a.keyId, { label: a.label, ...limits, allowedOrigins: a.allowedOrigins });
        if (!key) {
          const secret = a.allowedOrigins && (await s.accessKeys.list(a.projectId)).some((k) => k.id === a.keyId && k.kind === 'secret');
          throw secret ? new RpcError(MetadataErrors.InvalidArgument, SECRET_HAS_NO_ORIGINS) : new RpcError(MetadataErrors.NotFound, `no key ${a.keyId} in project ${a.projectId}`);
        }
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
