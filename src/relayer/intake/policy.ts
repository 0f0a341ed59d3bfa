import type { Address } from 'viem';
import { fractionToDecimal, type Fraction } from './fees.ts';

/*
 * A sponsorship rule's policy (docs/sponsorship.md): caps in wei and/or USD, a validity window and
 * wallet allow/deny lists. The pure checks live here; counting spend is spend-caps.ts's job.
 * USD amounts are integers of atto-USD (10^-18 dollars): one wei at $P per native is P atto-USD.
 */

/** A cap in wei and/or USD (atto-USD); null: none in that unit. Both set: both must hold. */
export interface Cap {
  wei: bigint | null;
  usd: bigint | null;
}

export interface SponsorPolicy {
  /** What the rule pays in one UTC day, all wallets together. */
  dailyCap: Cap;
  /** What the rule pays for one wallet in one UTC day. */
  walletDailyCap: Cap;
  /** What one meta-transaction may cost. */
  txnCap: Cap;
  /** What the rule pays in all, ever (refunds given back). */
  totalBudget: Cap;
  /** Not sponsoring before / from this instant; null: open. */
  validFrom: Date | null;
  validUntil: Date | null;
  /** Only these wallets; null: any wallet. */
  allowWallets: Address[] | null;
  /** Never these wallets (wins over the allow list). */
  denyWallets: Address[];
}

export const NO_CAP: Cap = { wei: null, usd: null };

export const EMPTY_POLICY: SponsorPolicy = {
  dailyCap: NO_CAP,
  walletDailyCap: NO_CAP,
  txnCap: NO_CAP,
  totalBudget: NO_CAP,
  validFrom: null,
  validUntil: null,
  allowWallets: null,
  denyWallets: [],
};

export const CAP_NAMES = ['dailyCap', 'walletDailyCap', 'txnCap', 'totalBudget'] as const;
export type CapName = (typeof CAP_NAMES)[number];

/** Does any cap of the policy count in USD (so a native/USD price is needed to judge it)? */
export const needsUsd = (p: SponsorPolicy) => CAP_NAMES.some((n) => p[n].usd != null);

/** Which limit stopped a rule from sponsoring a bundle. */
export type LimitKind =
  | 'notYetValid'
  | 'expired'
  | 'walletNotAllowed'
  | 'walletDenied'
  | 'maxGasLimit'
  | 'noUsdPrice'
  | 'txnCap'
  | 'dailyCap'
  | 'walletDailyCap'
  | 'totalBudget'
  | 'approval'
  /** The project's limited gas tank cannot cover it (relayer/balances). */
  | 'projectBalance';

export interface Stop {
  ruleId: number;
  limit: LimitKind;
  reason: string;
}

/** What one meta-transaction costs a rule: wei, and atto-USD when a native/USD price is known. */
export interface Cost {
  wei: bigint;
  usd: bigint | null;
  /** Why there is no USD value (no feed configured, a stale feed …). */
  usdMissing?: string;
}

const ceilDiv = (a: bigint, b: bigint) => (a + b - 1n) / b;

/** wei at `usdPerNative` (USD per whole native unit) in atto-USD, rounded up (a cap is never undercounted). */
export const weiToAttoUsd = (wei: bigint, usdPerNative: Fraction) => ceilDiv(wei * usdPerNative.num, usdPerNative.den);

const ATTO = 10n ** 18n;

/** "12.5" → 12.5 × 10^18 atto-USD. At most 18 fractional digits. */
export function parseUsd(text: string): bigint {
  const m = /^(\d{1,40})(?:\.(\d{1,18}))?$/.exec(text.trim());
  if (!m) throw new Error(`"${text}" is not a USD amount (a decimal number, at most 18 fractional digits)`);
  return BigInt(m[1]) * ATTO + BigInt((m[2] ?? '').padEnd(18, '0'));
}

export const formatUsd = (atto: bigint) => fractionToDecimal({ num: atto, den: ATTO }, 18);

function money(wei: bigint, usd: bigint | null) {
  return usd == null ? `${wei} wei` : `${wei} wei ($${formatUsd(usd)})`;
}

/** The first unit of `cap` that `spent + cost` would pass, described; null when it fits. */
function over(cap: Cap, spent: { wei: bigint; usd: bigint }, cost: Cost): string | null {
  if (cap.wei != null && spent.wei + cost.wei > cap.wei) return `${spent.wei} wei of ${cap.wei} wei spent, this needs ${cost.wei} wei`;
  if (cap.usd != null && cost.usd != null && spent.usd + cost.usd > cap.usd) {
    return `$${formatUsd(spent.usd)} of $${formatUsd(cap.usd)} spent, this needs $${formatUsd(cost.usd)}`;
  }
  return null;
}

interface RuleRef {
  id: number;
  kind: string;
  address: string;
  maxGas: number | null;
  policy: SponsorPolicy;
}

const label = (r: RuleRef) => `sponsorship ${r.id} (${r.kind} ${r.address})`;

/**
 * The limits that need no stored spend: the validity window, the wallet lists, the gas ceiling and
 * the per-transaction cap. `gas` null skips the ceiling (CheckSponsorship without a gas figure).
 */
export function staticStop(rule: RuleRef, at: { wallets: readonly Address[]; gas: bigint | null; cost: Cost; now: Date }): Stop | null {
  const p = rule.policy;
  const stop = (limit: LimitKind, why: string): Stop => ({ ruleId: rule.id, limit, reason: `${label(rule)} ${why}` });
  if (p.validFrom && at.now < p.validFrom) return stop('notYetValid', `is valid from ${p.validFrom.toISOString()}`);
  if (p.validUntil && at.now >= p.validUntil) return stop('expired', `ended at ${p.validUntil.toISOString()}`);
  const denied = at.wallets.find((w) => p.denyWallets.includes(w.toLowerCase() as Address));
  if (denied) return stop('walletDenied', `denies wallet ${denied}`);
  const notAllowed = p.allowWallets && at.wallets.find((w) => !p.allowWallets!.includes(w.toLowerCase() as Address));
  if (notAllowed) return stop('walletNotAllowed', `does not allow wallet ${notAllowed}`);
  // The wording predates the other limits; clients match on "ceiling of sponsorship".
  if (at.gas != null && rule.maxGas != null && at.gas > BigInt(rule.maxGas)) {
    return { ruleId: rule.id, limit: 'maxGasLimit', reason: `it needs ${at.gas} gas, over the ${rule.maxGas} ceiling of ${label(rule)}` };
  }
  if (needsUsd(p) && at.cost.usd == null) return stop('noUsdPrice', `has caps in USD, and there is no native/USD price now (${at.cost.usdMissing ?? 'unknown'})`);
  const txn = over(p.txnCap, { wei: 0n, usd: 0n }, at.cost);
  if (txn) return stop('txnCap', `caps one meta-transaction at ${capText(p.txnCap)}; this costs ${money(at.cost.wei, at.cost.usd)}`);
  return null;
}

/** What a rule has spent, as the budget checks need it. */
export interface RuleSpend {
  today: { wei: bigint; usd: bigint };
  total: { wei: bigint; usd: bigint };
  /** Today's spend of each wallet asked about (lower case); absent: nothing. */
  wallets: Map<string, { wei: bigint; usd: bigint }>;
}

/**
 * A budget limit in the words its refusals use (clients match on "daily spend cap", "daily cap for
 * wallet" and "total budget"), naming the wallets when the limit is a wallet's.
 */
export function budgetWords(limit: LimitKind, wallets: readonly Address[] = []): string {
  if (limit === 'walletDailyCap') return wallets.length ? `daily cap for wallet ${wallets.join(' or ')}` : 'daily cap for a wallet';
  return limit === 'dailyCap' ? 'daily spend cap' : limit === 'totalBudget' ? 'total budget' : limit;
}

/** The budget limits: daily cap, per-wallet daily cap, total budget. */
export function budgetStop(rule: RuleRef, spend: RuleSpend, wallets: readonly Address[], cost: Cost): Stop | null {
  const p = rule.policy;
  const stop = (limit: LimitKind, why: string): Stop => ({ ruleId: rule.id, limit, reason: `${label(rule)} ${why}` });
  // The wording "daily spend cap" is what clients have matched on since the cap was introduced.
  const day = over(p.dailyCap, spend.today, cost);
  if (day) return stop('dailyCap', `has reached its daily spend cap (${day})`);
  for (const w of wallets) {
    const x = over(p.walletDailyCap, spend.wallets.get(w.toLowerCase()) ?? { wei: 0n, usd: 0n }, cost);
    if (x) return stop('walletDailyCap', `has reached its daily cap for wallet ${w} (${x})`);
  }
  const total = over(p.totalBudget, spend.total, cost);
  if (total) return stop('totalBudget', `has used up its total budget (${total})`);
  return null;
}

export function capText(c: Cap): string {
  const parts = [c.wei != null ? `${c.wei} wei` : null, c.usd != null ? `$${formatUsd(c.usd)}` : null].filter(Boolean);
  return parts.join(' and ') || 'none';
}
