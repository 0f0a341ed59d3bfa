import type { Address } from 'viem';
import { prepared, type Db, type Queryable, type Tx } from '../../store/db.ts';
import { budgetStop, budgetWords, type Cost, type RuleSpend, type Stop } from './policy.ts';
import { currentRules, type SponsorRule } from './sponsors.ts';

/*
 * The spend of sponsorship rules against their budgets: today's (UTC) per rule and per wallet, and
 * the total. Spend is counted at intake as the most the bundle may cost: its gas limit at the highest
 * fee per gas any attempt of it may offer (twice the gas price then, balances/holds.ts atMaxFee; the
 * dispatcher signs nothing above it, engine/cover-ceiling.ts), so a base fee that rises after intake
 * cannot carry a rule past a budget. Once mined it is settled to what it cost (below), which gives the
 * difference back; intake is the one place a bundle can still be refused before anyone pays for it. A bundle covered by several rules is charged to each of them (each rule's
 * budget holds on its own), and to each wallet whose bundle it runs.
 *
 * `charge` runs inside the transaction that queues the meta-transaction, as its last statements, sent
 * with the COMMIT (Tx.atCommit): both commit or neither does. A meta-transaction DROPPED later gives its
 * charges back (`onStatus`, on the transaction that drops it).
 *
 * A rule's spend is kept in shards (migration 0059, issue #53): rows of sponsor_spend_shards, the
 * rule's spend their sum. With one row per rule every sponsored intake of every process took turns on
 * it: three `serve` processes relayed slower than one, most backends waiting on that row
 * (docs/performance-log.md, "A fleet on one database"). So that the shards together never pass a budget,
 * each holds a share of what is left of each budget (its room): a charge takes the lock of one shard
 * with room that no other transaction holds, and that row's alone (FAST_CHARGE, never waiting). A
 * charge that finds none (every shard with room held, or none with room: spent, a new day, the rule's
 * caps changed since the share-out, no row yet) takes the rule's gas_sponsors row and, in the next
 * statement, sees every shard as committed and shares out again (SLOW_CHARGE): what the shards no
 * other charge holds now did not spend comes back, the shards busy keep what they were given (counted
 * as spent), and what is left is split between the charging shard, those free ones and the shards
 * with no row yet (their parts left unshared). So the sum of the rooms never exceeds a budget, and far
 * from a budget a rule's charges run in parallel; near it they take turns, as before.
 *
 * Once mined, a charge is settled to what the meta-transaction actually cost (its share of the
 * receipt's gasUsed × effectiveGasPrice plus its L1 data fee on the OP stack, the same figure a project
 * balance is debited), on the transaction that writes that status, on the shard it was charged to: the
 * estimate only stands in while the bundle is in flight. A reverted bundle (FAILED) burnt gas too, so it
 * keeps its charge. A reorg that mines it again settles it again, to the new cost.
 */

const TODAY = `(now() AT TIME ZONE 'UTC')::date`;

/** The caps a shard's rooms were shared out under (room_caps): rooms are void once the rule's differ. */
const capsOf = (g: string) =>
  `concat_ws('/', COALESCE(${g}.daily_cap_wei::text, '-'), COALESCE(${g}.daily_cap_usd::text, '-'), COALESCE(${g}.total_budget_wei::text, '-'), COALESCE(${g}.total_budget_usd::text, '-'))`;

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

/*
 * The charges of one statement, one or many (an intake group's, store.ts), by position n (1..): $1 wei,
 * $2 atto-USD, $3 chain, $4 meta-transaction, $5 whether its cost has a USD figure (USD limits are
 * checked only then); their rules as (n, rule) pairs ($6, $7) and their wallets as (n, wallet) pairs in
 * order ($8, $9); $10 the number of shards. What the charges add is summed per rule (a) and per wallet
 * counter: spend only grows in a charge, so checking the sums is checking each charge after those before
 * it; a group that fails is charged again one by one (store.ts), the one over budget refused alone.
 */
const INPUT = `ch AS (SELECT * FROM unnest($1::numeric[], $2::numeric[], $3::bigint[], $4::text[], $5::boolean[]) WITH ORDINALITY AS c(wei, usd, chain, meta, has_usd, n)),
cr AS (SELECT * FROM unnest($6::int[], $7::bigint[]) AS p(n, rule)),
cw AS (SELECT * FROM unnest($8::int[], $9::text[]) WITH ORDINALITY AS p(n, wallet, k)),
a AS (SELECT cr.rule, sum(ch.wei) AS wei, sum(ch.usd) AS usd, bool_or(ch.has_usd) AS has_usd FROM cr JOIN ch ON ch.n = cr.n GROUP BY cr.rule),
me AS (SELECT (pg_backend_pid() % $10::int)::int AS k)`;

/**
 * The per-wallet counters of the rules in `rules` (a CTE with id), their charge rows on shard `shard`
 * (of `rules r`): CTEs named `${p}w`, `${p}c`. The counters are written in (rule, wallet) order, as
 * MOVE_SPEND locks them: no rule's row is held around them any more to keep two writers in step.
 */
const walletsAndCharges = (p: string, rules: string, shard: string) => `${p}w AS (
  INSERT INTO sponsor_wallet_spend AS s (sponsor_id, wallet, day, spent_wei, spent_usd)
  SELECT r.id, cw.wallet, ${TODAY}, sum(ch.wei), sum(ch.usd) FROM ${rules} r JOIN cr ON cr.rule = r.id JOIN cw ON cw.n = cr.n JOIN ch ON ch.n = cr.n GROUP BY r.id, cw.wallet
  ORDER BY r.id, cw.wallet
  ON CONFLICT (sponsor_id, wallet, day) DO UPDATE SET spent_wei = s.spent_wei + EXCLUDED.spent_wei, spent_usd = s.spent_usd + EXCLUDED.spent_usd
  RETURNING s.sponsor_id, s.spent_wei AS wei, s.spent_usd AS usd
),
${p}c AS (
  INSERT INTO sponsor_charges (chain_id, meta_txn_id, sponsor_id, wallets, day, wei, usd, shard)
  SELECT ch.chain, ch.meta, r.id, ARRAY(SELECT cw.wallet FROM cw WHERE cw.n = ch.n ORDER BY cw.k), ${TODAY}, ch.wei, ch.usd, ${shard} FROM ${rules} r JOIN cr ON cr.rule = r.id JOIN ch ON ch.n = cr.n
)`;

/** A rule's wallets over its per-wallet daily cap (`w`: the counters written, `g`: the rule, `a`: the sums). */
const walletOver = (w: string) => `EXISTS (SELECT 1 FROM ${w} w WHERE w.sponsor_id = g.id AND (w.wei > g.wallet_daily_cap_wei OR (a.has_usd AND w.usd > g.wallet_daily_cap_usd)))`;

/** Shard row `x` of rule `g` has room for the sums `a` of a charge: shared out today, under the rule's caps as they are. */
const roomFor = (x: string, a: string) => `${x}.day = ${TODAY} AND ${x}.room_caps = ${capsOf('g')}
    AND (${x}.room_day_wei IS NULL OR ${x}.today_wei + ${a}.wei <= ${x}.room_day_wei)
    AND (NOT ${a}.has_usd OR ${x}.room_day_usd IS NULL OR ${x}.today_usd + ${a}.usd <= ${x}.room_day_usd)
    AND (${x}.room_total_wei IS NULL OR ${x}.total_wei + ${a}.wei <= ${x}.room_total_wei)
    AND (NOT ${a}.has_usd OR ${x}.room_total_usd IS NULL OR ${x}.total_usd + ${a}.usd <= ${x}.room_total_usd)`;

/*
 * The first statement: each rule is charged on one of its shards that has room for the rule's sum
 * (today's, for its caps as they are) and that no other transaction holds (own: SKIP LOCKED, never
 * waited for), trying this backend's shard (pid modulo `shards`) first and the ones after it, so that
 * backends start apart (f), with its wallets and charge rows; a wallet over its daily cap fails the
 * statement. When a backend's shard alone was taken, backends sharing it (pid modulo 16) waited on
 * each other's COMMIT: 11–15 % of the active backends of a fleet under one rule (docs/performance-log.md).
 * The rules that found no such shard get their gas_sponsors rows locked (id order), so SLOW_CHARGE,
 * the next statement, sees every charge before it committed. A meta-transaction sent again after it
 * was DROPPED drops its refunded charges (history). Spend in shards is written by this, SLOW_CHARGE
 * and MOVE_SPEND only; this one waits for no shard row, the other two lock a rule's shard rows in
 * (rule, shard) order, the gas_sponsors row first when they take one.
 */
const FAST_CHARGE = prepared(`-- spend-caps FAST_CHARGE
WITH ${INPUT},
own AS (SELECT p.sponsor_id, p.shard FROM a CROSS JOIN LATERAL (
  SELECT x.sponsor_id, x.shard FROM sponsor_spend_shards x JOIN gas_sponsors g ON g.id = x.sponsor_id
   WHERE x.sponsor_id = a.rule AND x.shard >= 0 AND ${roomFor('x', 'a')}
   ORDER BY x.shard >= (SELECT k FROM me) DESC, x.shard LIMIT 1 FOR UPDATE OF x SKIP LOCKED) p),
f AS (
  UPDATE sponsor_spend_shards x SET today_wei = x.today_wei + a.wei, today_usd = x.today_usd + a.usd, total_wei = x.total_wei + a.wei, total_usd = x.total_usd + a.usd
  FROM own JOIN a ON a.rule = own.sponsor_id JOIN gas_sponsors g ON g.id = own.sponsor_id
  WHERE x.sponsor_id = own.sponsor_id AND x.shard = own.shard AND ${roomFor('x', 'a')}
  RETURNING x.sponsor_id AS id, x.shard
),
${walletsAndCharges('f', 'f', 'r.shard')},
d AS (DELETE FROM sponsor_charges x USING ch WHERE x.chain_id = ch.chain AND x.meta_txn_id = ch.meta AND x.refunded_at IS NOT NULL),
slow AS (SELECT g.id FROM gas_sponsors g WHERE g.id IN (SELECT rule FROM a) AND g.id NOT IN (SELECT id FROM f) ORDER BY g.id FOR UPDATE),
o AS (SELECT g.id FROM f JOIN a ON a.rule = f.id JOIN gas_sponsors g ON g.id = f.id WHERE ${walletOver('fw')})
SELECT (SELECT count(*) FROM slow) AS slow, (SELECT sum(metarelay_over_budget(o.id, 'walletDailyCap')) FROM o) AS over`);

/** What is left of a budget after the charge (lf's column `c`) shared between the charging shard, the free ones and those with no row yet; NULL: no budget. */
const share = (c: string) => `CASE WHEN lf.${c} IS NULL THEN NULL ELSE div(GREATEST(lf.${c}, 0), lf.n_free + 1) END`;
/** A shard's counter for today (0 when the row still counts another day). */
const todays = (x: string, c: 'wei' | 'usd') => `CASE WHEN ${x}.day = ${TODAY} THEN ${x}.today_${c} ELSE 0 END`;

/*
 * The second statement: the rules FAST_CHARGE did not charge (sl: no charge row of theirs yet), whose
 * gas_sponsors rows it locked, so no other charge of them is in this statement's way, and this
 * statement sees every one before it. The other shards of the rule that no transaction holds now are
 * locked (fr, SKIP LOCKED: never waited for); the busy ones count as having spent their room, since a
 * charge may be spending it now; the rows of moves (negative shards, MOVE_SPEND) as what they hold. The budgets are checked on that (lf: what is left after this charge;
 * over one, the statement fails: migration 0028), the charge goes to this backend's shard or a free one (ow), and
 * what is left is shared out between it and the free shards (fu), for today and the caps as they are.
 */
const SLOW_CHARGE = prepared(`-- spend-caps SLOW_CHARGE
WITH ${INPUT},
sl AS (SELECT a.* FROM a WHERE NOT EXISTS (
  SELECT 1 FROM cr JOIN ch ON ch.n = cr.n JOIN sponsor_charges x ON x.chain_id = ch.chain AND x.meta_txn_id = ch.meta AND x.sponsor_id = cr.rule AND x.refunded_at IS NULL WHERE cr.rule = a.rule)),
g AS (SELECT g.*, ${capsOf('g')} AS caps FROM gas_sponsors g WHERE g.id IN (SELECT rule FROM sl)),
fr AS (SELECT x.* FROM sponsor_spend_shards x WHERE x.sponsor_id IN (SELECT rule FROM sl) AND x.shard >= 0 ORDER BY x.sponsor_id, x.shard FOR UPDATE SKIP LOCKED),
rw AS (
  SELECT y.*, (y.day = ${TODAY} AND y.room_caps = g.caps) AS valid FROM (
    SELECT fr.*, true AS free FROM fr
    UNION ALL SELECT x.*, false FROM sponsor_spend_shards x WHERE x.sponsor_id IN (SELECT rule FROM sl) AND NOT EXISTS (SELECT 1 FROM fr WHERE fr.sponsor_id = x.sponsor_id AND fr.shard = x.shard)
  ) y JOIN g ON g.id = y.sponsor_id),
-- The shard charged: this backend's, unless another transaction holds it; then a free one, or a new
-- row (every shard held: the rule's rows grow to the charges running at once). Never one another
-- transaction holds.
tg AS (SELECT sl.rule AS id, CASE
    WHEN NOT EXISTS (SELECT 1 FROM rw WHERE rw.sponsor_id = sl.rule AND rw.shard = (SELECT k FROM me) AND NOT rw.free) THEN (SELECT k FROM me)
    ELSE COALESCE((SELECT min(rw.shard) FROM rw WHERE rw.sponsor_id = sl.rule AND rw.free), (SELECT max(rw.shard) + 1 FROM rw WHERE rw.sponsor_id = sl.rule)) END AS shard
  FROM sl),
v AS (SELECT rw.*, (NOT rw.free AND rw.valid) AS held, rw.free AND rw.shard <> tg.shard AS other_free, ${todays('rw', 'wei')} AS dw, ${todays('rw', 'usd')} AS du
  FROM rw JOIN tg ON tg.id = rw.sponsor_id),
agg AS (SELECT v.sponsor_id AS id,
  sum(CASE WHEN v.held THEN GREATEST(v.dw, COALESCE(v.room_day_wei, v.dw)) ELSE v.dw END) AS dw,
  sum(CASE WHEN v.held THEN GREATEST(v.du, COALESCE(v.room_day_usd, v.du)) ELSE v.du END) AS du,
  sum(CASE WHEN v.held THEN GREATEST(v.total_wei, COALESCE(v.room_total_wei, v.total_wei)) ELSE v.total_wei END) AS tw,
  sum(CASE WHEN v.held THEN GREATEST(v.total_usd, COALESCE(v.room_total_usd, v.total_usd)) ELSE v.total_usd END) AS tu,
  count(*) FILTER (WHERE v.other_free) AS n_free
  FROM v GROUP BY v.sponsor_id),
-- The shards 0..shards-1 of the rule with no row yet (the charged one aside): each keeps its part of
-- what is left unshared, for the charge that makes its row. Given all to the rows there are, the first
-- row held the whole budget, and a charge meeting it busy was refused as if the budget were spent.
nm AS (SELECT tg.id, count(*) AS n FROM tg CROSS JOIN generate_series(0, $10::int - 1) AS s(shard)
  WHERE s.shard <> tg.shard AND NOT EXISTS (SELECT 1 FROM sponsor_spend_shards x WHERE x.sponsor_id = tg.id AND x.shard = s.shard) GROUP BY tg.id),
lf AS (SELECT g.id, tg.shard, g.caps, sl.wei, sl.usd, sl.has_usd, COALESCE(agg.n_free, 0) + COALESCE(nm.n, 0) AS n_free,
  g.daily_cap_wei - COALESCE(agg.dw, 0) - sl.wei AS dw, g.daily_cap_usd - COALESCE(agg.du, 0) - sl.usd AS du,
  g.total_budget_wei - COALESCE(agg.tw, 0) - sl.wei AS tw, g.total_budget_usd - COALESCE(agg.tu, 0) - sl.usd AS tu
  FROM g JOIN sl ON sl.rule = g.id JOIN tg ON tg.id = g.id LEFT JOIN agg ON agg.id = g.id LEFT JOIN nm ON nm.id = g.id),
ow AS (
  INSERT INTO sponsor_spend_shards AS x (sponsor_id, shard, day, today_wei, today_usd, total_wei, total_usd, room_day_wei, room_day_usd, room_total_wei, room_total_usd, room_caps)
  SELECT lf.id, lf.shard, ${TODAY}, lf.wei, lf.usd, lf.wei, lf.usd, lf.wei + ${share('dw')}, lf.usd + ${share('du')}, lf.wei + ${share('tw')}, lf.usd + ${share('tu')}, lf.caps FROM lf
  ON CONFLICT (sponsor_id, shard) DO UPDATE SET
    today_wei = ${todays('x', 'wei')} + EXCLUDED.today_wei, today_usd = ${todays('x', 'usd')} + EXCLUDED.today_usd,
    total_wei = x.total_wei + EXCLUDED.total_wei, total_usd = x.total_usd + EXCLUDED.total_usd,
    room_day_wei = ${todays('x', 'wei')} + EXCLUDED.room_day_wei, room_day_usd = ${todays('x', 'usd')} + EXCLUDED.room_day_usd,
    room_total_wei = x.total_wei + EXCLUDED.room_total_wei, room_total_usd = x.total_usd + EXCLUDED.room_total_usd,
    day = EXCLUDED.day, room_caps = EXCLUDED.room_caps
  RETURNING x.sponsor_id
),
fu AS (
  UPDATE sponsor_spend_shards x SET day = ${TODAY}, today_wei = ${todays('x', 'wei')}, today_usd = ${todays('x', 'usd')},
    room_day_wei = ${todays('x', 'wei')} + ${share('dw')}, room_day_usd = ${todays('x', 'usd')} + ${share('du')},
    room_total_wei = x.total_wei + ${share('tw')}, room_total_usd = x.total_usd + ${share('tu')}, room_caps = lf.caps
  FROM fr JOIN lf ON lf.id = fr.sponsor_id WHERE x.sponsor_id = fr.sponsor_id AND x.shard = fr.shard AND fr.shard <> lf.shard
),
${walletsAndCharges('s', 'lf', 'r.shard')},
-- Each rule's first limit this charge passes, in budgetStop's order (policy.ts; USD limits only when a
-- charge of it has a USD figure). A cap that is NULL (none) leaves NULL, which is not below 0.
o AS (
  SELECT lf.id, CASE
    WHEN lf.dw < 0 OR (a.has_usd AND lf.du < 0) THEN 'dailyCap'
    WHEN ${walletOver('sw')} THEN 'walletDailyCap'
    WHEN lf.tw < 0 OR (a.has_usd AND lf.tu < 0) THEN 'totalBudget'
  END AS lim
  FROM lf JOIN g ON g.id = lf.id JOIN a ON a.rule = lf.id)
SELECT (SELECT count(*) FROM ow) AS charged, sum(CASE WHEN o.lim IS NULL THEN 0 ELSE metarelay_over_budget(o.id, o.lim) END) AS over FROM o`);

/** The error of a charge over a rule's limit, as the database words it (migration 0028). */
const OVER_BUDGET = /metarelay_over_budget:(\d+):(dailyCap|walletDailyCap|totalBudget)/;

// A status a DROPPED meta-transaction reaches only when an earlier broadcast of it was mined after all.
const MINED = new Set(['SUCCEEDED', 'PARTIALLY_FAILED', 'FAILED']);

/** How many shards a rule's spend is kept in: config relayer.sponsorSpendShards's default. */
export const DEFAULT_SPEND_SHARDS = 16;

export function spendCaps(db: Db, opts: { shards?: number } = {}) {
  const shards = opts.shards ?? DEFAULT_SPEND_SHARDS;
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
    // Wallets' spend is read only for rules that cap it (the other limits need none of it).
    const capped = rules.filter((r) => r.policy.walletDailyCap.wei != null || r.policy.walletDailyCap.usd != null);
    const ws = await walletSpend(
      q,
      capped.map((r) => r.id),
      wallets,
    );
    return rules.map((r) => budgetStop(r, spendOf(r, ws.get(r.id) ?? new Map()), wallets, cost)).filter((s): s is Stop => s !== null);
  };

  /**
   * `charge` for the meta-transactions of one transaction (an intake group): two statements whatever
   * their number, the second sent only when a rule found no shard with room (far from a budget, one).
   */
  const chargeMany = (tx: Tx, charges: readonly Charge[]): void => {
    if (charges.length === 0) return;
    const rules = charges.flatMap((c, i) => [...new Set(c.ruleIds)].map((r) => [i + 1, r] as const));
    const wallets = charges.flatMap((c, i) => [...new Set(c.wallets.map((w) => w.toLowerCase()))].map((w) => [i + 1, w] as const));
    const params = [
      charges.map((c) => c.cost.wei.toString()),
      charges.map((c) => (c.cost.usd ?? 0n).toString()),
      charges.map((c) => c.chainId),
      charges.map((c) => c.metaTxnId),
      charges.map((c) => c.cost.usd != null),
      rules.map((x) => x[0]),
      rules.map((x) => x[1]),
      wallets.map((x) => x[0]),
      wallets.map((x) => x[1]),
      shards,
    ];
    tx.atCommit(FAST_CHARGE, params);
    // Only when FAST_CHARGE left a rule uncharged (its `slow`): otherwise a round trip for nothing.
    tx.atCommit(SLOW_CHARGE, params, { onlyIf: 'slow' });
  };

  return {
    /** The budget limits these rules would pass with one more bundle of `cost`; spends nothing (FeeOptions, CheckSponsorship, the decision before a charge). */
    budgetStops: (rules: SponsorRule[], wallets: readonly Address[], cost: Cost) => stopsOf(db, rules, wallets, cost),

    /**
     * Charges a meta-transaction to its rules as the last statements of `tx` (the transaction that
     * queues it), sent with its COMMIT: all or none. The budgets are checked again there; a rule now
     * over one fails them, and the transaction throws what `overBudget` turns into OverBudget.
     */
    charge(tx: Tx, c: Charge): void {
      chargeMany(tx, [c]);
    },

    chargeMany,

    /**
     * The OverBudget a failed charge stands for (null for any other error), with the stop budgetStop
     * words for that rule as it is now (read again, without a lock: it words the reason, the charge
     * statement was the check).
     */
    async overBudget(err: unknown, c: Charge): Promise<OverBudget | null> {
      const m = OVER_BUDGET.exec(String((err as Error | undefined)?.message ?? ''));
      if (!m) return null;
      const ruleId = Number(m[1]);
      const limit = m[2] as Stop['limit'];
      const now = (await stopsOf(db, await currentRules(db, [ruleId]), c.wallets, c.cost)).find((x) => x.limit === limit);
      return new OverBudget(now ?? { ruleId, limit, reason: `rule ${ruleId} has reached its ${budgetWords(limit, c.wallets)} (spent by another meta-transaction meanwhile)` });
    },

    /**
     * The relayer's status hook: a sponsored meta-transaction DROPPED gives back what it was charged (to
     * the day it was charged on); one that is mined after all (an earlier broadcast landed) is charged
     * again; a mined one's charge is settled to what it actually cost.
     */
    async onStatus(
      q: Queryable,
      rows: Array<{
        chain_id: number;
        id: string;
        status: string;
        sponsored: boolean;
        gas_used?: string | number | bigint | null;
        gas_price?: string | number | bigint | null;
        l1_fee_wei?: string | null;
      }>,
    ): Promise<void> {
      const dropped = rows.filter((r) => r.sponsored && r.status === 'DROPPED');
      const revived = rows.filter((r) => r.sponsored && MINED.has(r.status));
      for (const [list, sign, cond, set] of [
        [dropped, -1n, 'refunded_at IS NULL', 'now()'],
        [revived, 1n, 'refunded_at IS NOT NULL', 'NULL'],
      ] as const) {
        for (const chainId of new Set(list.map((r) => r.chain_id))) {
          const ids = list.filter((r) => r.chain_id === chainId).map((r) => r.id);
          const back = await q.query<ChargeRow>(
            `UPDATE sponsor_charges SET refunded_at = ${set} WHERE chain_id = $1 AND meta_txn_id = ANY($2::text[]) AND ${cond}
             RETURNING id, meta_txn_id, sponsor_id, wallets, day::text AS day, wei::text AS wei, usd::text AS usd, shard`,
            [chainId, ids],
          );
          await moveSpend(
            q,
            back.rows.map((c) => ({ c, wei: sign * BigInt(c.wei), usd: sign * BigInt(c.usd) })),
            shards,
          );
        }
      }
      const mined = revived.filter((r) => r.gas_used != null && r.gas_price != null);
      for (const chainId of new Set(mined.map((r) => r.chain_id))) {
        const actual = new Map(mined.filter((r) => r.chain_id === chainId).map((r) => [r.id, BigInt(r.gas_used!) * BigInt(r.gas_price!) + BigInt(r.l1_fee_wei ?? '0')]));
        await settle(q, chainId, actual, shards);
      }
    },
  };
}

/** A row of sponsor_charges as the status hook reads it. */
interface ChargeRow {
  id: string;
  meta_txn_id: string;
  sponsor_id: string;
  wallets: string[];
  day: string;
  wei: string;
  usd: string;
  shard: number;
}

/** A signed amount to add to every counter a charge went to; `settled` also sets the charge itself to its new amount. */
interface Move {
  c: ChargeRow;
  wei: bigint;
  usd: bigint;
  settled?: { wei: bigint; usd: bigint };
}

/**
 * Moves every counter of many charges at once (refunds, charges revived, settlements), and sets
 * settled charges to their new amounts: one statement whatever their number. A rule's amounts go to a
 * shard row of the moving backend's own (shard -1 - pid % shards: no charge takes those, and no share
 * of a budget goes to them), summed with the rule's others as every shard is: a charge's shard may be
 * any, a status write settling a block's meta-transactions held nearly every charging shard of a rule
 * for its whole transaction, and every intake of the rule waited on it. Its total moves, and its today
 * for the charges of today (a move of another day's charge has nothing of today's to change). A
 * refund leaves the rule more of its budgets; a settlement above the estimate may take it past one
 * (the next charge past its shard's room sees it). Shard rows are written in rule order, the wallets'
 * counters after, in (rule, wallet) order, as a charge writes them: the two never lock crosswise. No
 * gas_sponsors row is taken. A status write settling 50 mined meta-transactions wrote 4 statements per
 * charge, holding the rules' locks and, on PGlite, the one connection, across ~200 round trips
 * (docs/performance-log.md, "30 Nov 2026 (ninth session)"). Counters of a row may go below zero; their
 * sum over a rule's rows does not.
 */
export const MOVE_SPEND = prepared(`-- spend-caps MOVE_SPEND
WITH e AS (SELECT * FROM unnest($1::bigint[], $2::date[], $3::numeric[], $4::numeric[]) AS e(id, day, wei, usd)),
d AS (SELECT e.id, sum(e.wei) AS wei, sum(e.usd) AS usd, COALESCE(sum(e.wei) FILTER (WHERE e.day = ${TODAY}), 0) AS twei, COALESCE(sum(e.usd) FILTER (WHERE e.day = ${TODAY}), 0) AS tusd
  FROM e GROUP BY e.id),
t AS (
  INSERT INTO sponsor_spend_shards AS x (sponsor_id, shard, day, today_wei, today_usd, total_wei, total_usd)
  SELECT d.id, -1 - (pg_backend_pid() % $13::int), ${TODAY}, d.twei, d.tusd, d.wei, d.usd FROM d ORDER BY d.id
  ON CONFLICT (sponsor_id, shard) DO UPDATE SET total_wei = x.total_wei + EXCLUDED.total_wei, total_usd = x.total_usd + EXCLUDED.total_usd,
    today_wei = ${todays('x', 'wei')} + EXCLUDED.today_wei, today_usd = ${todays('x', 'usd')} + EXCLUDED.today_usd, day = EXCLUDED.day
  RETURNING x.sponsor_id
),
ew AS (SELECT * FROM unnest($5::bigint[], $6::date[], $7::text[], $8::numeric[], $9::numeric[]) AS x(id, day, wallet, wei, usd) WHERE x.id IN (SELECT sponsor_id FROM t)),
lw AS (SELECT s.sponsor_id, s.wallet, s.day FROM sponsor_wallet_spend s JOIN ew ON s.sponsor_id = ew.id AND s.day = ew.day AND s.wallet = ew.wallet ORDER BY s.sponsor_id, s.wallet, s.day FOR UPDATE OF s),
w AS (
  UPDATE sponsor_wallet_spend s SET spent_wei = GREATEST(0, s.spent_wei + x.wei), spent_usd = GREATEST(0, s.spent_usd + x.usd)
  FROM lw JOIN ew x ON x.id = lw.sponsor_id AND x.day = lw.day AND x.wallet = lw.wallet
  WHERE s.sponsor_id = lw.sponsor_id AND s.day = lw.day AND s.wallet = lw.wallet
),
c AS (
  UPDATE sponsor_charges c SET wei = x.wei, usd = x.usd FROM unnest($10::bigint[], $11::numeric[], $12::numeric[]) AS x(id, wei, usd) WHERE c.id = x.id
)
SELECT count(*) AS rules FROM t`);

/** Signed amounts summed per counter (its key's parts), as columns: the key's parts, then wei and usd. */
function summed(parts: number, entries: Array<{ key: string[]; wei: bigint; usd: bigint }>): string[][] {
  const out = new Map<string, { key: string[]; wei: bigint; usd: bigint }>();
  for (const e of entries) {
    const k = e.key.join('|');
    const was = out.get(k);
    out.set(k, was ? { ...was, wei: was.wei + e.wei, usd: was.usd + e.usd } : e);
  }
  const rows = [...out.values()];
  return [...Array.from({ length: parts }, (_, i) => rows.map((r) => r.key[i]!)), rows.map((r) => r.wei.toString()), rows.map((r) => r.usd.toString())];
}

/** MOVE_SPEND's parameters: the amounts per rule and day, per rule, day and wallet, then the settled charges, then the shards. */
function moveSpendParams(moves: Move[], shards: number): unknown[] {
  const settled = moves.filter((m) => m.settled);
  const days = summed(
    2,
    moves.map((m) => ({ key: [m.c.sponsor_id, m.c.day], wei: m.wei, usd: m.usd })),
  );
  const wallets = summed(
    3,
    moves.flatMap((m) => [...new Set(m.c.wallets)].map((w) => ({ key: [m.c.sponsor_id, m.c.day, w], wei: m.wei, usd: m.usd }))),
  );
  return [...days, ...wallets, settled.map((m) => m.c.id), settled.map((m) => m.settled!.wei.toString()), settled.map((m) => m.settled!.usd.toString()), shards];
}

async function moveSpend(q: Queryable, moves: Move[], shards: number): Promise<void> {
  if (moves.length === 0) return;
  await q.query(MOVE_SPEND, moveSpendParams(moves, shards));
}

/**
 * Moves mined meta-transactions' standing charges from what they were (the intake estimate, or an
 * earlier settlement) to what each actually cost, on every counter the charge went to; the USD figure
 * scales with it (the rate of intake). One read and one write for all of them.
 */
async function settle(q: Queryable, chainId: number, actual: Map<string, bigint>, shards: number): Promise<void> {
  const open = await q.query<ChargeRow>(
    `SELECT id, meta_txn_id, sponsor_id, wallets, day::text AS day, wei::text AS wei, usd::text AS usd, shard FROM sponsor_charges
      WHERE chain_id = $1 AND meta_txn_id = ANY($2::text[]) AND refunded_at IS NULL`,
    [chainId, [...actual.keys()]],
  );
  const moves = open.rows
    .filter((c) => BigInt(c.wei) !== actual.get(c.meta_txn_id))
    .map((c): Move => {
      const to = actual.get(c.meta_txn_id)!;
      const wei = BigInt(c.wei);
      const usd = wei > 0n ? (BigInt(c.usd) * to) / wei : 0n;
      return { c, wei: to - wei, usd: usd - BigInt(c.usd), settled: { wei: to, usd } };
    });
  await moveSpend(q, moves, shards);
}
export type SpendCaps = ReturnType<typeof spendCaps>;

/** Deletes the charges of these meta-transactions (a prune's batch: final long ago, their spend already counted on the rules' counters). */
export async function deleteChargesOf(tx: Queryable, chainIds: number[], ids: string[]): Promise<number> {
  const r = await tx.query('DELETE FROM sponsor_charges WHERE (chain_id, meta_txn_id) IN (SELECT * FROM unnest($1::bigint[], $2::text[]))', [chainIds, ids]);
  return r.rowCount;
}

/** How many charges a prune would delete, its meta-transactions given as a subquery of (chain_id, id) taking $1 (--dry-run). */
export async function countChargesOf(q: Queryable, cutoff: Date, prunable: string): Promise<number> {
  const r = await q.query<{ n: string }>(`WITH p AS (${prunable}) SELECT count(*)::text AS n FROM sponsor_charges c JOIN p ON c.chain_id = p.chain_id AND c.meta_txn_id = p.id`, [cutoff]);
  return Number(r.rows[0]!.n);
}
