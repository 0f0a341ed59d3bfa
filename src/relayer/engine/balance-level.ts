// A sender's balance level (ok, warning, low) and its crossings. The sweep reads every held sender's
// balance on each head; what it must not do is announce "low" on each of them. So the level last
// announced is kept on the sender's row, and a crossing is the conditional change of that column
// under the row's lock: two relayer processes that see the same balance race for one change, and
// only the winner's transaction carries the event.

import { parseEther, type Address } from 'viem';
import type { Db, Queryable } from '../../store/db.ts';
import { lockBalanceLevel, setBalanceLevel, type BalanceLevel } from './ledger.ts';

export type { BalanceLevel } from './ledger.ts';

export interface BalanceCrossing {
  chainId: number;
  sender: Address;
  /** The level announced before (null: never looked at). */
  from: BalanceLevel | null;
  to: BalanceLevel;
  balance: bigint;
  minSenderBalance: bigint;
  warnSenderBalance: bigint | null;
}

export type BalanceHook = (q: Queryable, c: BalanceCrossing) => Promise<void>;

const RANK: Record<BalanceLevel, number> = { ok: 0, warning: 1, low: 2 };

export function levelOf(balance: bigint, floor: bigint, warn: bigint | null): BalanceLevel {
  if (floor > 0n && balance < floor) return 'low';
  if (warn != null && balance < warn) return 'warning';
  return 'ok';
}

/** Worse than before: sender.low_balance; better: sender.recovered. A first look that finds "ok" is no news. */
export function crossingKind(c: Pick<BalanceCrossing, 'from' | 'to'>): 'sender.low_balance' | 'sender.recovered' | null {
  if (c.from === c.to) return null;
  if (c.from == null) return c.to === 'ok' ? null : 'sender.low_balance';
  return RANK[c.to] > RANK[c.from] ? 'sender.low_balance' : 'sender.recovered';
}

/**
 * Records the sender's level and, when it moved, calls `hook` on the same transaction. Returns the
 * crossing this call recorded (null when the stored level already said so).
 */
export async function recordBalanceLevel(
  db: Db,
  t: { chainId: number; sender: Address; balance: bigint; minSenderBalance: bigint; warnSenderBalance: bigint | null },
  hook?: BalanceHook,
): Promise<BalanceCrossing | null> {
  const to = levelOf(t.balance, t.minSenderBalance, t.warnSenderBalance);
  return db.transaction(async (tx) => {
    const from = await lockBalanceLevel(tx, t.chainId, t.sender);
    if (from === undefined) return null;
    if (from === to) return null;
    await setBalanceLevel(tx, t.chainId, t.sender, to);
    const crossing: BalanceCrossing = { ...t, sender: t.sender.toLowerCase() as Address, from, to };
    if (hook && crossingKind(crossing)) await hook(tx, crossing);
    return crossing;
  });
}

/** The sweep's call, once per sender and head: cheap unless the level moves. */
export async function announceBalanceLevel(
  d: { chainId: number; config: { minSenderBalance: string; warnSenderBalance?: string }; db: Db; onSenderBalance?: BalanceHook },
  sender: Address,
  balance: bigint,
  seen: Map<string, BalanceLevel>,
): Promise<void> {
  const floor = parseEther(d.config.minSenderBalance);
  const warn = d.config.warnSenderBalance ? parseEther(d.config.warnSenderBalance) : null;
  const key = sender.toLowerCase();
  const level = levelOf(balance, floor, warn);
  if (seen.get(key) === level) return;
  await recordBalanceLevel(d.db, { chainId: d.chainId, sender, balance, minSenderBalance: floor, warnSenderBalance: warn }, d.onSenderBalance);
  seen.set(key, level);
}
