import { z } from 'zod';
import { AdjustmentConflict, MarkupFactor, NativeAmount, TankRefused, adjustmentWire, fromWei, gasTankWire, usdOf, type Tank } from '../../relayer/balances/index.ts';
import type { ChainRelayer } from '../../relayer/index.ts';
import type { Services } from '../../services.ts';
import { RelayerErrors, RpcError } from '../core/errors.ts';
import { method, type MethodDef, type RpcContext } from '../core/webrpc.ts';
import { ignoredWire, lenient } from './args.ts';
import { RelayerPage, paging } from './paging.ts';

/** What the gas tank methods use: the balances (tanks, adjustments, USD rates) and the projects. */
export type BalanceDeps = Pick<Services, 'balances' | 'projects'>;

/*
 * Project balances on the relayer's admin API (admin token): the reference's GetProjectBalance,
 * AdjustProjectBalance, GetTransactionCost and the legacy gas-tank methods, for the network in the path.
 * Amounts are native units as JSON numbers (decimal strings are accepted too); answers carry the exact
 * wei beside them. docs/project-balances.md.
 */

const Id = z.number().int().positive();
const Nonce = z.number().int().nonnegative();
const Name = z.string().max(200);
const When = z
  .string()
  .max(64)
  .transform((v, ctx) => {
    const t = Date.parse(v);
    if (Number.isNaN(t)) {
      ctx.addIssue({ code: 'custom', message: `"${v}" is not a date (RFC 3339, e.g. 2026-11-01T00:00:00Z)` });
      return z.NEVER;
    }
    return new Date(t);
  });

export const BALANCE_ADMIN_METHODS = [
  'GetProjectBalance',
  'AdjustProjectBalance',
  'GetTransactionCost',
  'GetGasTank',
  'AddGasTank',
  'UpdateGasTank',
  'NextGasTankBalanceAdjustmentNonce',
  'AdjustGasTankBalance',
  'GetGasTankBalanceAdjustment',
  'ListGasTankBalanceAdjustments',
];

function refusal(err: unknown): never {
  if (err instanceof AdjustmentConflict) throw new RpcError(RelayerErrors.RequestConflict, err.message);
  if (err instanceof TankRefused) throw new RpcError(RelayerErrors.InvalidArgument, err.message);
  throw err;
}

export function balanceMethods(s: BalanceDeps, relayerFor: (ctx: RpcContext) => ChainRelayer): Record<string, MethodDef<any>> {
  const b = s.balances;
  const requireProject = async (projectId: number) => {
    const p = await s.projects.getById(projectId);
    if (!p) throw new RpcError(RelayerErrors.ProjectNotFound, `no project ${projectId}`);
    return p;
  };
  /** A tank of this network (a tank of another network is not found here, as on the reference's per-network relayers). */
  const tankHere = async (ctx: RpcContext, id: number): Promise<Tank> => {
    const r = relayerFor(ctx);
    const t = await b.tanks.get(id);
    if (!t || t.chainId !== r.chainId) throw new RpcError(RelayerErrors.NotFound, `no gas tank ${id} on ${r.network}`);
    return t;
  };
  const tankWire = async (t: Tank) => gasTankWire(t, await b.tanks.held(t.id), await b.usdRate(t.chainId));
  const adjustmentHere = async (ctx: RpcContext, id: number, nonce: number) => {
    const e = await b.tanks.adjustment((await tankHere(ctx, id)).id, nonce);
    if (!e) throw new RpcError(RelayerErrors.NotFound, `gas tank ${id} has no adjustment ${nonce}`);
    return e;
  };

  return {
    GetProjectBalance: method({
      input: z.object({ projectId: Id }).strip(),
      handler: async (a, ctx) => {
        const r = relayerFor(ctx);
        await requireProject(a.projectId);
        const t = await b.tanks.ofProject(a.projectId, r.chainId);
        const held = t ? await b.tanks.held(t.id) : 0n;
        const rate = await b.usdRate(r.chainId);
        const balance = t?.balanceWei ?? 0n;
        // No tank: today's behaviour, sponsored by its rules alone (limited: false).
        return {
          balance: fromWei(balance),
          balanceWei: balance.toString(),
          heldWei: held.toString(),
          availableWei: (balance - held).toString(),
          limited: !!t && !t.unlimited,
          gasTankId: t?.id ?? null,
          balanceUsd: usdOf(balance, rate),
          usdRate: rate,
        };
      },
    }),
    AdjustProjectBalance: method({
      input: lenient({ projectId: Id, amount: NativeAmount, identifier: z.string().trim().min(1).max(200) }),
      handler: async ({ args: a, ignoredFields }, ctx) => {
        const r = relayerFor(ctx);
        const p = await requireProject(a.projectId);
        if (a.amount === 0n) throw new RpcError(RelayerErrors.InvalidArgument, 'amount must not be zero');
        const tank = await b.tanks.ensureForProject(p.id, r.chainId, p.name);
        const { entry, replay } = await b.tanks.adjust({ tankId: tank.id, amountWei: a.amount, identifier: a.identifier, usdRate: await b.usdRate(r.chainId) }).catch(refusal);
        const now = (await b.tanks.get(tank.id))!;
        return { balance: fromWei(now.balanceWei), balanceWei: now.balanceWei.toString(), replay, adjustment: adjustmentWire(entry), ...ignoredWire(ignoredFields) };
      },
    }),
    GetTransactionCost: method({
      input: z.object({ projectId: Id, from: When, to: When }).strip(),
      handler: async (a, ctx) => {
        const r = relayerFor(ctx);
        await requireProject(a.projectId);
        if (a.to <= a.from) throw new RpcError(RelayerErrors.InvalidArgument, '"to" must be after "from"');
        const c = await b.tanks.cost(a.projectId, r.chainId, a.from, a.to);
        return { cost: fromWei(c.chargedWei), costWei: c.chargedWei.toString(), gasCostWei: c.gasCostWei.toString(), transactions: c.count, costUsd: usdOf(c.chargedWei, await b.usdRate(r.chainId)) };
      },
    }),
    GetGasTank: method({
      input: z.object({ id: Id }).strip(),
      handler: async (a, ctx) => ({ gasTank: await tankWire(await tankHere(ctx, a.id)) }),
    }),
    AddGasTank: method({
      input: z.object({ name: Name, feeMarkupFactor: MarkupFactor, unlimited: z.boolean().optional(), projectId: Id.optional() }).strip(),
      handler: async (a, ctx) => {
        const r = relayerFor(ctx);
        if (a.projectId != null) await requireProject(a.projectId);
        const t = await b.tanks.add({ chainId: r.chainId, projectId: a.projectId ?? null, name: a.name, unlimited: a.unlimited ?? false, feeMarkupFactor: a.feeMarkupFactor }).catch((err) => {
          if (err instanceof TankRefused) throw new RpcError(RelayerErrors.RequestConflict, err.message);
          throw err;
        });
        return { status: true, gasTank: await tankWire(t) };
      },
    }),
    UpdateGasTank: method({
      input: z.object({ id: Id, name: Name.optional(), feeMarkupFactor: MarkupFactor.optional(), unlimited: z.boolean().optional() }).strip(),
      handler: async (a, ctx) => {
        await tankHere(ctx, a.id);
        const t = await b.tanks.update(a.id, { name: a.name, unlimited: a.unlimited, feeMarkupFactor: a.feeMarkupFactor });
        return { status: true, gasTank: await tankWire(t!) };
      },
    }),
    NextGasTankBalanceAdjustmentNonce: method({
      input: z.object({ id: Id }).strip(),
      handler: async (a, ctx) => ({ nonce: await b.tanks.nextNonce((await tankHere(ctx, a.id)).id) }),
    }),
    AdjustGasTankBalance: method({
      input: z.object({ id: Id, nonce: Nonce, amount: NativeAmount }).strip(),
      handler: async (a, ctx) => {
        const t = await tankHere(ctx, a.id);
        if (a.amount === 0n) throw new RpcError(RelayerErrors.InvalidArgument, 'amount must not be zero');
        const { entry, replay } = await b.tanks.adjust({ tankId: t.id, amountWei: a.amount, nonce: a.nonce, usdRate: await b.usdRate(t.chainId) }).catch(refusal);
        return { status: true, replay, adjustment: adjustmentWire(entry) };
      },
    }),
    GetGasTankBalanceAdjustment: method({
      input: z.object({ id: Id, nonce: Nonce }).strip(),
      handler: async (a, ctx) => ({ adjustment: adjustmentWire(await adjustmentHere(ctx, a.id, a.nonce)) }),
    }),
    ListGasTankBalanceAdjustments: method({
      input: z.object({ id: Id, page: RelayerPage }).strip(),
      handler: async (a, ctx) => {
        const t = await tankHere(ctx, a.id);
        const p = paging(a.page, 50);
        const { page, rows } = p.cut(await b.tanks.adjustments(t.id, p.offset, p.limit));
        return { page, adjustments: rows.map(adjustmentWire) };
      },
    }),
  };
}
