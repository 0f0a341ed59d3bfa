import { formatEther } from 'viem';
import type { Db } from '../../store/db.ts';
import type { Coverage } from '../intake/sponsors.ts';
import { applyFactor } from './amounts.ts';
import { LIVE, heldWei, tankOfProject, type Tank } from './tanks.ts';

/*
 * Intake's side of a project balance. A sponsored bundle of a project with a limited tank is accepted
 * only when the balance less what is already held for the project's live meta-transactions covers what
 * this one may cost; that amount is then held until the meta-transaction is mined (and debited its
 * actual cost) or dropped. The check and the hold happen under the tank's row lock, so concurrent
 * intakes in any number of processes cannot together hold more than the balance.
 *
 * What a bundle "may cost": its gas limit at twice the gas price now, times the tank's markup — the
 * room the dispatcher's first attempt leaves the base fee (docs/project-balances.md).
 */

export const HOLD_PRICE_FACTOR = 2n;

export function holdAmount(gasLimit: bigint, gasPrice: bigint, tank: Pick<Tank, 'feeMarkupFactor'>): bigint {
  return applyFactor(gasLimit * gasPrice * HOLD_PRICE_FACTOR, tank.feeMarkupFactor);
}

export interface HoldArgs {
  projectId: number | null;
  chainId: number;
  metaTxnId: string;
  gasLimit: bigint;
  gasPrice: bigint;
}

export interface HoldResult {
  cover: Coverage;
  /** Gives back what this intake took (the caller's earlier refund included). */
  refund: () => Promise<void>;
}

const short = (tank: Tank, held: bigint, need: bigint) =>
  `project ${tank.projectId}'s balance on this network is ${formatEther(tank.balanceWei)} (${formatEther(held)} of it held for meta-transactions in flight), ` +
  `not enough for this bundle's ${formatEther(need)}: it is not sponsored until the balance is topped up (AdjustProjectBalance)`;

export function balanceHolds(db: Db) {
  return {
    /** Would the project's balance take a bundle of this gas? Holds nothing (FeeOptions). */
    async fits(projectId: number | null, chainId: number, cover: Coverage, gas: bigint, gasPrice: bigint): Promise<Coverage> {
      if (!cover.sponsored || projectId == null) return cover;
      const tank = await tankOfProject(db, projectId, chainId);
      if (!tank || tank.unlimited) return cover;
      const held = await heldWei(db, tank.id);
      const need = holdAmount(gas, gasPrice, tank);
      return tank.balanceWei - held >= need ? cover : { sponsored: false, ruleIds: [], reason: short(tank, held, need) };
    },

    /**
     * Holds what the bundle may cost against the project's limited tank; a project without a tank or with
     * an unlimited one is not held back. Refused, the bundle is not sponsored (it may still pay its fee)
     * and `refund` (e.g. the spend caps' charge) is given back at once.
     */
    async hold(cover: Coverage, refund: () => Promise<void>, a: HoldArgs): Promise<HoldResult> {
      if (!cover.sponsored || a.projectId == null) return { cover, refund };
      const projectId = a.projectId;
      // Most projects hold nothing back (no tank, or an unlimited one): one read, no transaction. A tank
      // limited a moment later treats this intake as one that ran before the change, as under the lock.
      const seen = await tankOfProject(db, projectId, a.chainId);
      if (!seen || seen.unlimited) return { cover, refund };
      const out = await db.transaction(async (tx) => {
        const tank = await tankOfProject(tx, projectId, a.chainId, true);
        if (!tank || tank.unlimited) return { ok: true as const, holdId: null };
        const held = await heldWei(tx, tank.id);
        const need = holdAmount(a.gasLimit, a.gasPrice, tank);
        if (tank.balanceWei - held < need) return { ok: false as const, reason: short(tank, held, need) };
        // Holds whose meta-transaction is long gone are cleared on the way.
        await tx.query(
          `DELETE FROM gas_tank_holds h WHERE h.tank_id = $1 AND h.created_at < now() - interval '2 minutes'
             AND NOT EXISTS (SELECT 1 FROM meta_txns m WHERE m.chain_id = h.chain_id AND m.id = h.meta_txn_id AND m.status IN (${LIVE}))`,
          [tank.id],
        );
        const r = await tx.query<{ id: string }>('INSERT INTO gas_tank_holds (tank_id, chain_id, meta_txn_id, amount_wei) VALUES ($1, $2, $3, $4) RETURNING id', [
          tank.id, a.chainId, a.metaTxnId, need.toString(),
        ]);
        return { ok: true as const, holdId: Number(r.rows[0].id) };
      });
      if (!out.ok) {
        await refund();
        return { cover: { sponsored: false, ruleIds: [], reason: out.reason }, refund: async () => {} };
      }
      const holdId = out.holdId;
      return {
        cover,
        refund: async () => {
          await refund();
          if (holdId != null) await db.query('DELETE FROM gas_tank_holds WHERE id = $1', [holdId]);
        },
      };
    },
  };
}
export type BalanceHolds = ReturnType<typeof balanceHolds>;
