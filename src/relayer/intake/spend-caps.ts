import type { Db, Queryable } from '../../store/db.ts';
import type { Coverage } from './sponsors.ts';

/*
 * Daily spend caps of sponsorship rules. Spend is counted per rule and UTC day at intake, as the
 * simulated gas times the gas price then: the dispatcher may pay a little more or less, but intake
 * is the one place a bundle can still be refused before anyone pays for it. A bundle covered by
 * several rules is charged to each of them (each rule's budget holds on its own).
 */

const TODAY = `(now() AT TIME ZONE 'UTC')::date`;

// Insert-or-add in one statement, refused (no row) when the rule's cap would be passed. The row
// lock of the upsert makes concurrent intakes, in any process, add up one after the other.
const CHARGE = `
INSERT INTO sponsor_spend AS s (sponsor_id, day, spent_wei)
SELECT g.id, ${TODAY}, $2::numeric FROM gas_sponsors g
 WHERE g.id = $1 AND (g.daily_cap_wei IS NULL OR $2::numeric <= g.daily_cap_wei)
ON CONFLICT (sponsor_id, day) DO UPDATE SET spent_wei = s.spent_wei + EXCLUDED.spent_wei
 WHERE (SELECT g.daily_cap_wei IS NULL OR s.spent_wei + EXCLUDED.spent_wei <= g.daily_cap_wei FROM gas_sponsors g WHERE g.id = $1)
RETURNING spent_wei`;

const REMAINING = `
SELECT g.id, g.daily_cap_wei::text AS cap, COALESCE(s.spent_wei, 0)::text AS spent
  FROM gas_sponsors g LEFT JOIN sponsor_spend s ON s.sponsor_id = g.id AND s.day = ${TODAY}
 WHERE g.id = ANY($1::bigint[])`;

export interface RuleSpend {
  /** The daily cap in wei, or null for none. */
  capWei: bigint | null;
  spentTodayWei: bigint;
}

export interface CapCheck {
  cover: Coverage;
  /** Gives back what was charged (the meta-transaction was not queued after all). */
  refund: () => Promise<void>;
}

const nothing = async () => undefined;

export function spendCaps(db: Db) {
  const overCap = (id: number) => `sponsorship ${id} has reached its daily spend cap`;

  const spendOf = async (q: Queryable, ids: number[]): Promise<Map<number, RuleSpend>> => {
    const r = await q.query<{ id: number | string; cap: string | null; spent: string }>(REMAINING, [ids]);
    return new Map(r.rows.map((x) => [Number(x.id), { capWei: x.cap == null ? null : BigInt(x.cap), spentTodayWei: BigInt(x.spent) }]));
  };

  return {
    spendOf: (ids: number[]) => spendOf(db, ids),

    async setCap(sponsorId: number, capWei: bigint | null): Promise<void> {
      await db.query('UPDATE gas_sponsors SET daily_cap_wei = $2, updated_at = now() WHERE id = $1', [sponsorId, capWei?.toString() ?? null]);
    },

    /** Would a bundle costing `costWei` still fit every rule's cap? Spends nothing (FeeOptions, CheckSponsorship). */
    async fits(cover: Coverage, costWei: bigint): Promise<Coverage> {
      if (!cover.sponsored) return cover;
      const spend = await spendOf(db, cover.ruleIds);
      for (const id of cover.ruleIds) {
        const s = spend.get(id);
        if (s?.capWei != null && s.spentTodayWei + costWei > s.capWei) return { sponsored: false, ruleIds: [], reason: overCap(id) };
      }
      return cover;
    },

    /** Charges the bundle to every rule that covers it, all or none; over a cap it is not sponsored. */
    async charge(cover: Coverage, costWei: bigint): Promise<CapCheck> {
      if (!cover.sponsored || cover.ruleIds.length === 0) return { cover, refund: nothing };
      const ids = [...cover.ruleIds];
      const refused = await db.transaction(async (tx) => {
        for (const id of ids) {
          if ((await tx.query(CHARGE, [id, costWei.toString()])).rows.length === 0) {
            throw new OverCap(id);
          }
        }
        return undefined;
      }).catch((err) => {
        if (err instanceof OverCap) return err.sponsorId;
        throw err;
      });
      if (refused !== undefined) return { cover: { sponsored: false, ruleIds: [], reason: overCap(refused) }, refund: nothing };
      return {
        cover,
        refund: async () => {
          await db.query(`UPDATE sponsor_spend SET spent_wei = GREATEST(0, spent_wei - $2::numeric) WHERE sponsor_id = ANY($1::bigint[]) AND day = ${TODAY}`, [ids, costWei.toString()]);
        },
      };
    },
  };
}
export type SpendCaps = ReturnType<typeof spendCaps>;

class OverCap extends Error {
  constructor(readonly sponsorId: number) {
    super(`over cap ${sponsorId}`);
  }
}
