import type { Address } from 'viem';
import { z } from 'zod';
import { PolicyError, PolicyFields, SponsorConflict, SponsorKind, mergePolicy, policyPatch, sponsorWire, type ChainRelayer, type RuleOwner } from '../../relayer/index.ts';
import type { Services } from '../../services.ts';
import { targetProblem } from '../../untrusted/post.ts';
import { RelayerErrors, RpcError } from '../core/errors.ts';
import { method, type MethodDef, type RpcContext } from '../core/webrpc.ts';
import { ignoredWire, lenient } from './args.ts';
import { RelayerPage, paging } from './paging.ts';

/** What the sponsorship methods use: the sponsors' rules, the ecosystems and the projects. */
export type SponsorDeps = Pick<Services, 'sponsors' | 'ecosystems' | 'projects'>;

/** A sponsorship rule's gas ceiling per meta-transaction (metarelay's extra field). */
export const MaxGas = z.number().int().min(21_000).max(1_000_000_000);
/** A sponsorship rule's approval webhook: an http(s) URL, or "" for none (its address is vetted when it is called). */
export const WebhookUrl = z
  .string()
  .max(2_000)
  .refine((u) => u === '' || !targetProblem(u), { error: (i) => targetProblem(String(i.input)) ?? 'invalid URL' });
export const WebhookToken = z.string().max(500);
/** The reference's argument some Sequence clients still send; only the single tank this relayer has (0) is accepted. */
const GasTankId = z.literal(0).optional();
const Addr = z
  .string()
  .regex(/^0x[0-9a-fA-F]{40}$/, 'not a 20-byte 0x address')
  .transform((a) => a.toLowerCase() as Address);
const Id = z.number().int().positive();
/** The fields a rule is added and changed with, beside its owner, target and gas ceiling. */
const RULE_FIELDS = {
  name: z.string().max(200).optional(),
  active: z.boolean().optional(),
  webhookUrl: WebhookUrl.optional(),
  webhookAuthToken: WebhookToken.optional(),
  gasTankId: GasTankId,
  ...PolicyFields,
};

export const SPONSOR_ADMIN_METHODS = [
  'ListGasSponsors',
  'GetGasSponsor',
  'AddGasSponsor',
  'UpdateGasSponsor',
  'RemoveGasSponsor',
  'AddressGasSponsors',
  'ListEcosystemGasSponsors',
  'GetEcosystemGasSponsor',
  'AddEcosystemGasSponsor',
  'UpdateEcosystemGasSponsor',
  'RemoveEcosystemGasSponsor',
];

/** A rule's policy fields checked against the rule as it is (none for a new one) and the network's USD price source. */
function policyOf(r: ChainRelayer, a: Parameters<typeof policyPatch>[0], base?: Parameters<typeof mergePolicy>[0]) {
  try {
    return mergePolicy(base, policyPatch(a), { usdPriced: r.usdPriced, network: r.network }).patch;
  } catch (err) {
    if (err instanceof PolicyError) throw new RpcError(RelayerErrors.InvalidArgument, err.message);
    throw err;
  }
}

/**
 * The sponsorship rules' admin methods, for a project's rules (`…GasSponsor`, keyed by `projectId`) and
 * an ecosystem's (`…EcosystemGasSponsor`, keyed by `ecosystemId`: they sponsor every project of the
 * ecosystem). One set of handlers for both; a rule is only reached through its own owner.
 */
export function sponsorMethods(s: SponsorDeps, relayerFor: (ctx: RpcContext) => ChainRelayer): Record<string, MethodDef<z.ZodType>> {
  const owners = {
    project: {
      prefix: '',
      key: 'projectId' as const,
      owner: (id: number): RuleOwner => id,
      name: (id: number) => `project ${id}`,
      exists: async (id: number) => {
        if (!(await s.projects.getById(id))) throw new RpcError(RelayerErrors.ProjectNotFound, `no project ${id}`);
      },
    },
    ecosystem: {
      prefix: 'Ecosystem',
      key: 'ecosystemId' as const,
      owner: (id: number): RuleOwner => ({ ecosystemId: id }),
      name: (id: number) => `ecosystem ${id}`,
      exists: async (id: number) => {
        if (!(await s.ecosystems.getById(id))) throw new RpcError(RelayerErrors.NotFound, `no ecosystem ${id} (create one with: metarelay ecosystems add NAME)`);
      },
    },
  };
  const out: Record<string, MethodDef<z.ZodType>> = {};
  for (const o of Object.values(owners)) {
    const Owner = { [o.key]: Id } as Record<'projectId' | 'ecosystemId', typeof Id>;
    const ownerId = (a: Record<string, unknown>) => a[o.key] as number;
    const notFound = (a: Record<string, unknown>, id: number) => new RpcError(RelayerErrors.NotFound, `no gas sponsor ${id} in ${o.name(ownerId(a))}`);
    out[`List${o.prefix}GasSponsors`] = method({
      input: z.object({ ...Owner, page: RelayerPage }).loose(),
      handler: async (a, ctx) => {
        const r = relayerFor(ctx);
        const p = paging(a.page, 50);
        const { page, rows } = p.cut(await s.sponsors.list(o.owner(ownerId(a)), r.chainId, p.offset, p.limit));
        return { page, gasSponsors: rows.map(sponsorWire) };
      },
    });
    out[`Get${o.prefix}GasSponsor`] = method({
      input: z.object({ ...Owner, id: Id }).loose(),
      handler: async (a) => {
        const row = await s.sponsors.get(o.owner(ownerId(a)), a.id);
        if (!row) throw notFound(a, a.id);
        return { gasSponsor: sponsorWire(row) };
      },
    });
    out[`Add${o.prefix}GasSponsor`] = method({
      input: lenient({ ...Owner, address: Addr, kind: SponsorKind.optional(), maxGasLimit: MaxGas.optional(), ...RULE_FIELDS }),
      handler: async ({ args: a, ignoredFields }, ctx) => {
        const r = relayerFor(ctx);
        const id = ownerId(a);
        await o.exists(id);
        const policy = policyOf(r, a);
        const fields = {
          chainId: r.chainId,
          kind: a.kind ?? 'ANY',
          address: a.address,
          name: a.name ?? '',
          active: a.active ?? true,
          maxGas: a.maxGasLimit ?? null,
          webhookUrl: a.webhookUrl,
          webhookAuthToken: a.webhookAuthToken,
          policy,
        };
        try {
          const row = await s.sponsors.add(o.key === 'projectId' ? { projectId: id, ...fields } : { ecosystemId: id, ...fields });
          return { status: true, gasSponsor: sponsorWire(row), ...ignoredWire(ignoredFields) };
        } catch (err) {
          if (err instanceof SponsorConflict) throw new RpcError(RelayerErrors.RequestConflict, err.message);
          throw err;
        }
      },
    });
    out[`Update${o.prefix}GasSponsor`] = method({
      // null removes the gas ceiling.
      input: lenient({ ...Owner, id: Id, maxGasLimit: MaxGas.nullable().optional(), ...RULE_FIELDS }),
      handler: async ({ args: a, ignoredFields }, ctx) => {
        const r = relayerFor(ctx);
        const owner = o.owner(ownerId(a));
        const current = await s.sponsors.get(owner, a.id);
        if (!current) throw notFound(a, a.id);
        const policy = policyOf(r, a, current.policy);
        const row = await s.sponsors.update(owner, a.id, { name: a.name, active: a.active, maxGas: a.maxGasLimit, webhookUrl: a.webhookUrl, webhookAuthToken: a.webhookAuthToken, policy });
        if (!row) throw notFound(a, a.id);
        return { status: true, gasSponsor: sponsorWire(row), ...ignoredWire(ignoredFields) };
      },
    });
    out[`Remove${o.prefix}GasSponsor`] = method({
      input: z.object({ ...Owner, id: Id }).loose(),
      handler: async (a) => {
        if (!(await s.sponsors.remove(o.owner(ownerId(a)), a.id))) throw notFound(a, a.id);
        return { status: true };
      },
    });
  }
  out.AddressGasSponsors = method({
    input: z.object({ address: Addr, page: RelayerPage }).loose(),
    handler: async (a, ctx) => {
      const r = relayerFor(ctx);
      const p = paging(a.page, 50);
      const { page, rows } = p.cut(await s.sponsors.byAddress(a.address, r.chainId, p.offset, p.limit));
      return { page, gasSponsors: rows.map(sponsorWire) };
    },
  });
  return out;
}
