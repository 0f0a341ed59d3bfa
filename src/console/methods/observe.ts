import { z } from 'zod';
import { MetadataErrors, type MethodDef, RpcError, method } from '../../http/index.ts';
import { currentAlerts } from '../../relayer/index.ts';
import { projectRequestRepo } from '../../store/project-requests.ts';
import { PageArgs, ProjectId, chainName, cutPage, idCursor, type ConsoleArgDeps } from '../args.ts';
import type { ConsoleDeps } from '../deps.ts';
import type { Services } from '../../services.ts';

/** What the observe methods use: the alerts, the config and the database. */
export type ObserveServices = ConsoleArgDeps & Pick<Services, 'alerts' | 'config' | 'db'>;

/** What a project is doing and what is about to stop it: its recent requests and its alerts. */
export function observeMethods({ s, q }: ConsoleDeps<ObserveServices>): Record<string, MethodDef<any>> {
  const requests = projectRequestRepo(s.db);
  const requireProject = async (id: number) => {
    if (!(await q.project(id))) throw new RpcError(MetadataErrors.ProjectNotFound, `no project ${id}`);
  };
  return {
    /**
     * A project's recent requests newest first, a page at a time (`cursor`: the `nextCursor` before):
     * when, the method, the answer's status and latency, the access key's id and the client's network.
     * Only the newest console.requestLog.keepPerProject are kept.
     */
    ProjectRequests: method({
      input: z.object({ projectId: ProjectId, ...PageArgs }),
      handler: async (a) => {
        await requireProject(a.projectId);
        const size = a.pageSize ?? 50;
        const before = idCursor(a.cursor);
        const [read, total] = await Promise.all([requests.page(a.projectId, before === undefined ? null : String(before), size + 1), requests.count(a.projectId)]);
        const { rows, nextCursor } = cutPage(read, size, (r) => r.id);
        return {
          requests: rows.map((r) => ({
            id: Number(r.id),
            at: r.at.toISOString(),
            method: r.method,
            status: r.status,
            ms: r.ms,
            keyId: r.key_id == null ? null : Number(r.key_id),
            clientNet: r.client_net,
          })),
          nextCursor,
          total,
          keep: s.config.console.requestLog.keepPerProject,
        };
      },
    }),
    /** A project's sponsorship rules near a cap and balances near empty, now (console.alerts). */
    ProjectAlerts: method({
      input: z.object({ projectId: ProjectId }),
      handler: async (a) => {
        await requireProject(a.projectId);
        const alerts = await currentAlerts(s.alerts, s.config.console.alerts, a.projectId);
        return { alerts: alerts.map(({ key: _key, ...x }) => ({ ...x, network: chainName(s, x.chainId) })) };
      },
    }),
  };
}
