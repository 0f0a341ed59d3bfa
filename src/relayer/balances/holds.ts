import { formatEther } from 'viem';
import { prepared, type Db, type Queryable, type QueryResult } from '../../store/db.ts';
import type { Coverage } from '../intake/sponsors.ts';
import { applyFactor } from './amounts.ts';
import { HOLD_COUNTS, heldWei, tankOfProject, type Tank } from './tanks.ts';
import { shareInFlight } from '../../util/single-flight.ts';

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

/**
 * A cost at today's price (gas limit × price, plus an L1 fee bound) at the most an attempt may pay: what a
 * sponsored bundle's hold, its cover and every cap of its rules are charged (engine/cover-ceiling.ts signs
 * no attempt above it), so a base fee that rises after intake cannot carry a rule past its budget.
 */
export const atMaxFee = (wei: bigint) => wei * HOLD_PRICE_FACTOR;

export function holdAmount(gasLimit: bigint, gasPrice: bigint, tank: Pick<Tank, 'feeMarkupFactor'>, l1Fee = 0n): bigint {
  // An OP-stack L1 data fee (its upper bound now) moves with L1 prices as gas does with the base fee: the same room.
  return applyFactor(atMaxFee(gasLimit * gasPrice + l1Fee), tank.feeMarkupFactor);
}

export interface HoldArgs {
  projectId: number | null;
  chainId: number;
  metaTxnId: string;
  gasLimit: bigint;
  gasPrice: bigint;
  /** The L1 data fee's upper bound (OP stack), in wei; 0 elsewhere. */
  l1Fee?: bigint;
}

export interface HoldResult {
  cover: Coverage;
  /** Gives back what this intake took (the caller's earlier refund included). */
  refund: () => Promise<void>;
}

const short = (tank: Tank, held: bigint, need: bigint) =>
  `project ${tank.projectId}'s balance on this network is ${formatEther(tank.balanceWei)} (${formatEther(held)} of it held for meta-transactions in flight), ` +
  `not enough for this bundle's ${formatEther(need)}: it is not sponsored until the balance is topped up (AdjustProjectBalance)`;

/**
 * What the tank holds now (as heldWei counts it), the holds that no longer count cleared on the way,
 * and the new hold of $4 when the balance $5 covers it with what is held; its id, or null.
 */
const HOLD = prepared(`WITH held AS (
  SELECT COALESCE(SUM(h.amount_wei), 0) AS wei FROM gas_tank_holds h WHERE h.tank_id = $1 AND ${HOLD_COUNTS}),
gone AS (DELETE FROM gas_tank_holds h WHERE h.tank_id = $1 AND NOT ${HOLD_COUNTS}),
placed AS (
  INSERT INTO gas_tank_holds (tank_id, chain_id, meta_txn_id, amount_wei)
  SELECT $1, $2, $3, $4::numeric FROM held WHERE $5::numeric - held.wei >= $4::numeric RETURNING id)
SELECT (SELECT id FROM placed)::text AS id, (SELECT wei FROM held)::text AS held`);

export function balanceHolds(db: Db) {
  // Every sponsored intake of a project reads its tank first (most have none, or an unlimited one):
  // concurrent reads of one project's tank share one statement. Taking a hold reads it again, locked.
  const seenTank = shareInFlight(
    (projectId: number, chainId: number) => `${projectId}:${chainId}`,
    (projectId: number, chainId: number) => tankOfProject(db, projectId, chainId),
  );
  return {
    /** Would the project's balance take a bundle of this gas? Holds nothing (FeeOptions). */
    async fits(projectId: number | null, chainId: number, cover: Coverage, gas: bigint, gasPrice: bigint, l1Fee = 0n): Promise<Coverage> {
      if (!cover.sponsored || projectId == null) return cover;
      const tank = await tankOfProject(db, projectId, chainId);
      if (!tank || tank.unlimited) return cover;
      const held = await heldWei(db, tank.id);
      const need = holdAmount(gas, gasPrice, tank, l1Fee);
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
      const seen = await seenTank(projectId, a.chainId);
      if (!seen || seen.unlimited) return { cover, refund };
      // The tank is locked by the first statement; the rest (what is held, the hold) is one statement
      // sent with the COMMIT, so every sponsored intake of the project waits on that lock for one
      // round trip, not four (bench/relayer-intake.ts BENCH_TANK=1: 74 ms of lock wait per send).
      // Read after the lock, that statement sees every hold committed before it.
      let placed: Promise<QueryResult<{ id: string | null; held: string }> | undefined> | undefined;
      const locked = await db.transaction(async (tx) => {
        const tank = await tankOfProject(tx, projectId, a.chainId, true);
        if (!tank || tank.unlimited) return null;
        const need = holdAmount(a.gasLimit, a.gasPrice, tank, a.l1Fee);
        placed = tx.atCommit(HOLD, [tank.id, a.chainId, a.metaTxnId, need.toString(), tank.balanceWei.toString()]);
        return { tank, need };
      });
      if (!locked) return { cover, refund };
      const placedRow = (await placed!)!.rows[0];
      if (placedRow.id == null) {
        await refund();
        return { cover: { sponsored: false, ruleIds: [], reason: short(locked.tank, BigInt(placedRow.held), locked.need) }, refund: async () => {} };
      }
      const holdId = Number(placedRow.id);
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

/** Holds of meta-transactions mined or dropped are released (settlement, in the status write's transaction). */
export async function releaseHolds(q: Queryable, chainId: number, metaTxnIds: string[]): Promise<void> {
  if (metaTxnIds.length) await q.query('DELETE FROM gas_tank_holds WHERE chain_id = $1 AND meta_txn_id = ANY($2)', [chainId, metaTxnIds]);
}

/** A debit a reorg reversed is held again: the meta-transaction will be mined again. */
export async function holdAgain(q: Queryable, tankId: number, chainId: number, metaTxnId: string, amountWei: bigint): Promise<void> {
  await q.query('INSERT INTO gas_tank_holds (tank_id, chain_id, meta_txn_id, amount_wei) VALUES ($1, $2, $3, $4)', [tankId, chainId, metaTxnId, amountWei.toString()]);
}
