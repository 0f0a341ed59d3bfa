import { z } from 'zod';
import { ChainArg, MetadataErrors, type MethodDef, RpcError, method } from '../../http/index.ts';
import { AdjustmentConflict, NativeAmount, TankRefused, adjustmentWire, fromWei, gasTankWire, ledgerWire, usdOf } from '../../relayer/balances/index.ts';
import { PageArgs, ProjectId, When, chainIdArg, chainName, cutPage, idCursor, type ConsoleArgDeps } from '../args.ts';
import type { ConsoleDeps } from '../deps.ts';
import type { Services } from '../../services.ts';

/** What the gas tank methods read: the balances, the relayers, and the chains' names. */
export type BalanceServices = ConsoleArgDeps & Pick<Services, 'balances' | 'relayers'>;

/**
 * A project's balance per relayed network for the console: the balance beside its USD value, the
 * ledger (adjustments, debits, reversals) and spend per day. The relayer's admin API has the same
 * operations under the reference's names (GetProjectBalance, AdjustProjectBalance, …).
 */
export function balanceMethods({ s, q }: ConsoleDeps<BalanceServices>): Record<string, MethodDef<any>> {
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
    /**
     * The ledger newest first, a page at a time (`cursor`: the `nextCursor` of the page before), of a
     * kind and a window of time, with how many entries the filter keeps. `page` (offset pages) is the
     * older form, still answered.
     */
    ListProjectLedger: method({
      input: z.object({
        projectId: ProjectId,
        chainID: ChainArg,
        page: z.number().int().min(0).optional(),
        ...PageArgs,
        kind: z.enum(['adjustment', 'debit', 'reversal']).optional(),
        from: When.optional(),
        to: When.optional(),
      }),
      handler: async (a) => {
        await requireProject(a.projectId);
        const chainId = relayedChain(a.chainID);
        const size = a.pageSize ?? 50;
        const filter = { kind: a.kind, from: a.from, to: a.to };
        let before = idCursor(a.cursor);
        // The offset form: the id just above the page's first row is its cursor.
        if (before === undefined && a.page) {
          const skipped = await b.tanks.ledgerPage(a.projectId, chainId, { ...filter, limit: a.page * size });
          before = skipped.length < a.page * size ? 0 : skipped[skipped.length - 1].id;
        }
        const [rows, total] = await Promise.all([b.tanks.ledgerPage(a.projectId, chainId, { ...filter, before, limit: size + 1 }), b.tanks.ledgerCount(a.projectId, chainId, filter)]);
        const page = cutPage(rows, size, (e) => String(e.id));
        return { entries: page.rows.map((e) => ({ ...ledgerWire(e), paidWei: e.paidWei.toString() })), more: page.nextCursor !== null, nextCursor: page.nextCursor, total };
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
