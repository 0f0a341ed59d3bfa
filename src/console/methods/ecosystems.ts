import { z } from 'zod';
import { MetadataErrors, type MethodDef, RpcError, method } from '../../http/index.ts';
import { sponsorWire } from '../../relayer/index.ts';
import { Id, chainName, type ConsoleArgDeps } from '../args.ts';
import type { ConsoleDeps } from '../deps.ts';
import type { Services } from '../../services.ts';

/** What the ecosystem methods use: the ecosystems and the sponsors' rules, and the chains' names. */
export type EcosystemServices = ConsoleArgDeps & Pick<Services, 'ecosystems' | 'sponsors'>;

const NoArgs = z.object({}).optional();

/**
 * The Ecosystems page (docs/sponsorship.md#ecosystems): each named group of projects, its projects and
 * the sponsorship rules that cover them all. Read-only: ecosystems are made, joined and left with
 * `metarelay ecosystems`, their rules with the relayer's …EcosystemGasSponsor methods.
 */
export function ecosystemMethods({ s, q }: ConsoleDeps<EcosystemServices>): Record<string, MethodDef<any>> {
  const projectsOf = async (ids: number[]) =>
    (await Promise.all(ids.map((id) => q.project(id)))).filter((p): p is NonNullable<typeof p> => !!p).map((p) => ({ id: p.id, name: p.name, archived: !!p.archivedAt }));
  return {
    /** Every ecosystem with its projects and how many sponsorship rules it has (active and in all). */
    ListEcosystems: method({
      input: NoArgs,
      handler: async () => {
        const all = await s.ecosystems.list();
        return {
          ecosystems: await Promise.all(
            all.map(async (e) => {
              const rules = await s.sponsors.list({ ecosystemId: e.id }, null);
              return { id: e.id, name: e.name, createdAt: e.createdAt, projects: await projectsOf(e.projectIds), rules: rules.length, activeRules: rules.filter((r) => r.active).length };
            }),
          ),
        };
      },
    }),
    /** One ecosystem: its projects and its sponsorship rules with their policies and spend. */
    GetEcosystem: method({
      input: z.object({ ecosystemId: Id }),
      handler: async (a) => {
        const e = await s.ecosystems.getById(a.ecosystemId);
        if (!e) throw new RpcError(MetadataErrors.NotFound, `no ecosystem ${a.ecosystemId}`);
        const rules = await s.sponsors.list({ ecosystemId: e.id }, null);
        return {
          ecosystem: { id: e.id, name: e.name, createdAt: e.createdAt },
          projects: await projectsOf(e.projectIds),
          // The approval webhook's token never leaves the server; whether there is one is enough here.
          rules: rules.map((r) => ({ ...sponsorWire(r), network: chainName(s, r.chainId), webhookAuthToken: undefined, webhookAuthTokenSet: r.webhookAuthToken !== '' })),
        };
      },
    }),
  };
}
