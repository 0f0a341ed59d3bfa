import { fromWei, usdOf } from './amounts.ts';
import type { LedgerEntry, Tank } from './tanks.ts';

/*
 * The reference's GasTank and GasTankBalanceAdjustment: decimal.Decimal fields as JSON numbers in
 * native units. metarelay adds the exact wei amounts as strings beside them (a JSON number cannot
 * carry 18 decimals of a large balance), the project, what is held, and USD values where a
 * native/USD feed is configured.
 */

export function gasTankWire(t: Tank, heldWei: bigint, usdRate: number | null) {
  return {
    id: t.id,
    chainId: t.chainId,
    name: t.name,
    currentBalance: fromWei(t.balanceWei),
    unlimited: t.unlimited,
    feeMarkupFactor: Number(t.feeMarkupFactor),
    updatedAt: t.updatedAt.toISOString(),
    createdAt: t.createdAt.toISOString(),
    projectId: t.projectId,
    balanceWei: t.balanceWei.toString(),
    heldWei: heldWei.toString(),
    availableWei: (t.balanceWei - heldWei).toString(),
    balanceUsd: usdOf(t.balanceWei, usdRate),
  };
}

export function adjustmentWire(e: LedgerEntry) {
  return {
    gasTankId: e.tankId,
    nonce: e.nonce,
    amount: fromWei(e.amountWei),
    totalBalance: fromWei(e.balanceWei ?? 0n),
    balanceTimestamp: e.createdAt.toISOString(),
    createdAt: e.createdAt.toISOString(),
    amountWei: e.amountWei.toString(),
    totalBalanceWei: (e.balanceWei ?? 0n).toString(),
    identifier: e.identifier,
    amountUsd: usdOf(e.amountWei, e.usdRate),
  };
}

/** One ledger line as the console shows it: adjustments, debits and reversals alike. */
export function ledgerWire(e: LedgerEntry) {
  return {
    id: e.id,
    kind: e.kind,
    amount: fromWei(e.amountWei),
    amountWei: e.amountWei.toString(),
    balanceWei: e.balanceWei?.toString() ?? null,
    amountUsd: usdOf(e.amountWei, e.usdRate),
    usdRate: e.usdRate,
    nonce: e.nonce,
    identifier: e.identifier,
    metaTxnId: e.metaTxnId,
    txnHash: e.txnHash,
    gasUsed: e.gasUsed,
    gasPrice: e.gasPrice?.toString() ?? null,
    costWei: e.costWei?.toString() ?? null,
    reverses: e.reverses,
    createdAt: e.createdAt.toISOString(),
  };
}
