import { prepared, type Queryable } from '../../store/db.ts';
import type { MetaTxnRow, StatusKnown } from '../store.ts';
import { applyFactor } from './amounts.ts';
import { holdAgain, releaseHolds } from './holds.ts';
import { entryOf, lockTank, postMany, tankOf, type LedgerEntry, type NewEntry, type Tank } from './tanks.ts';

/*
 * The relayer's status hook for project balances: runs on the transaction that writes a sponsored
 * meta-transaction's status, so a debit commits (or rolls back) with the status it follows.
 *
 * - Mined (SUCCEEDED, PARTIALLY_FAILED, FAILED — a reverted call still burnt gas): debited its actual
 *   cost, gas_used (a batch member's share) × gas_price (the receipt's effectiveGasPrice) plus its share
 *   of the receipt's L1 data fee (OP stack, l1_fee_wei), times the
 *   tank's markup; its hold is released. Settled again (a reorg moved it to another block or another
 *   attempt won), the old debit is reversed and the new one written, when they differ.
 * - Back to SENT or QUEUED after a reorg removed its transaction: the debit is reversed, and the same
 *   amount held again, since it will be mined again.
 * - DROPPED: its hold is released.
 *
 * A sponsored meta-transaction of a project without a tank is recorded all the same (tank_id NULL):
 * GetTransactionCost and the console's spend chart count it; no balance moves.
 */

const MINED = new Set(['SUCCEEDED', 'PARTIALLY_FAILED', 'FAILED']);

export interface DebitOptions {
  /** The native/USD rate now, without I/O (the last one read), or null. */
  usdRate?: (chainId: number) => number | null;
}

export function balanceDebits(opts: DebitOptions = {}) {
  return async (q: Queryable, rows: MetaTxnRow[], known?: StatusKnown) => {
    // A row that was not mined before this write (just inserted, or written from an unmined status) and is not mined
    // or dropped now has no debit to reverse and no hold to release: its ledger is not read.
    const unminedBefore = known?.created || (known?.before !== undefined && !MINED.has(known.before));
    const settled = (r: MetaTxnRow) => !unminedBefore || MINED.has(r.status) || r.status === 'DROPPED';
    const mine = rows.filter((r) => r.sponsored && r.project_id != null && settled(r));
    if (mine.length === 0) return;
    const byChain = new Map<number, MetaTxnRow[]>();
    for (const r of mine) byChain.set(r.chain_id, [...(byChain.get(r.chain_id) ?? []), r]);
    for (const [chainId, list] of byChain) await settleChain(q, chainId, list, opts.usdRate?.(chainId) ?? null);
  };
}

async function settleChain(q: Queryable, chainId: number, rows: MetaTxnRow[], usdRate: number | null) {
  const ids = rows.map((r) => r.id);
  const entries = (
    await q.query<Record<string, unknown>>(
      prepared(`SELECT id, chain_id, project_id, tank_id, kind, amount_wei::text AS amount_wei, balance_wei::text AS balance_wei, nonce, identifier, meta_txn_id, txn_hash,
              gas_used, gas_price::text AS gas_price, cost_wei::text AS cost_wei, reverses, usd_rate, created_at
         FROM gas_tank_ledger WHERE chain_id = $1 AND meta_txn_id = ANY($2) ORDER BY id`),
      [chainId, ids],
    )
  ).rows.map(entryOf);
  // The debit standing for each meta-transaction: its last one not reversed.
  const reversed = new Set(entries.filter((e) => e.kind === 'reversal').map((e) => e.reverses));
  const standing = new Map<string, LedgerEntry>();
  for (const e of entries) if (e.kind === 'debit' && !reversed.has(e.id)) standing.set(e.metaTxnId!, e);

  // Most status writes (QUEUED, a first SENT) move no balance: they take no tank lock.
  const isMined = (r: MetaTxnRow) => MINED.has(r.status) && r.gas_used != null && r.gas_price != null;
  // What the sender paid: the gas, and on an OP-stack chain its share of the L1 data fee.
  const costOf = (r: MetaTxnRow) => BigInt(r.gas_used!) * BigInt(r.gas_price!) + BigInt(r.l1_fee_wei ?? '0');
  const posting = rows.filter((r) => {
    const was = standing.get(r.id);
    if (!isMined(r)) return !!was;
    return !(was && was.costWei === costOf(r) && was.txnHash === r.txn_hash && was.gasUsed === r.gas_used);
  });
  const released = rows.filter((r) => isMined(r) || r.status === 'DROPPED').map((r) => r.id);
  if (posting.length === 0) {
    await releaseHolds(q, chainId, released);
    return;
  }
  const projects = [...new Set(posting.map((r) => r.project_id!))];
  const current = await q.query<Record<string, unknown>>(
    prepared(`SELECT id, chain_id, project_id, name, unlimited, fee_markup_factor, balance_wei::text AS balance_wei, created_at, updated_at
       FROM gas_tanks WHERE chain_id = $1 AND project_id = ANY($2::bigint[])`),
    [chainId, projects],
  );
  const tankIdOfProject = new Map(current.rows.map(tankOf).map((t) => [t.projectId!, t.id]));
  // Lock every tank touched, in id order, so two settling processes never wait on each other in a circle.
  const tankIds = [...new Set([...tankIdOfProject.values(), ...posting.map((r) => standing.get(r.id)?.tankId).filter((x): x is number => x != null)])].sort((a, b) => a - b);
  const tanks = new Map<number, Tank>();
  for (const id of tankIds) {
    const t = await lockTank(q, id);
    if (t) tanks.set(id, t);
  }
  const tankFor = (id: number | null | undefined) => (id == null ? null : (tanks.get(id) ?? null));

  // Written in one go after the loop (postMany): the entries in this order, then the holds taken again.
  const writes: Array<{ tank: Tank | null; e: NewEntry }> = [];
  const heldAgain: Array<{ tankId: number; metaTxnId: string; amountWei: bigint }> = [];
  for (const r of posting) {
    const was = standing.get(r.id);
    const base = { chainId, projectId: r.project_id, nonce: null, identifier: null, metaTxnId: r.id, usdRate };
    if (isMined(r)) {
      const cost = costOf(r);
      if (was) writes.push(reversal(tankFor(was.tankId), was, base));
      const tank = tankFor(tankIdOfProject.get(r.project_id!));
      const charged = tank ? applyFactor(cost, tank.feeMarkupFactor) : cost;
      writes.push({ tank, e: { ...base, kind: 'debit', amountWei: -charged, txnHash: r.txn_hash, gasUsed: r.gas_used, gasPrice: BigInt(r.gas_price!), costWei: cost, reverses: null } });
      continue;
    }
    if (!was) continue;
    const tank = tankFor(was.tankId);
    writes.push(reversal(tank, was, base));
    // It will be mined again: what it cost stays set aside meanwhile.
    if (tank && !tank.unlimited && r.status !== 'DROPPED') heldAgain.push({ tankId: tank.id, metaTxnId: r.id, amountWei: -was.amountWei });
  }
  await postMany(q, writes);
  for (const h of heldAgain) await holdAgain(q, h.tankId, chainId, h.metaTxnId, h.amountWei);
  await releaseHolds(q, chainId, released);
}

function reversal(
  tank: Tank | null,
  debit: LedgerEntry,
  base: { chainId: number; projectId: number | null; nonce: null; identifier: null; metaTxnId: string; usdRate: number | null },
): { tank: Tank | null; e: NewEntry } {
  return {
    tank,
    e: {
      ...base,
      projectId: debit.projectId,
      kind: 'reversal',
      amountWei: -debit.amountWei,
      txnHash: debit.txnHash,
      gasUsed: debit.gasUsed,
      gasPrice: debit.gasPrice,
      costWei: debit.costWei,
      reverses: debit.id,
    },
  };
}
