import { z } from 'zod';
import { MetadataErrors, RpcError } from '../../http/errors.ts';
import { ChainArg } from '../../http/services/args.ts';
import { method, type MethodDef } from '../../http/webrpc.ts';
import { AdjustmentConflict, NativeAmount, TankRefused, adjustmentWire, fromWei, gasTankWire, ledgerWire, usdOf } from '../../relayer/balances/index.ts';
import { ProjectId, chainIdArg, chainName } from '../args.ts';
import type { ConsoleDeps } from '../deps.ts';

/**
 * A project's balance per relayed network for the console: the balance beside its USD value, the
 * ledger (adjustments, debits, reversals) and spend per day. The relayer's admin API has the same
 * operations under the reference's names (GetProjectBalance, AdjustProjectBalance, …).
 */
export function balanceMethods({ s, q }: ConsoleDeps): Record<string, MethodDef<any>> {
  const b = s.balances;
  const requireProject = async (id: number) => {
    const p = await q.project(id);
    if (!p) throw new RpcError(MetadataErrors.ProjectNotFound, `no project ${id}`);
    return p;
  };
  const relayedChain = (chainID: string) => {
    const chainId = chainIdArg(s, chainID);
    if (!s.relayers.has(chainId)) throw new RpcError(MetadataErrors.ChainNotFound, `no relayer is configured for network ${chainID}`);
    return chainId;
  };

  return {
    GetProjectBalances: method({
      input: z.object({ projectId: ProjectId }),
      handler: async (a) => {
        await requireProject(a.projectId);
        const balances = await Promise.all(
          [...s.relayers.keys()].map(async (chainId) => {
            const [t, rate] = await Promise.all([b.tanks.ofProject(a.projectId, chainId), b.usdRate(chainId)]);
            const held = t ? await b.tanks.held(t.id) : 0n;
            return { chainId, network: chainName(s, chainId), limited: !!t && !t.unlimited, tank: t ? gasTankWire(t, held, rate) : null, usdRate: rate };
          }),
        );
        return { balances };
      },
    }),
    AdjustProjectBalance: method({
      input: z.object({ projectId: ProjectId, chainID: ChainArg, amount: NativeAmount, identifier: z.string().trim().min(1).max(200) }),
      handler: async (a) => {
        const p = await requireProject(a.projectId);
        const chainId = relayedChain(a.chainID);
        if (a.amount === 0n) throw new RpcError(MetadataErrors.InvalidArgument, 'amount must not be zero');
        const tank = await b.tanks.ensureForProject(p.id, chainId, p.name);
        try {
          const { entry, replay } = await b.tanks.adjust({ tankId: tank.id, amountWei: a.amount, identifier: a.identifier, usdRate: await b.usdRate(chainId) });
          return { replay, adjustment: adjustmentWire(entry) };
        } catch (err) {
          if (err instanceof AdjustmentConflict) throw new RpcError(MetadataErrors.RequestConflict, err.message);
          if (err instanceof TankRefused) throw new RpcError(MetadataErrors.InvalidArgument, err.message);
          throw err;
        }
      },
    }),
    ListProjectLedger: method({
      input: z.object({ projectId: ProjectId, chainID: ChainArg, page: z.number().int().min(0).optional(), pageSize: z.number().int().min(1).max(200).optional() }),
      handler: async (a) => {
        await requireProject(a.projectId);
        const chainId = relayedChain(a.chainID);
        const size = a.pageSize ?? 50;
        const rows = await b.tanks.entries(a.projectId, chainId, (a.page ?? 0) * size, size + 1);
        return { entries: rows.slice(0, size).map(ledgerWire), more: rows.length > size };
      },
    }),
    ProjectSpendByDay: method({
      input: z.object({ projectId: ProjectId, chainID: ChainArg, days: z.number().int().min(1).max(366).optional() }),
      handler: async (a) => {
        await requireProject(a.projectId);
        const chainId = relayedChain(a.chainID);
        const rate = await b.usdRate(chainId);
        const days = await b.tanks.spendByDay(a.projectId, chainId, a.days ?? 30);
        return { days: days.map((d) => ({ day: d.day, spent: fromWei(d.wei), spentWei: d.wei.toString(), spentUsd: usdOf(d.wei, rate), transactions: d.count })) };
      },
    }),
  };
}
