import { prepared, type Db, type Queryable } from '../../store/db.ts';
import { LIVE_IN } from '../store.ts';

/*
 * Gas tanks: a project's balance on one network, and its append-only ledger. Every write takes the
 * tank's row lock (SELECT … FOR UPDATE) first, so adjustments, holds and debits from any number of
 * processes apply one after the other and each ledger entry records the balance it left.
 */

export interface Tank {
  id: number;
  chainId: number;
  projectId: number | null;
  name: string;
  unlimited: boolean;
  feeMarkupFactor: string;
  balanceWei: bigint;
  createdAt: Date;
  updatedAt: Date;
}

export interface LedgerEntry {
  id: number;
  chainId: number;
  projectId: number | null;
  tankId: number | null;
  kind: 'adjustment' | 'debit' | 'reversal';
  amountWei: bigint;
  balanceWei: bigint | null;
  nonce: number | null;
  identifier: string | null;
  metaTxnId: string | null;
  txnHash: string | null;
  gasUsed: number | null;
  gasPrice: bigint | null;
  costWei: bigint | null;
  reverses: number | null;
  usdRate: number | null;
  createdAt: Date;
}

/** The adjustment's nonce or identifier was used before for a different amount. */
export class AdjustmentConflict extends Error {}
/** A nonce past the next one, a balance that would go below zero, a project that already has a tank. */
export class TankRefused extends Error {}

type Row = Record<string, unknown>;
const num = (v: unknown) => (v == null ? null : Number(v));
const big = (v: unknown) => (v == null ? null : BigInt(String(v)));

export function tankOf(r: Row): Tank {
  return {
    id: Number(r.id),
    chainId: Number(r.chain_id),
    projectId: num(r.project_id),
    name: String(r.name),
    unlimited: Boolean(r.unlimited),
    feeMarkupFactor: String(r.fee_markup_factor),
    balanceWei: BigInt(String(r.balance_wei)),
    createdAt: new Date(r.created_at as string),
    updatedAt: new Date(r.updated_at as string),
  };
}

export function entryOf(r: Row): LedgerEntry {
  return {
    id: Number(r.id),
    chainId: Number(r.chain_id),
    projectId: num(r.project_id),
    tankId: num(r.tank_id),
    kind: r.kind as LedgerEntry['kind'],
    amountWei: BigInt(String(r.amount_wei)),
    balanceWei: big(r.balance_wei),
    nonce: num(r.nonce),
    identifier: (r.identifier as string | null) ?? null,
    metaTxnId: (r.meta_txn_id as string | null) ?? null,
    txnHash: (r.txn_hash as string | null) ?? null,
    gasUsed: num(r.gas_used),
    gasPrice: big(r.gas_price),
    costWei: big(r.cost_wei),
    reverses: num(r.reverses),
    usdRate: r.usd_rate == null ? null : Number(r.usd_rate),
    createdAt: new Date(r.created_at as string),
  };
}

const TANK_COLUMNS = 'id, chain_id, project_id, name, unlimited, fee_markup_factor, balance_wei::text AS balance_wei, created_at, updated_at';
const ENTRY_COLUMNS = `id, chain_id, project_id, tank_id, kind, amount_wei::text AS amount_wei, balance_wei::text AS balance_wei, nonce, identifier, meta_txn_id,
  txn_hash, gas_used, gas_price::text AS gas_price, cost_wei::text AS cost_wei, reverses, usd_rate, created_at`;

/** The ledger page's filters: a kind, and a window of time [from, to). */
export interface LedgerFilter {
  kind?: LedgerEntry['kind'];
  from?: Date;
  to?: Date;
}
/** The filter's SQL, its three parameters numbered from $n (kind, from, to). */
const ledgerFilter = (n: number) =>
  `($${n}::text IS NULL OR kind = $${n}) AND ($${n + 1}::timestamptz IS NULL OR created_at >= $${n + 1}) AND ($${n + 2}::timestamptz IS NULL OR created_at < $${n + 2})`;

/** Locks and reads a tank; every balance change starts here. */
export async function lockTank(q: Queryable, id: number): Promise<Tank | undefined> {
  const r = await q.query<Row>(prepared(`SELECT ${TANK_COLUMNS} FROM gas_tanks WHERE id = $1 FOR UPDATE`), [id]);
  return r.rows[0] ? tankOf(r.rows[0]) : undefined;
}

export async function tankOfProject(q: Queryable, projectId: number, chainId: number, lock = false): Promise<Tank | undefined> {
  const r = await q.query<Row>(prepared(`SELECT ${TANK_COLUMNS} FROM gas_tanks WHERE project_id = $1 AND chain_id = $2${lock ? ' FOR UPDATE' : ''}`), [projectId, chainId]);
  return r.rows[0] ? tankOf(r.rows[0]) : undefined;
}

/** A ledger entry to write: its fields but those the database or the tank gives it. */
export type NewEntry = Omit<LedgerEntry, 'id' | 'balanceWei' | 'createdAt' | 'tankId'>;

/** Appends a ledger entry and moves the (locked) tank's balance by its amount; returns the entry. */
export async function post(q: Queryable, tank: Tank | null, e: NewEntry): Promise<LedgerEntry> {
  return (await postMany(q, [{ tank, e }]))[0]!;
}

/**
 * Appends ledger entries in their order (ids ascending), each moving its (locked) tank's balance by its
 * amount and recording the balance after it; then each tank touched is written once. Two statements
 * whatever their number: settling a dispatch pass's mined meta-transactions wrote two per entry, while
 * holding the tanks' locks (docs/performance-log.md, "30 Nov 2026 (ninth session)"). Returns the entries
 * written, in order.
 */
export async function postMany(q: Queryable, entries: Array<{ tank: Tank | null; e: NewEntry }>): Promise<LedgerEntry[]> {
  if (entries.length === 0) return [];
  const balances = entries.map(({ tank, e }) => {
    if (!tank) return null;
    tank.balanceWei += e.amountWei;
    return tank.balanceWei.toString();
  });
  const col = <T>(f: (e: NewEntry) => T) => entries.map((x) => f(x.e));
  const r = await q.query<Row>(
    prepared(`INSERT INTO gas_tank_ledger (chain_id, project_id, tank_id, kind, amount_wei, balance_wei, nonce, identifier, meta_txn_id, txn_hash, gas_used, gas_price, cost_wei, reverses, usd_rate)
     SELECT chain_id, project_id, tank_id, kind, amount_wei, balance_wei, nonce, identifier, meta_txn_id, txn_hash, gas_used, gas_price, cost_wei, reverses, usd_rate
       FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::numeric[], $6::numeric[], $7::bigint[], $8::text[], $9::text[], $10::text[], $11::bigint[], $12::numeric[], $13::numeric[], $14::bigint[], $15::text[])
         WITH ORDINALITY AS x(chain_id, project_id, tank_id, kind, amount_wei, balance_wei, nonce, identifier, meta_txn_id, txn_hash, gas_used, gas_price, cost_wei, reverses, usd_rate, n)
      ORDER BY n
     RETURNING ${ENTRY_COLUMNS}`),
    [
      col((e) => e.chainId),
      col((e) => e.projectId),
      entries.map((x) => x.tank?.id ?? null),
      col((e) => e.kind),
      col((e) => e.amountWei.toString()),
      balances,
      col((e) => e.nonce),
      col((e) => e.identifier),
      col((e) => e.metaTxnId),
      col((e) => e.txnHash),
      col((e) => e.gasUsed),
      col((e) => e.gasPrice?.toString() ?? null),
      col((e) => e.costWei?.toString() ?? null),
      col((e) => e.reverses),
      col((e) => (e.usdRate == null ? null : String(e.usdRate))),
    ],
  );
  const tanks = [...new Map(entries.filter((x) => x.tank).map((x) => [x.tank!.id, x.tank!])).values()];
  if (tanks.length)
    await q.query(prepared('UPDATE gas_tanks t SET balance_wei = x.balance, updated_at = now() FROM unnest($1::bigint[], $2::numeric[]) AS x(id, balance) WHERE t.id = x.id'), [
      tanks.map((t) => t.id),
      tanks.map((t) => t.balanceWei.toString()),
    ]);
  return r.rows.map(entryOf).sort((a, b) => a.id - b.id);
}

/**
 * Whether a hold (`h`, a row of gas_tank_holds) counts: its meta-transaction may still be mined
 * (waiting for preconditions, queued or sent: LIVE_IN), or the hold is fresh (its meta-transaction may
 * not be written yet). A hold that does not count is left to be cleared.
 */
export const HOLD_COUNTS = `(h.created_at > now() - interval '2 minutes'
  OR EXISTS (SELECT 1 FROM meta_txns m WHERE m.chain_id = h.chain_id AND m.id = h.meta_txn_id AND m.status IN ${LIVE_IN}))`;

/** Held for live sponsored meta-transactions of a tank (a hold whose meta-transaction is gone counts only while fresh). */
export async function heldWei(q: Queryable, tankId: number): Promise<bigint> {
  const r = await q.query<{ held: string }>(`SELECT COALESCE(SUM(h.amount_wei), 0)::text AS held FROM gas_tank_holds h WHERE h.tank_id = $1 AND ${HOLD_COUNTS}`, [tankId]);
  return BigInt(r.rows[0].held);
}

export interface NewTank {
  chainId: number;
  projectId: number | null;
  name: string;
  unlimited: boolean;
  feeMarkupFactor: string;
}

export interface Adjustment {
  tankId: number;
  amountWei: bigint;
  /** AdjustGasTankBalance: must be the next nonce, or a replay of an earlier one. */
  nonce?: number;
  /** AdjustProjectBalance: a replay of the same identifier changes nothing. */
  identifier?: string;
  usdRate: number | null;
}

export function tankRepo(db: Db) {
  const nextNonce = async (q: Queryable, tankId: number) =>
    Number((await q.query<{ n: string }>(`SELECT COALESCE(MAX(nonce) + 1, 0)::text AS n FROM gas_tank_ledger WHERE tank_id = $1 AND kind = 'adjustment'`, [tankId])).rows[0].n);

  return {
    async get(id: number): Promise<Tank | undefined> {
      const r = await db.query<Row>(`SELECT ${TANK_COLUMNS} FROM gas_tanks WHERE id = $1`, [id]);
      return r.rows[0] ? tankOf(r.rows[0]) : undefined;
    },

    ofProject: (projectId: number, chainId: number) => tankOfProject(db, projectId, chainId),

    async list(chainId: number): Promise<Tank[]> {
      const r = await db.query<Row>(`SELECT ${TANK_COLUMNS} FROM gas_tanks WHERE chain_id = $1 ORDER BY id`, [chainId]);
      return r.rows.map(tankOf);
    },

    held: (tankId: number) => heldWei(db, tankId),

    async add(t: NewTank): Promise<Tank> {
      return db.transaction(async (tx) => {
        if (t.projectId != null) {
          // One tank per project and network (the unique index says so too; this says it clearly).
          await tx.query('SELECT pg_advisory_xact_lock(7250017, $1::int)', [t.projectId % 2_000_000_000]);
          const had = await tankOfProject(tx, t.projectId, t.chainId);
          if (had) throw new TankRefused(`project ${t.projectId} already has gas tank ${had.id} on this network`);
        }
        const r = await tx.query<Row>(`INSERT INTO gas_tanks (chain_id, project_id, name, unlimited, fee_markup_factor) VALUES ($1, $2, $3, $4, $5) RETURNING ${TANK_COLUMNS}`, [
          t.chainId,
          t.projectId,
          t.name,
          t.unlimited,
          t.feeMarkupFactor,
        ]);
        return tankOf(r.rows[0]);
      });
    },

    /** The project's tank on the network, created limited (a balance is a budget) when it has none. */
    async ensureForProject(projectId: number, chainId: number, name: string): Promise<Tank> {
      return db.transaction(async (tx) => {
        await tx.query('SELECT pg_advisory_xact_lock(7250017, $1::int)', [projectId % 2_000_000_000]);
        const had = await tankOfProject(tx, projectId, chainId);
        if (had) return had;
        const r = await tx.query<Row>(`INSERT INTO gas_tanks (chain_id, project_id, name, unlimited, fee_markup_factor) VALUES ($1, $2, $3, false, '1') RETURNING ${TANK_COLUMNS}`, [
          chainId,
          projectId,
          name,
        ]);
        return tankOf(r.rows[0]);
      });
    },

    async update(id: number, patch: { name?: string; unlimited?: boolean; feeMarkupFactor?: string }): Promise<Tank | undefined> {
      const r = await db.query<Row>(
        `UPDATE gas_tanks SET name = COALESCE($2, name), unlimited = COALESCE($3, unlimited), fee_markup_factor = COALESCE($4, fee_markup_factor), updated_at = now()
         WHERE id = $1 RETURNING ${TANK_COLUMNS}`,
        [id, patch.name ?? null, patch.unlimited ?? null, patch.feeMarkupFactor ?? null],
      );
      return r.rows[0] ? tankOf(r.rows[0]) : undefined;
    },

    nextNonce: (tankId: number) => nextNonce(db, tankId),

    /**
     * Credits (or, negative, withdraws) a tank, once per nonce or identifier: a replay with the same
     * amount returns the entry written the first time and changes nothing; with another amount it is a
     * conflict. A withdrawal may not take the balance below zero.
     */
    async adjust(a: Adjustment): Promise<{ entry: LedgerEntry; replay: boolean }> {
      return db.transaction(async (tx) => {
        const tank = await lockTank(tx, a.tankId);
        if (!tank) throw new TankRefused(`no gas tank ${a.tankId}`);
        const seen =
          a.identifier !== undefined
            ? await tx.query<Row>(`SELECT ${ENTRY_COLUMNS} FROM gas_tank_ledger WHERE tank_id = $1 AND identifier = $2`, [tank.id, a.identifier])
            : await tx.query<Row>(`SELECT ${ENTRY_COLUMNS} FROM gas_tank_ledger WHERE tank_id = $1 AND kind = 'adjustment' AND nonce = $2`, [tank.id, a.nonce]);
        if (seen.rows[0]) {
          const entry = entryOf(seen.rows[0]);
          const key = a.identifier !== undefined ? `identifier "${a.identifier}"` : `nonce ${a.nonce}`;
          if (entry.amountWei !== a.amountWei) throw new AdjustmentConflict(`${key} of gas tank ${tank.id} was already used for an adjustment of ${entry.amountWei} wei, not ${a.amountWei}`);
          return { entry, replay: true };
        }
        const next = await nextNonce(tx, tank.id);
        if (a.nonce !== undefined && a.nonce !== next) throw new TankRefused(`nonce ${a.nonce} is ahead of gas tank ${tank.id}'s next adjustment nonce ${next}`);
        if (tank.balanceWei + a.amountWei < 0n) throw new TankRefused(`gas tank ${tank.id} holds ${tank.balanceWei} wei: a withdrawal of ${-a.amountWei} would take it below zero`);
        const entry = await post(tx, tank, {
          chainId: tank.chainId,
          projectId: tank.projectId,
          kind: 'adjustment',
          amountWei: a.amountWei,
          nonce: next,
          identifier: a.identifier ?? null,
          metaTxnId: null,
          txnHash: null,
          gasUsed: null,
          gasPrice: null,
          costWei: null,
          reverses: null,
          usdRate: a.usdRate,
        });
        return { entry, replay: false };
      });
    },

    async adjustment(tankId: number, nonce: number): Promise<LedgerEntry | undefined> {
      const r = await db.query<Row>(`SELECT ${ENTRY_COLUMNS} FROM gas_tank_ledger WHERE tank_id = $1 AND kind = 'adjustment' AND nonce = $2`, [tankId, nonce]);
      return r.rows[0] ? entryOf(r.rows[0]) : undefined;
    },

    async adjustments(tankId: number, offset: number, limit: number): Promise<LedgerEntry[]> {
      const r = await db.query<Row>(`SELECT ${ENTRY_COLUMNS} FROM gas_tank_ledger WHERE tank_id = $1 AND kind = 'adjustment' ORDER BY nonce DESC OFFSET $2 LIMIT $3`, [tankId, offset, limit]);
      return r.rows.map(entryOf);
    },

    /**
     * A project's ledger on a network, newest first, a page at a time: entries before the cursor (an
     * entry id), of a kind, written in [from, to). Each entry carries `paidWei`: what the operator had
     * paid so far for the project's meta-transactions sponsored without a tank (its running total), so an
     * entry without a balance still says where it left things.
     */
    async ledgerPage(projectId: number, chainId: number, f: LedgerFilter & { before?: number; limit: number }): Promise<Array<LedgerEntry & { paidWei: bigint }>> {
      const r = await db.query<Row>(
        `SELECT * FROM (
           SELECT ${ENTRY_COLUMNS}, (-SUM(CASE WHEN tank_id IS NULL THEN amount_wei ELSE 0 END) OVER (ORDER BY id))::text AS paid_wei
             FROM gas_tank_ledger WHERE project_id = $1 AND chain_id = $2) l
          WHERE ($3::bigint IS NULL OR id < $3) AND ${ledgerFilter(4)}
          ORDER BY id DESC LIMIT $7`,
        [projectId, chainId, f.before ?? null, f.kind ?? null, f.from ?? null, f.to ?? null, f.limit],
      );
      return r.rows.map((x) => ({ ...entryOf(x), paidWei: BigInt(String(x.paid_wei)) }));
    },

    /** How many ledger entries the filter keeps (every page of it). */
    async ledgerCount(projectId: number, chainId: number, f: LedgerFilter): Promise<number> {
      const r = await db.query<{ n: string }>(`SELECT count(*)::text AS n FROM gas_tank_ledger WHERE project_id = $1 AND chain_id = $2 AND ${ledgerFilter(3)}`, [
        projectId,
        chainId,
        f.kind ?? null,
        f.from ?? null,
        f.to ?? null,
      ]);
      return Number(r.rows[0].n);
    },

    /** What a project's sponsored meta-transactions cost it in [from, to): debits less reversals, and the gas cost before markup. */
    async cost(projectId: number, chainId: number, from: Date, to: Date): Promise<{ chargedWei: bigint; gasCostWei: bigint; count: number }> {
      const r = await db.query<{ charged: string; gas: string; n: string }>(
        `SELECT COALESCE(-SUM(amount_wei), 0)::text AS charged,
                COALESCE(SUM(CASE WHEN kind = 'debit' THEN cost_wei ELSE -cost_wei END), 0)::text AS gas,
                COUNT(*) FILTER (WHERE kind = 'debit')::text AS n
           FROM gas_tank_ledger WHERE project_id = $1 AND chain_id = $2 AND kind IN ('debit', 'reversal') AND created_at >= $3 AND created_at < $4`,
        [projectId, chainId, from, to],
      );
      const x = r.rows[0];
      return { chargedWei: BigInt(x.charged), gasCostWei: BigInt(x.gas), count: Number(x.n) };
    },

    /**
     * The project's balance on a network at the end of each of the last `days` UTC days, oldest first
     * (null before it had one). Each entry of the ledger keeps the balance it left, so a day's end is
     * its last entry: two index probes a day ((project, chain, created_at), then the entries of that
     * instant by id), not a sum over the ledger.
     */
    async balanceByDay(projectId: number, chainId: number, days: number): Promise<Array<{ day: string; wei: bigint | null }>> {
      const r = await db.query<{ day: string; wei: string | null }>(
        `SELECT to_char(d.day, 'YYYY-MM-DD') AS day,
                (SELECT balance_wei::text FROM gas_tank_ledger l
                  WHERE l.project_id = $1 AND l.chain_id = $2 AND l.tank_id IS NOT NULL AND l.created_at = d.at
                  ORDER BY l.id DESC LIMIT 1) AS wei
           FROM (SELECT g.day, (SELECT max(created_at) FROM gas_tank_ledger
                                 WHERE project_id = $1 AND chain_id = $2 AND tank_id IS NOT NULL
                                   AND created_at < ((g.day + interval '1 day') AT TIME ZONE 'UTC')) AS at
                   FROM generate_series(((now() AT TIME ZONE 'UTC')::date - $3::int)::timestamp, (now() AT TIME ZONE 'UTC')::date::timestamp, interval '1 day') AS g(day)) d
          ORDER BY d.day`,
        [projectId, chainId, days - 1],
      );
      return r.rows.map((x) => ({ day: x.day, wei: x.wei == null ? null : BigInt(x.wei) }));
    },

    /** Spend per UTC day over the last `days` days (days without spend are left out). */
    async spendByDay(projectId: number, chainId: number, days: number): Promise<Array<{ day: string; wei: bigint; count: number }>> {
      const r = await db.query<{ day: string; wei: string; n: string }>(
        `SELECT to_char((created_at AT TIME ZONE 'UTC')::date, 'YYYY-MM-DD') AS day, (-SUM(amount_wei))::text AS wei, COUNT(*) FILTER (WHERE kind = 'debit')::text AS n
           FROM gas_tank_ledger WHERE project_id = $1 AND chain_id = $2 AND kind IN ('debit', 'reversal')
            AND created_at >= (((now() AT TIME ZONE 'UTC')::date - $3::int)::timestamp AT TIME ZONE 'UTC')
          GROUP BY 1 ORDER BY 1`,
        [projectId, chainId, days - 1],
      );
      return r.rows.map((x) => ({ day: x.day, wei: BigInt(x.wei), count: Number(x.n) }));
    },
  };
}
export type TankRepo = ReturnType<typeof tankRepo>;
