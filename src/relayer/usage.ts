import type { Db } from '../store/db.ts';

/**
 * Meta-transactions rolled up per project, network, UTC hour queued and status, for the console's
 * project overview (meta_txn_usage_hourly). A pass finds the rows changed since its watermark by
 * updated_at (set by every status write in relayer/store.ts) and recounts only the hours those rows
 * were queued in, so the relayer's statements carry no extra work and a view reads the roll-up alone.
 *
 * updated_at is a writer's transaction start, which may commit after a pass has moved the watermark
 * past it: each pass looks back OVERLAP before its watermark too. Recounting an hour is idempotent,
 * so seeing a row twice costs a little work and never a wrong count.
 */
const OVERLAP = "interval '10 minutes'";
const MARK = 'meta_txns';

export interface MetaTxnUsage {
  day: string;
  chainId: number;
  status: string;
  txns: number;
  sponsored: number;
  gasUsed: bigint;
  costWei: bigint;
  feeWei: bigint;
}

export function metaTxnUsage(db: Db) {
  return {
    /** Folds the rows changed since the last pass into the roll-up; how many hours it recounted. */
    async rollUp(): Promise<number> {
      return db.transaction(async (tx) => {
        // One pass at a time (the row lock): while another process's pass holds it, this one does nothing
        // (SKIP LOCKED) rather than wait for it, and a frozen holder stalls nobody (issue #53).
        const mark = await tx.query<{ since: Date | string; now: Date | string }>(
          `SELECT watermark - ${OVERLAP} AS since, now() AS now FROM usage_rollup_marks WHERE name = $1 FOR UPDATE SKIP LOCKED`,
          [MARK],
        );
        if (!mark.rows[0]) return 0;
        const { since, now } = mark.rows[0];
        const touched = await tx.query<{ p: string; c: string; h: string }>(
          `SELECT DISTINCT project_id::text AS p, chain_id::text AS c, floor(extract(epoch FROM queued_at) / 3600)::bigint::text AS h
             FROM meta_txns WHERE updated_at > $1 AND project_id IS NOT NULL`,
          [since],
        );
        if (touched.rows.length > 0) {
          const args = [touched.rows.map((t) => t.p), touched.rows.map((t) => t.c), touched.rows.map((t) => t.h)];
          const hours = `SELECT p, c, to_timestamp(h * 3600) AS h FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS t(p, c, h)`;
          await tx.query(`DELETE FROM meta_txn_usage_hourly WHERE (project_id, chain_id, hour) IN (${hours})`, args);
          await tx.query(
            `INSERT INTO meta_txn_usage_hourly (project_id, chain_id, hour, status, txns, sponsored, gas_used, cost_wei, fee_wei)
             SELECT t.p, t.c, t.h, m.status, COUNT(*), COUNT(*) FILTER (WHERE m.sponsored), COALESCE(SUM(m.gas_used), 0),
                    COALESCE(SUM(m.gas_used::numeric * m.gas_price), 0), COALESCE(SUM(m.fee_received), 0)
               FROM (${hours}) t JOIN meta_txns m
                 ON m.project_id = t.p AND m.chain_id = t.c AND m.queued_at >= t.h AND m.queued_at < t.h + interval '1 hour'
              GROUP BY t.p, t.c, t.h, m.status`,
            args,
          );
        }
        await tx.query('UPDATE usage_rollup_marks SET watermark = $2 WHERE name = $1', [MARK, now]);
        return touched.rows.length;
      });
    },

    /** A project's meta-transactions per UTC day, network and status over the last `days` days. */
    async byDay(projectId: number, days: number): Promise<MetaTxnUsage[]> {
      const r = await db.query<{ day: string; chain_id: string; status: string; txns: string; sponsored: string; gas: string; cost: string; fee: string }>(
        `SELECT to_char(hour AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, chain_id::text, status, SUM(txns)::text AS txns, SUM(sponsored)::text AS sponsored,
                SUM(gas_used)::text AS gas, SUM(cost_wei)::text AS cost, SUM(fee_wei)::text AS fee
           FROM meta_txn_usage_hourly
          WHERE project_id = $1 AND hour >= (((now() AT TIME ZONE 'UTC')::date - $2::int)::timestamp AT TIME ZONE 'UTC')
          GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
        [projectId, days - 1],
      );
      return r.rows.map((x) => ({
        day: x.day,
        chainId: Number(x.chain_id),
        status: x.status,
        txns: Number(x.txns),
        sponsored: Number(x.sponsored),
        gasUsed: BigInt(x.gas),
        costWei: BigInt(x.cost),
        feeWei: BigInt(x.fee),
      }));
    },

    /** Every project's meta-transactions since `since`: how many, how many succeeded, and their cost per network. */
    async byProject(since: Date): Promise<Array<{ projectId: number; chainId: number; txns: number; succeeded: number; final: number; costWei: bigint }>> {
      const r = await db.query<{ p: string; c: string; txns: string; ok: string; fin: string; cost: string }>(
        `SELECT project_id::text AS p, chain_id::text AS c, SUM(txns)::text AS txns,
                COALESCE(SUM(txns) FILTER (WHERE status = 'SUCCEEDED'), 0)::text AS ok,
                COALESCE(SUM(txns) FILTER (WHERE status IN ('SUCCEEDED', 'FAILED', 'PARTIALLY_FAILED', 'DROPPED')), 0)::text AS fin,
                SUM(cost_wei)::text AS cost
           FROM meta_txn_usage_hourly WHERE hour >= $1 GROUP BY 1, 2`,
        [since],
      );
      return r.rows.map((x) => ({ projectId: Number(x.p), chainId: Number(x.c), txns: Number(x.txns), succeeded: Number(x.ok), final: Number(x.fin), costWei: BigInt(x.cost) }));
    },
  };
}
export type MetaTxnUsageRollup = ReturnType<typeof metaTxnUsage>;
