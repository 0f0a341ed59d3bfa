import type { Address, Hex } from 'viem';
import { z } from 'zod';
import { AddressArg, ChainArg, MaxGas, MetadataErrors, type MethodDef, RelayerPage as Page, RpcError, WebhookToken, WebhookUrl, method, paging } from '../../http/index.ts';
import { PolicyError, PolicyFields, SponsorConflict, SponsorKind, mergePolicy, policyPatch, sponsorWire, type SponsorRule } from '../../relayer/index.ts';
import { Id, ProjectId, Wei, chainIdArg, chainName, type ConsoleArgDeps } from '../args.ts';
import type { ConsoleDeps } from '../deps.ts';
import type { Services } from '../../services.ts';

/** What the sponsorship methods use: the sponsors' rules, the relayers, and the chains' lookup and names. */
export type SponsorServices = ConsoleArgDeps & Pick<Services, 'relayers' | 'sponsors'>;

const Hexdata = z.string().regex(/^0x([0-9a-fA-F]{2})*$/, 'must be 0x-prefixed hex bytes');

/** What the page shows for a set approval token: it is write-only here (the page never gets it back). */
const MASKED = '••••••••';

/**
 * Sponsorship rules per project and network, with the reference's GasSponsor shapes plus `kind`, the
 * network, the gas ceiling and the policy (caps in wei and USD, validity window, wallet lists) with
 * what was spent (docs/sponsorship.md). The approval webhook's token is write-only: `webhookAuthToken`
 * comes back masked, `webhookAuthTokenSet` says whether there is one.
 */
export function sponsorMethods({ s, q }: ConsoleDeps<SponsorServices>): Record<string, MethodDef<any>> {
  const requireProject = async (id: number) => {
    if (!(await q.project(id))) throw new RpcError(MetadataErrors.ProjectNotFound, `no project ${id}`);
  };
  const wire = (r: SponsorRule) => ({
    ...sponsorWire(r),
    network: chainName(s, r.chainId),
    webhookAuthToken: r.webhookAuthToken ? MASKED : '',
    webhookAuthTokenSet: r.webhookAuthToken !== '',
  });
  const existing = async (projectId: number, id: number) => {
    const row = await s.sponsors.get(projectId, id);
    if (!row) throw new RpcError(MetadataErrors.NotFound, `no gas sponsor ${id} in project ${projectId}`);
    return row;
  };
  /** The policy fields against the rule as it is; USD caps need the network's relayer to have a native/USD feed. */
  const policyOf = (chainId: number, a: Parameters<typeof policyPatch>[0], base?: SponsorRule) => {
    try {
      return mergePolicy(base?.policy, policyPatch(a), { usdPriced: s.relayers.get(chainId)?.usdPriced === true, network: chainName(s, chainId) }).patch;
    } catch (err) {
      if (err instanceof PolicyError) throw new RpcError(MetadataErrors.InvalidArgument, err.message);
      throw err;
    }
  };
  const Editable = {
    name: z.string().max(200).optional(),
    active: z.boolean().optional(),
    maxGasLimit: z.union([z.literal(''), MaxGas]).optional(),
    webhookUrl: WebhookUrl.optional(),
    webhookAuthToken: WebhookToken.optional(),
    ...PolicyFields,
  };
  // "" removes the ceiling: a JSON null is dropped before validation, so it cannot mean "clear".
  const maxGasOf = (v: number | '' | undefined) => (v === undefined ? undefined : v === '' ? null : v);

  return {
    ListGasSponsors: method({
      input: z.object({ projectId: ProjectId, chainID: ChainArg.optional(), page: Page }),
      handler: async (a) => {
        await requireProject(a.projectId);
        const p = paging(a.page, 50);
        const { page, rows } = p.cut(await s.sponsors.list(a.projectId, a.chainID ? chainIdArg(s, a.chainID) : null, p.offset, p.limit));
        return { page, gasSponsors: rows.map(wire) };
      },
    }),
    AddGasSponsor: method({
      input: z.object({ projectId: ProjectId, chainID: ChainArg, address: AddressArg, kind: SponsorKind.optional(), ...Editable }).strict(),
      handler: async (a) => {
        await requireProject(a.projectId);
        const chainId = chainIdArg(s, a.chainID);
        const policy = policyOf(chainId, a);
        try {
          const rule = await s.sponsors.add({
            projectId: a.projectId,
            chainId,
            kind: a.kind ?? 'ANY',
            address: a.address,
            name: a.name ?? '',
            active: a.active ?? true,
            maxGas: maxGasOf(a.maxGasLimit) ?? null,
            webhookUrl: a.webhookUrl,
            webhookAuthToken: a.webhookAuthToken,
            policy,
          });
          return { status: true, gasSponsor: wire(rule) };
        } catch (err) {
          if (err instanceof SponsorConflict) throw new RpcError(MetadataErrors.RequestConflict, err.message);
          throw err;
        }
      },
    }),
    UpdateGasSponsor: method({
      input: z.object({ projectId: ProjectId, id: Id, ...Editable }).strict(),
      handler: async (a) => {
        const current = await existing(a.projectId, a.id);
        const policy = policyOf(current.chainId, a, current);
        const rule = (await s.sponsors.update(a.projectId, a.id, {
          name: a.name,
          active: a.active,
          maxGas: maxGasOf(a.maxGasLimit),
          webhookUrl: a.webhookUrl,
          webhookAuthToken: a.webhookAuthToken,
          policy,
        }))!;
        return { status: true, gasSponsor: wire(rule) };
      },
    }),
    RemoveGasSponsor: method({
      input: z.object({ projectId: ProjectId, id: Id }),
      handler: async (a) => {
        if (!(await s.sponsors.remove(a.projectId, a.id))) throw new RpcError(MetadataErrors.NotFound, `no gas sponsor ${a.id} in project ${a.projectId}`);
        return { status: true };
      },
    }),

    /**
     * Would a call from `wallet` to `target` with `data` (and `value` wei) be sponsored for the project?
     * The relayer decides exactly as for FeeOptions — coverage, every policy limit, the approval
     * webhooks (asked with stage "check") — costing it at `gasLimit` × the gas price now (without
     * gasLimit: 1 wei, and gas ceilings are not checked). Names the rule, or the first limit that stopped it.
     */
    CheckSponsorship: method({
      input: z.object({ projectId: ProjectId, chainID: ChainArg, wallet: AddressArg, target: AddressArg, data: Hexdata.optional(), value: Wei.optional(), gasLimit: MaxGas.optional() }),
      handler: async (a) => {
        await requireProject(a.projectId);
        const chainId = chainIdArg(s, a.chainID);
        const relayer = s.relayers.get(chainId);
        if (!relayer) throw new RpcError(MetadataErrors.InvalidArgument, `network ${chainName(s, chainId)} has no relayer: nothing is sponsored there`);
        const { decision, rules } = await relayer.checkSponsorship(
          a.projectId,
          { wallet: a.wallet as Address, target: a.target as Address, data: (a.data ?? '0x') as Hex, value: a.value ?? 0n },
          a.gasLimit === undefined ? null : BigInt(a.gasLimit),
        );
        const named = decision.sponsored ? decision.ruleIds[0] : decision.stop?.ruleId;
        const rule = rules.find((r) => r.id === named);
        return {
          sponsored: decision.sponsored,
          rule: rule ? wire(rule) : null,
          reason: decision.reason,
          stoppedBy: decision.stop,
        };
      },
    }),
  };
}
