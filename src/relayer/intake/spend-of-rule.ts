// A rule's spend, summed over its shards (sponsor_spend_shards), as SQL joined to a gas_sponsors row:
// read by the rules' listing (sponsors.ts) and the charges (spend-caps.ts), in a file of its own so
// neither imports the other.

/**
 * A rule's spend summed over its shards, as columns spent_wei/spent_usd (in all) and today_wei/today_usd
 * of the rule `g`.
 */
export function spendOfRule(g: string): string {
  const today = `(now() AT TIME ZONE 'UTC')::date`;
  return `LEFT JOIN LATERAL (SELECT COALESCE(sum(x.total_wei), 0) AS spent_wei, COALESCE(sum(x.total_usd), 0) AS spent_usd,
    COALESCE(sum(x.today_wei) FILTER (WHERE x.day = ${today}), 0) AS today_wei, COALESCE(sum(x.today_usd) FILTER (WHERE x.day = ${today}), 0) AS today_usd
    FROM sponsor_spend_shards x WHERE x.sponsor_id = ${g}.id) s ON true`;
}
