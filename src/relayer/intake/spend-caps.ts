import type { Address } from 'viem';
import type { Db, Queryable } from '../../store/db.ts';
import { budgetStop, type Cost, type RuleSpend, type Stop } from './policy.ts';
import type { SponsorRepo, SponsorRule } from './sponsors.ts';

/*
 * The spend of sponsorship rules against their budgets: today's (UTC) per rule and per wallet, and
 * the total. Spend is counted at intake as the simulated gas times the gas price then: the dispatcher
 * may pay a little more or less (settled below once mined), but intake is the one place a bundle can still be refused before
 * anyone pays for it. A bundle covered by several rules is charged to each of them (each rule's
 * budget holds on its own), and to each wallet whose bundle it runs.
 *
 * `charge` runs inside the transaction that queues the meta-transaction: both commit or neither does.
 * It locks the rules' rows first, so concurrent intakes in any process charge one after the other and
 * each sees what the one before it spent. A meta-transaction DROPPED later gives its charges back
 * (`onStatus`, on the transaction that drops it).
 *
 * Once mined, a charge is settled to what the meta-transaction actually cost (its share of the
 * receipt's gasUsed × effectiveGasPrice, the same figure a project balance is debited), on the
 * transaction that writes that status: the estimate only stands in while the bundle is in flight. A
 * reverted bundle (FAILED) burnt gas too, so it keeps its charge. A reorg that mines it again settles
 * it again, to the new cost.
 */

const TODAY = `(now() AT TIME ZONE 'UTC')::date`;

/** A race lost: the budget was spent between the decision and the charge. */
export class OverBudget extends Error {
  constructor(readonly stop: Stop) {
    super(stop.reason);
  }
}

export interface Charge {
  chainId: number;
  metaTxnId: string;
  ruleIds: number[];
  wallets: Address[];
  cost: Cost;
}

// A status a DROPPED meta-transaction reaches only when an earlier broadcast of it was mined after all.
const MINED = new Set(['SUCCEEDED', 'PARTIALLY_FAILED', 'FAILED']);

export function spendCaps(db: Db, sponsors: SponsorRepo) {
  /** Today's spend of the given wallets under each rule. */
  const walletSpend = async (q: Queryable, ids: number[], wallets: readonly Address[]) => {
    const out = new Map<number, Map<string, { wei: bigint; usd: bigint }>>(ids.map((id) => [id, new Map()]));
    if (ids.length === 0 || wallets.length === 0) return out;
    const r = await q.query<{ sponsor_id: string; wallet: string; wei: string; usd: string }>(
      `SELECT sponsor_id, wallet, spent_wei::text AS wei, spent_usd::text AS usd FROM sponsor_wallet_spend
        WHERE sponsor_id = ANY($1::bigint[]) AND wallet = ANY($2::text[]) AND day = ${TODAY}`,
      [ids, wallets.map((w) => w.toLowerCase())],
    );
    for (const x of r.rows) out.get(Number(x.sponsor_id))?.set(x.wallet, { wei: BigInt(x.wei), usd: BigInt(x.usd) });
    return out;
  };
  const spendOf = (rule: SponsorRule, wallets: Map<string, { wei: bigint; usd: bigint }>): RuleSpend => ({
    today: { wei: rule.spent.todayWei, usd: rule.spent.todayUsd },
    total: { wei: rule.spent.totalWei, usd: rule.spent.totalUsd },
    wallets,
  });
  const stopsOf = async (q: Queryable, rules: SponsorRule[], wallets: readonly Address[], cost: Cost) => {
    const ws = await walletSpend(q, rules.map((r) => r.id), wallets);
    return rules.map((r) => budgetStop(r, spendOf(r, ws.get(r.id)!), wallets, cost)).filter((s): s is Stop => s !== null);
  };

  return {
    /** The budget limits these rules would pass with one more bundle of `cost`; spends nothing (FeeOptions, CheckSponsorship, the decision before a charge). */
    budgetStops: (rules: SponsorRule[], wallets: readonly Address[], cost: Cost) => stopsOf(db, rules, wallets, cost),

    /**
     * Charges a meta-transaction to its rules, on `tx` (the transaction that queues it), all or none:
     * under the rules' row locks the budgets are checked again, and a rule now over one throws OverBudget.
     */
    async charge(tx: Queryable, c: Charge): Promise<void> {
      const rules = await sponsors.lock(tx, c.ruleIds);
      const stops = await stopsOf(tx, rules, c.wallets, c.cost);
      if (stops.length) throw new OverBudget(stops[0]);
      const wei = c.cost.wei.toString();
      const usd = (c.cost.usd ?? 0n).toString();
      const wallets = [...new Set(c.wallets.map((w) => w.toLowerCase()))];
      // A meta-transaction sent again after it was DROPPED starts over: its refunded charges are history.
      await tx.query('DELETE FROM sponsor_charges WHERE chain_id = $1 AND meta_txn_id = $2 AND refunded_at IS NOT NULL', [c.chainId, c.metaTxnId]);
      for (const r of rules) {
        await tx.query('UPDATE gas_sponsors SET spent_wei = spent_wei + $2::numeric, spent_usd = spent_usd + $3::numeric WHERE id = $1', [r.id, wei, usd]);
        await tx.query(
          `INSERT INTO sponsor_spend AS s (sponsor_id, day, spent_wei, spent_usd) VALUES ($1, ${TODAY}, $2::numeric, $3::numeric)
           ON CONFLICT (sponsor_id, day) DO UPDATE SET spent_wei = s.spent_wei + EXCLUDED.spent_wei, spent_usd = s.spent_usd + EXCLUDED.spent_usd`,
          [r.id, wei, usd],
        );
        for (const w of wallets) {
          await tx.query(
            `INSERT INTO sponsor_wallet_spend AS s (sponsor_id, wallet, day, spent_wei, spent_usd) VALUES ($1, $2, ${TODAY}, $3::numeric, $4::numeric)
             ON CONFLICT (sponsor_id, wallet, day) DO UPDATE SET spent_wei = s.spent_wei + EXCLUDED.spent_wei, spent_usd = s.spent_usd + EXCLUDED.spent_usd`,
            [r.id, w, wei, usd],
          );
        }
        await tx.query(
          `INSERT INTO sponsor_charges (chain_id, meta_txn_id, sponsor_id, wallets, day, wei, usd) VALUES ($1, $2, $3, $4::text[], ${TODAY}, $5::numeric, $6::numeric)`,
          [c.chainId, c.metaTxnId, r.id, wallets, wei, usd],
        );
      }
    },

    /**
     * The relayer's status hook: a sponsored meta-transaction DROPPED gives back what it was charged (to
     * the day it was charged on); one that is mined after all (an earlier broadcast landed) is charged again.
     */
    async onStatus(q: Queryable, rows: Array<{ chain_id: number; id: string; status: string; sponsored: boolean; gas_used?: string | number | bigint | null; gas_price?: string | number | bigint | null }>): Promise<void> {
      const dropped = rows.filter((r) => r.sponsored && r.status === 'DROPPED');
      const revived = rows.filter((r) => r.sponsored && MINED.has(r.status));
      for (const [list, sign, cond, set] of [
        [dropped, '-', 'refunded_at IS NULL', 'now()'],
        [revived, '+', 'refunded_at IS NOT NULL', 'NULL'],
      ] as const) {
        for (const chainId of new Set(list.map((r) => r.chain_id))) {
          const ids = list.filter((r) => r.chain_id === chainId).map((r) => r.id);
          const back = await q.query<{ sponsor_id: string; wallets: string[]; day: string; wei: string; usd: string }>(
            `UPDATE sponsor_charges SET refunded_at = ${set} WHERE chain_id = $1 AND meta_txn_id = ANY($2::text[]) AND ${cond}
             RETURNING sponsor_id, wallets, day::text AS day, wei::text AS wei, usd::text AS usd`,
            [chainId, ids],
          );
          // Sorted by rule, like charges, so a refund and a charge never lock rules crosswise.
          for (const c of back.rows.sort((a, b) => Number(a.sponsor_id) - Number(b.sponsor_id))) {
            const args = [c.sponsor_id, c.wei, c.usd];
            await q.query(`UPDATE gas_sponsors SET spent_wei = GREATEST(0, spent_wei ${sign} $2::numeric), spent_usd = GREATEST(0, spent_usd ${sign} $3::numeric) WHERE id = $1`, args);
            await q.query(
              `UPDATE sponsor_spend SET spent_wei = GREATEST(0, spent_wei ${sign} $2::numeric), spent_usd = GREATEST(0, spent_usd ${sign} $3::numeric) WHERE sponsor_id = $1 AND day = $4::date`,
              [...args, c.day],
            );
            await q.query(
              `UPDATE sponsor_wallet_spend SET spent_wei = GREATEST(0, spent_wei ${sign} $2::numeric), spent_usd = GREATEST(0, spent_usd ${sign} $3::numeric)
                WHERE sponsor_id = $1 AND day = $4::date AND wallet = ANY($5::text[])`,
              [...args, c.day, c.wallets],
            );
          }
        }
      }
      const mined = revived.filter((r) => r.gas_used != null && r.gas_price != null);
      for (const chainId of new Set(mined.map((r) => r.chain_id))) {
        const actual = new Map(mined.filter((r) => r.chain_id === chainId).map((r) => [r.id, BigInt(r.gas_used!) * BigInt(r.gas_price!)]));
        await settle(q, chainId, actual);
      }
    },
  };
}

/**
 * Moves mined meta-transactions' standing charges from what they were (the intake estimate, or an
 * earlier settlement) to what each actually cost, on every counter the charge went to; the USD figure
 * scales with it (the rate of intake). One read for all of them; rules are updated in id order, like charges.
 */
async function settle(q: Queryable, chainId: number, actual: Map<string, bigint>): Promise<void> {
  const open = await q.query<{ id: string; meta_txn_id: string; sponsor_id: string; wallets: string[]; day: string; wei: string; usd: string }>(
    `SELECT id, meta_txn_id, sponsor_id, wallets, day::text AS day, wei::text AS wei, usd::text AS usd FROM sponsor_charges
      WHERE chain_id = $1 AND meta_txn_id = ANY($2::text[]) AND refunded_at IS NULL`,
    [chainId, [...actual.keys()]],
  );
  const moving = open.rows.filter((c) => BigInt(c.wei) !== actual.get(c.meta_txn_id)).sort((a, b) => Number(a.sponsor_id) - Number(b.sponsor_id));
  for (const c of moving) {
    const to = actual.get(c.meta_txn_id)!;
    const wei = BigInt(c.wei);
    const usd = wei > 0n ? (BigInt(c.usd) * to) / wei : 0n;
    const dWei = (to - wei).toString();
    const dUsd = (usd - BigInt(c.usd)).toString();
    await q.query('UPDATE gas_sponsors SET spent_wei = GREATEST(0, spent_wei + $2::numeric), spent_usd = GREATEST(0, spent_usd + $3::numeric) WHERE id = $1', [c.sponsor_id, dWei, dUsd]);
    await q.query('UPDATE sponsor_spend SET spent_wei = GREATEST(0, spent_wei + $2::numeric), spent_usd = GREATEST(0, spent_usd + $3::numeric) WHERE sponsor_id = $1 AND day = $4::date', [c.sponsor_id, dWei, dUsd, c.day]);
    await q.query(
      `UPDATE sponsor_wallet_spend SET spent_wei = GREATEST(0, spent_wei + $2::numeric), spent_usd = GREATEST(0, spent_usd + $3::numeric)
        WHERE sponsor_id = $1 AND day = $4::date AND wallet = ANY($5::text[])`,
      [c.sponsor_id, dWei, dUsd, c.day, c.wallets],
    );
    await q.query('UPDATE sponsor_charges SET wei = $2::numeric, usd = $3::numeric WHERE id = $1', [c.id, to.toString(), usd.toString()]);
  }
}
export type SpendCaps = ReturnType<typeof spendCaps>;
