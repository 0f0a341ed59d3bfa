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
 * `charge` runs inside the transaction that queues the meta-transaction, as its last statement, sent
 * with the COMMIT (Tx.atCommit): both commit or neither does. It locks the rules' rows (ascending), adds
 * the spend and checks the budgets in one statement, so concurrent intakes in any process charge one
 * after the other, each sees what the one before it spent, and a rule's lock is held for the server's
 * time of that statement and the COMMIT, not for the client's: it was the bound of intake throughput
 * while it spanned ten statements, and then while the event loop of a busy process took its time to
 * send the COMMIT (docs/performance.md). A meta-transaction DROPPED later gives its charges back
 * (`onStatus`, on the transaction that drops it).
 *
 * Once mined, a charge is settled to what the meta-transaction actually cost (its share of the
 * receipt's gasUsed × effectiveGasPrice plus its L1 data fee on the OP stack, the same figure a project
 * balance is debited), on the transaction that writes that status: the estimate only stands in while
 * the bundle is in flight. A
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

/*
 * Charges in one statement, one or many (an intake group's, store.ts): the rules' rows are locked in id
 * order (l) before anything of them is written (every writer of a rule's spend locks its row first, so
 * none can deadlock), then what the charges add is summed per counter (a), written once to each rule's
 * total, its today and each wallet's today, every charge is recorded, and a meta-transaction sent again
 * after it was DROPPED drops its refunded charges (history). Then the limits are checked against the
 * spend written (o): over one, the statement fails and nothing of it stays. Spend only grows here, so
 * checking the sums is checking each charge after those before it, as one statement each did: a group
 * fails where one of its charges would have, and is then charged again one by one (store.ts).
 *
 * The charges by position n (1..): $1 wei, $2 atto-USD, $3 chain, $4 meta-transaction, $5 whether its
 * cost has a USD figure (USD limits are checked only then); their rules as (n, rule) pairs ($6, $7) and
 * their wallets as (n, wallet) pairs in order ($8, $9).
 */
const CHARGE = prepared(`
WITH ch AS (SELECT * FROM unnest($1::numeric[], $2::numeric[], $3::bigint[], $4::text[], $5::boolean[]) WITH ORDINALITY AS c(wei, usd, chain, meta, has_usd, n)),
cr AS (SELECT * FROM unnest($6::int[], $7::bigint[]) AS p(n, rule)),
cw AS (SELECT * FROM unnest($8::int[], $9::text[]) WITH ORDINALITY AS p(n, wallet, k)),
l AS (SELECT id FROM gas_sponsors WHERE id IN (SELECT rule FROM cr) ORDER BY id FOR UPDATE),
a AS (SELECT cr.rule, sum(ch.wei) AS wei, sum(ch.usd) AS usd, bool_or(ch.has_usd) AS has_usd FROM cr JOIN ch ON ch.n = cr.n GROUP BY cr.rule),
g AS (
  UPDATE gas_sponsors g SET spent_wei = g.spent_wei + a.wei, spent_usd = g.spent_usd + a.usd FROM l JOIN a ON a.rule = l.id WHERE g.id = l.id
  RETURNING g.id, g.daily_cap_wei, g.daily_cap_usd, g.wallet_daily_cap_wei, g.wallet_daily_cap_usd, g.total_budget_wei, g.total_budget_usd, g.spent_wei, g.spent_usd
),
s AS (
  INSERT INTO sponsor_spend AS s (sponsor_id, day, spent_wei, spent_usd) SELECT g.id, ${TODAY}, a.wei, a.usd FROM g JOIN a ON a.rule = g.id
  ON CONFLICT (sponsor_id, day) DO UPDATE SET spent_wei = s.spent_wei + EXCLUDED.spent_wei, spent_usd = s.spent_usd + EXCLUDED.spent_usd
  RETURNING s.sponsor_id, s.spent_wei AS today_wei, s.spent_usd AS today_usd
),
w AS (
  INSERT INTO sponsor_wallet_spend AS s (sponsor_id, wallet, day, spent_wei, spent_usd)
  SELECT g.id, cw.wallet, ${TODAY}, sum(ch.wei), sum(ch.usd) FROM g JOIN cr ON cr.rule = g.id JOIN cw ON cw.n = cr.n JOIN ch ON ch.n = cr.n GROUP BY g.id, cw.wallet
  ON CONFLICT (sponsor_id, wallet, day) DO UPDATE SET spent_wei = s.spent_wei + EXCLUDED.spent_wei, spent_usd = s.spent_usd + EXCLUDED.spent_usd
  RETURNING s.sponsor_id, s.spent_wei AS wei, s.spent_usd AS usd
),
c AS (
  INSERT INTO sponsor_charges (chain_id, meta_txn_id, sponsor_id, wallets, day, wei, usd)
  SELECT ch.chain, ch.meta, g.id, ARRAY(SELECT cw.wallet FROM cw WHERE cw.n = ch.n ORDER BY cw.k), ${TODAY}, ch.wei, ch.usd FROM g JOIN cr ON cr.rule = g.id JOIN ch ON ch.n = cr.n
),
d AS (DELETE FROM sponsor_charges x USING ch WHERE x.chain_id = ch.chain AND x.meta_txn_id = ch.meta AND x.refunded_at IS NOT NULL),
-- Each rule's first limit now exceeded, in budgetStop's order (policy.ts; USD limits only when a charge
-- of it has a USD figure): what was spent before plus these charges, i.e. the totals written. A cap that
-- is NULL (none) compares to NULL, which is not true.
o AS (
  SELECT g.id, CASE
    WHEN s.today_wei > g.daily_cap_wei OR (a.has_usd AND s.today_usd > g.daily_cap_usd) THEN 'dailyCap'
    WHEN EXISTS (SELECT 1 FROM w WHERE w.sponsor_id = g.id AND (w.wei > g.wallet_daily_cap_wei OR (a.has_usd AND w.usd > g.wallet_daily_cap_usd))) THEN 'walletDailyCap'
    WHEN g.spent_wei > g.total_budget_wei OR (a.has_usd AND g.spent_usd > g.total_budget_usd) THEN 'totalBudget'
  END AS lim
  FROM g JOIN s ON s.sponsor_id = g.id JOIN a ON a.rule = g.id)
-- Over a limit, the statement fails (migration 0028): the transaction rolls back, these charges with it.
SELECT sum(CASE WHEN o.lim IS NULL THEN 0 ELSE metarelay_over_budget(o.id, o.lim) END) AS over FROM o`);

/** The error of a charge over a rule's limit, as the database words it (migration 0028). */
const OVER_BUDGET = /metarelay_over_budget:(\d+):(dailyCap|walletDailyCap|totalBudget)/;

// A status a DROPPED meta-transaction reaches only when an earlier broadcast of it was mined after all.
const MINED = new Set(['SUCCEEDED', 'PARTIALLY_FAILED', 'FAILED']);

export function spendCaps(db: Db) {
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

  /** `charge` for the meta-transactions of one transaction (an intake group), in one statement. */
  const chargeMany = (tx: Tx, charges: readonly Charge[]): void => {
    if (charges.length === 0) return;
    const rules = charges.flatMap((c, i) => [...new Set(c.ruleIds)].map((r) => [i + 1, r] as const));
    const wallets = charges.flatMap((c, i) => [...new Set(c.wallets.map((w) => w.toLowerCase()))].map((w) => [i + 1, w] as const));
    tx.atCommit(CHARGE, [
      charges.map((c) => c.cost.wei.toString()),
      charges.map((c) => (c.cost.usd ?? 0n).toString()),
      charges.map((c) => c.chainId),
      charges.map((c) => c.metaTxnId),
      charges.map((c) => c.cost.usd != null),
      rules.map((x) => x[0]),
      rules.map((x) => x[1]),
      wallets.map((x) => x[0]),
      wallets.map((x) => x[1]),
    ]);
  };

  return {
    /** The budget limits these rules would pass with one more bundle of `cost`; spends nothing (FeeOptions, CheckSponsorship, the decision before a charge). */
    budgetStops: (rules: SponsorRule[], wallets: readonly Address[], cost: Cost) => stopsOf(db, rules, wallets, cost),

    /**
     * Charges a meta-transaction to its rules as the last statement of `tx` (the transaction that
     * queues it), sent with its COMMIT: all or none. Under the rules' row locks the budgets are checked
     * again in that statement; a rule now over one fails it, and the transaction throws what
     * `overBudget` turns into OverBudget.
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
             RETURNING id, meta_txn_id, sponsor_id, wallets, day::text AS day, wei::text AS wei, usd::text AS usd`,
            [chainId, ids],
          );
          await moveSpend(
            q,
            back.rows.map((c) => ({ c, wei: sign * BigInt(c.wei), usd: sign * BigInt(c.usd) })),
          );
        }
      }
      const mined = revived.filter((r) => r.gas_used != null && r.gas_price != null);
      for (const chainId of new Set(mined.map((r) => r.chain_id))) {
        const actual = new Map(mined.filter((r) => r.chain_id === chainId).map((r) => [r.id, BigInt(r.gas_used!) * BigInt(r.gas_price!) + BigInt(r.l1_fee_wei ?? '0')]));
        await settle(q, chainId, actual);
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
 * settled charges to their new amounts: one statement whatever their number. The rules' rows are
 * locked in id order first (l), as a charge locks them, and every counter under a rule is written after
 * its rule (s, w read g), so this and a charge never lock crosswise. Amounts are summed per counter and
 * none goes below zero. A status write settling 50 mined meta-transactions wrote 4 statements per
 * charge, holding the rules' locks (every sponsored intake of those rules waits on them) and, on PGlite,
 * the one connection, across ~200 round trips (docs/performance.md, 30 Nov).
 */
export const MOVE_SPEND = prepared(`
WITH l AS (SELECT id FROM gas_sponsors WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE),
g AS (
  UPDATE gas_sponsors g SET spent_wei = GREATEST(0, g.spent_wei + x.wei), spent_usd = GREATEST(0, g.spent_usd + x.usd)
  FROM l JOIN unnest($1::bigint[], $2::numeric[], $3::numeric[]) AS x(id, wei, usd) ON x.id = l.id WHERE g.id = l.id
  RETURNING g.id
),
s AS (
  UPDATE sponsor_spend s SET spent_wei = GREATEST(0, s.spent_wei + x.wei), spent_usd = GREATEST(0, s.spent_usd + x.usd)
  FROM unnest($4::bigint[], $5::date[], $6::numeric[], $7::numeric[]) AS x(id, day, wei, usd)
  WHERE s.sponsor_id = x.id AND s.day = x.day AND x.id IN (SELECT id FROM g)
),
w AS (
  UPDATE sponsor_wallet_spend s SET spent_wei = GREATEST(0, s.spent_wei + x.wei), spent_usd = GREATEST(0, s.spent_usd + x.usd)
  FROM unnest($8::bigint[], $9::date[], $10::text[], $11::numeric[], $12::numeric[]) AS x(id, day, wallet, wei, usd)
  WHERE s.sponsor_id = x.id AND s.day = x.day AND s.wallet = x.wallet AND x.id IN (SELECT id FROM g)
),
c AS (
  UPDATE sponsor_charges c SET wei = x.wei, usd = x.usd FROM unnest($13::bigint[], $14::numeric[], $15::numeric[]) AS x(id, wei, usd) WHERE c.id = x.id
)
SELECT count(*) AS rules FROM g`);

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

/** MOVE_SPEND's parameters: the amounts per rule, per rule and day, per rule, day and wallet, then the settled charges. */
function moveSpendParams(moves: Move[]): unknown[] {
  const settled = moves.filter((m) => m.settled);
  const rules = summed(
    1,
    moves.map((m) => ({ key: [m.c.sponsor_id], wei: m.wei, usd: m.usd })),
  );
  const days = summed(
    2,
    moves.map((m) => ({ key: [m.c.sponsor_id, m.c.day], wei: m.wei, usd: m.usd })),
  );
  const wallets = summed(
    3,
    moves.flatMap((m) => [...new Set(m.c.wallets)].map((w) => ({ key: [m.c.sponsor_id, m.c.day, w], wei: m.wei, usd: m.usd }))),
  );
  return [...rules, ...days, ...wallets, settled.map((m) => m.c.id), settled.map((m) => m.settled!.wei.toString()), settled.map((m) => m.settled!.usd.toString())];
}

async function moveSpend(q: Queryable, moves: Move[]): Promise<void> {
  if (moves.length === 0) return;
  await q.query(MOVE_SPEND, moveSpendParams(moves));
}

/**
 * Moves mined meta-transactions' standing charges from what they were (the intake estimate, or an
 * earlier settlement) to what each actually cost, on every counter the charge went to; the USD figure
 * scales with it (the rate of intake). One read and one write for all of them.
 */
async function settle(q: Queryable, chainId: number, actual: Map<string, bigint>): Promise<void> {
  const open = await q.query<ChargeRow>(
    `SELECT id, meta_txn_id, sponsor_id, wallets, day::text AS day, wei::text AS wei, usd::text AS usd FROM sponsor_charges
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
  await moveSpend(q, moves);
}
export type SpendCaps = ReturnType<typeof spendCaps>;
