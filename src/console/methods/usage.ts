import { z } from 'zod';
import { MetadataErrors, type MethodDef, RpcError, method } from '../../http/index.ts';
import { fromWei, usdOf } from '../../relayer/balances/index.ts';
import { metaTxnUsage } from '../../relayer/index.ts';
import { FAMILIES } from '../../store/access-keys.ts';
import type { Services } from '../../services.ts';
import { ProjectId, chainName, type ConsoleArgDeps } from '../args.ts';
import type { ConsoleDeps } from '../deps.ts';

/** What the usage methods and the project totals read: access keys' requests, the meta-transactions' roll-ups, USD rates, the relayers, and the chains' names. */
export type UsageServices = ConsoleArgDeps & Pick<Services, 'accessKeys' | 'balances' | 'db' | 'relayers'>;

/** The last `days` UTC days, oldest first, as YYYY-MM-DD. */
function lastDays(days: number, now = new Date()): string[] {
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  return Array.from({ length: days }, (_, i) => new Date(today - (days - 1 - i) * 86_400_000).toISOString().slice(0, 10));
}

/** The project list's totals: requests, meta-transactions, success rate and spend since `since`, read from the roll-ups. */
export async function projectTotals(s: UsageServices, since: Date) {
  const usage = metaTxnUsage(s.db);
  await usage.rollUp();
  const [requests, txns] = await Promise.all([s.accessKeys.requestsByProject(since), usage.byProject(since)]);
  const rates = new Map<number, number | null>();
  for (const c of new Set(txns.map((t) => t.chainId))) rates.set(c, await s.balances.usdRate(c).catch(() => null));
  const out = new Map<
    number,
    { requests: number; metaTxns: number; succeeded: number; successRate: number | null; spendUsd: number | null; spend: { chainId: number; network: string; costWei: string; cost: number }[] }
  >();
  const of = (id: number) => {
    let t = out.get(id);
    if (!t) out.set(id, (t = { requests: 0, metaTxns: 0, succeeded: 0, successRate: null, spendUsd: null, spend: [] }));
    return t;
  };
  for (const [id, n] of requests) of(id).requests = n;
  const finals = new Map<number, number>();
  for (const x of txns) {
    const t = of(x.projectId);
    t.metaTxns += x.txns;
    t.succeeded += x.succeeded;
    finals.set(x.projectId, (finals.get(x.projectId) ?? 0) + x.final);
    t.spend.push({ chainId: x.chainId, network: chainName(s, x.chainId), costWei: x.costWei.toString(), cost: fromWei(x.costWei) });
    const usd = usdOf(x.costWei, rates.get(x.chainId) ?? null);
    if (usd != null) t.spendUsd = Math.round(((t.spendUsd ?? 0) + usd) * 100) / 100;
  }
  for (const [id, fin] of finals) if (fin > 0) of(id).successRate = of(id).succeeded / fin;
  return out;
}

/**
 * A project's overview over time: requests per day by key and method family, meta-transactions per
 * day by network and status with their gas, cost and fees, and its balance at each day's end. Everything is read from the hourly
 * roll-ups (key_usage_hourly, meta_txn_usage_hourly); a view first folds in the meta-transactions
 * changed since the last pass, which is a few rows, not a recount.
 */
export function usageMethods({ s, q }: ConsoleDeps<UsageServices>): Record<string, MethodDef<any>> {
  const usage = metaTxnUsage(s.db);
  return {
    ProjectUsage: method({
      input: z.object({ projectId: ProjectId, days: z.number().int().min(1).max(366).optional() }),
      handler: async (a) => {
        if (!(await q.project(a.projectId))) throw new RpcError(MetadataErrors.ProjectNotFound, `no project ${a.projectId}`);
        const days = a.days ?? 30;
        await usage.rollUp();
        const [requests, txns, keys] = await Promise.all([s.accessKeys.usageByDay(a.projectId, days), usage.byDay(a.projectId, days), s.accessKeys.list(a.projectId)]);
        const chainIds = [...new Set([...s.relayers.keys(), ...txns.map((t) => t.chainId)])];
        const networks = await Promise.all(chainIds.map(async (chainId) => ({ chainId, network: chainName(s, chainId), usdRate: await s.balances.usdRate(chainId).catch(() => null) })));
        const rate = new Map(networks.map((n) => [n.chainId, n.usdRate]));
        // The balance at each day's end, on the networks where the project has one.
        const tanks = (
          await Promise.all(
            [...s.relayers.keys()].map(async (chainId) =>
              (await s.balances.tanks.ofProject(a.projectId, chainId)) ? { chainId, days: await s.balances.tanks.balanceByDay(a.projectId, chainId, days) } : null,
            ),
          )
        ).filter((t) => t !== null);
        return {
          days: lastDays(days),
          families: FAMILIES,
          keys: keys.map((k) => ({ id: k.id, label: k.label, prefix: k.prefix, revoked: k.revokedAt !== null })),
          requests,
          networks,
          metaTxns: txns.map((t) => ({
            day: t.day,
            chainId: t.chainId,
            status: t.status,
            txns: t.txns,
            sponsored: t.sponsored,
            gasUsed: t.gasUsed.toString(),
            costWei: t.costWei.toString(),
            cost: fromWei(t.costWei),
            costUsd: usdOf(t.costWei, rate.get(t.chainId) ?? null),
            feeWei: t.feeWei.toString(),
          })),
          tanks: tanks.map((t) => ({ chainId: t.chainId, days: t.days.map((d) => ({ day: d.day, balanceWei: d.wei?.toString() ?? null })) })),
        };
      },
    }),
  };
}
