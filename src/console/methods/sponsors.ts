import type { Address, Hex } from 'viem';
import { z } from 'zod';
import { MetadataErrors, RpcError } from '../../http/errors.ts';
import { AddressArg, ChainArg } from '../../http/services/args.ts';
import { method, type MethodDef } from '../../http/webrpc.ts';
import type { DecodedCall } from '../../relayer/intake/bundle.ts';
import { SponsorConflict, SponsorKind, coverage, sponsorWire, type SponsorRule } from '../../relayer/intake/sponsors.ts';
import { RelayerPage as Page, paging } from '../../http/services/relayer.ts';
import { Id, ProjectId, Wei, chainIdArg, chainName } from '../args.ts';
import type { ConsoleDeps } from '../deps.ts';

const Hexdata = z.string().regex(/^0x([0-9a-fA-F]{2})*$/, 'must be 0x-prefixed hex bytes');

/**
 * Sponsorship rules per project and network, with the reference's GasSponsor shapes plus `kind`,
 * the network, and the daily spend cap (`dailyCapWei`, "" or absent: none) with today's spend.
 */
export function sponsorMethods({ s, q }: ConsoleDeps): Record<string, MethodDef<any>> {
  const requireProject = async (id: number) => {
    if (!(await q.project(id))) throw new RpcError(MetadataErrors.ProjectNotFound, `no project ${id}`);
  };
  const wire = async (rules: SponsorRule[]) => {
    const spend = await s.spendCaps.spendOf(rules.map((r) => r.id));
    return rules.map((r) => {
      const x = spend.get(r.id);
      return { ...sponsorWire(r), network: chainName(s, r.chainId), dailyCapWei: x?.capWei?.toString() ?? null, spentTodayWei: (x?.spentTodayWei ?? 0n).toString() };
    });
  };
  const existing = async (projectId: number, id: number) => {
    const row = await s.sponsors.get(projectId, id);
    if (!row) throw new RpcError(MetadataErrors.NotFound, `no gas sponsor ${id} in project ${projectId}`);
    return row;
  };
  // "" clears a cap; a JSON null would be dropped before validation, so it cannot mean "clear".
  const Cap = z.union([z.literal(''), Wei]).optional();
  const capOf = (v: bigint | '' | undefined) => (v === undefined ? undefined : v === '' ? null : v);

  return {
    ListGasSponsors: method({
      input: z.object({ projectId: ProjectId, chainID: ChainArg.optional(), page: Page }),
      handler: async (a) => {
        await requireProject(a.projectId);
        const p = paging(a.page, 50);
        const { page, rows } = p.cut(await s.sponsors.list(a.projectId, a.chainID ? chainIdArg(s, a.chainID) : null, p.offset, p.limit));
        return { page, gasSponsors: await wire(rows) };
      },
    }),
    AddGasSponsor: method({
      input: z.object({
        projectId: ProjectId,
        chainID: ChainArg,
        address: AddressArg,
        kind: SponsorKind.optional(),
        name: z.string().max(200).optional(),
        active: z.boolean().optional(),
        dailyCapWei: Cap,
      }),
      handler: async (a) => {
        await requireProject(a.projectId);
        const chainId = chainIdArg(s, a.chainID);
        let rule: SponsorRule;
        try {
          rule = await s.sponsors.add({ projectId: a.projectId, chainId, kind: a.kind ?? 'ANY', address: a.address, name: a.name ?? '', active: a.active ?? true });
        } catch (err) {
          if (err instanceof SponsorConflict) throw new RpcError(MetadataErrors.RequestConflict, err.message);
          throw err;
        }
        const cap = capOf(a.dailyCapWei);
        if (cap !== undefined) await s.spendCaps.setCap(rule.id, cap);
        return { status: true, gasSponsor: (await wire([rule]))[0] };
      },
    }),
    UpdateGasSponsor: method({
      input: z.object({ projectId: ProjectId, id: Id, name: z.string().max(200).optional(), active: z.boolean().optional(), dailyCapWei: Cap }),
      handler: async (a) => {
        await existing(a.projectId, a.id);
        const cap = capOf(a.dailyCapWei);
        if (cap !== undefined) await s.spendCaps.setCap(a.id, cap);
        const rule = (await s.sponsors.update(a.projectId, a.id, { name: a.name, active: a.active }))!;
        return { status: true, gasSponsor: (await wire([rule]))[0] };
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
     * Would a call from `wallet` to `target` with `data` (and `value` wei) be sponsored for the
     * project? The relayer's own coverage rule answers, then the daily caps; says which rule matched.
     */
    CheckSponsorship: method({
      input: z.object({ projectId: ProjectId, chainID: ChainArg, wallet: AddressArg, target: AddressArg, data: Hexdata.optional(), value: Wei.optional() }),
      handler: async (a) => {
        await requireProject(a.projectId);
        const chainId = chainIdArg(s, a.chainID);
        const rules = await s.sponsors.list(a.projectId, chainId);
        const data = (a.data ?? '0x').toLowerCase() as Hex;
        const call: DecodedCall = {
          id: '0x',
          kind: 'wallet',
          entrypoint: a.wallet,
          bundles: [{ id: '0x', wallet: a.wallet, space: 0n, nonce: 0n, txs: [], depth: 0 }],
          leaves: [{ executor: a.wallet, target: a.target as Address, value: a.value ?? 0n, data, delegateCall: false, revertOnError: true, bundle: 0, index: 0 }],
          deploys: [],
          candidates: [],
        };
        const covered = coverage(call, rules);
        // One wei more than today's spend tells whether a cap is already used up.
        const capped = await s.spendCaps.fits(covered, 1n);
        const matched = rules.filter((r) => covered.ruleIds.includes(r.id));
        return {
          sponsored: capped.sponsored,
          rule: matched.length ? (await wire(matched))[0] : null,
          reason: capped.sponsored ? `covered by ${matched.map((r) => `${r.kind} ${r.address} (#${r.id})`).join(', ')}` : capped.reason,
        };
      },
    }),
  };
}
