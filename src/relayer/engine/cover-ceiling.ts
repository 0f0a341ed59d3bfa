import { formatGwei } from 'viem';
import { replacementFees, type FeePolicy, type Fees, type Market, type Replacement } from './gas-price.ts';
import type { MetaTxnRow } from '../store.ts';

/*
 * The bound before signing. A transaction can burn its whole gas limit at the max fee per gas it is signed
 * with (plus, on an OP-stack chain, its L1 data fee), whatever a simulation saw. What pays for that is
 * each meta-transaction's cover, recorded at intake (`cover_wei`: its fee's worth in wei, or its sponsor's
 * hold). So no attempt — first, batch or replacement — is signed with a fee per gas above
 * (Σ cover − L1 fee bound) / gas limit: the relayer cannot be made to spend what it was not paid or held,
 * even when the base fee climbs between intake and inclusion. A meta-transaction whose cover cannot meet
 * the base fee waits (unsigned) for it to fall, and is dropped after queueTimeoutSec; one already in flight
 * is replaced up to its ceiling and then waits, as at the fee cap (docs/relayer-worst-case.md).
 */

/**
 * What a row may be signed for: its cover, or for a fee-paying one whose fee is not final its exposure
 * (intake/pricing.ts exposureOf: no more than its limit at the price times feePriceRoom), which is what its
 * loss budgets counted.
 */
const signable = (m: Pick<MetaTxnRow, 'cover_wei' | 'exposure_wei' | 'fee_final'>) => (m.fee_final === false && m.exposure_wei != null ? m.exposure_wei : m.cover_wei);

/** The highest fee per gas its cover pays for; null when a member has no cover (a gasless chain, a row from before covers were kept). */
export function coverCeiling(metas: readonly Pick<MetaTxnRow, 'cover_wei' | 'exposure_wei' | 'fee_final'>[], gas: bigint, l1Bound = 0n): bigint | null {
  if (metas.length === 0 || metas.some((m) => signable(m) == null) || gas <= 0n) return null;
  const cover = metas.reduce((a, m) => a + BigInt(signable(m)!), 0n) - l1Bound;
  return cover > 0n ? cover / gas : 0n;
}

/** The fees lowered to the ceiling (the tip with them); unchanged without one. */
export function clampToCeiling(fees: Fees, ceiling: bigint | null): Fees {
  if (ceiling == null) return fees;
  if (fees.type === 'legacy') return fees.gasPrice > ceiling ? { type: 'legacy', gasPrice: ceiling } : fees;
  if (fees.maxFeePerGas <= ceiling) return fees;
  return { type: 'eip1559', maxFeePerGas: ceiling, maxPriorityFeePerGas: fees.maxPriorityFeePerGas < ceiling ? fees.maxPriorityFeePerGas : ceiling };
}

/** The fee per gas a transaction offers at most. */
export const feePerGas = (fees: Fees) => (fees.type === 'legacy' ? fees.gasPrice : fees.maxFeePerGas);

/**
 * Whether the covers pay for the market's first-attempt price over this gas (its max fee: room for the base
 * fee to double); true without a ceiling. One that does not is signed at its ceiling, and is the first to
 * stall its sender when the base fee climbs (dispatcher.ts keeps it off the reserve senders).
 */
export function paysForMarket(metas: readonly Pick<MetaTxnRow, 'cover_wei'>[], gas: bigint, market: Fees): boolean {
  const ceiling = coverCeiling(metas, gas);
  return ceiling == null || ceiling >= feePerGas(market);
}

/** Why fees clamped to a ceiling cannot be included at this base fee, or null when they can. */
export function belowBaseFee(fees: Fees, ceiling: bigint | null, baseFee: bigint | null): string | null {
  if (ceiling == null || baseFee == null || feePerGas(fees) >= baseFee) return null;
  return `its fee or sponsorship pays for at most ${formatGwei(ceiling)} gwei per gas over its gas limit, below the base fee of ${formatGwei(baseFee)} gwei: it waits for the base fee to fall`;
}

/**
 * A slot's replacement: bumped over the last attempt or at the market price, never above the fee cap or
 * its ceiling; not signed at all when it could not meet the next base fee (the node would refuse it, and
 * the same fees — the same hash — would come out again next block): then why it waits.
 */
export function boundedReplacement(last: Fees, market: Market, policy: FeePolicy, ceiling: bigint | null): Replacement {
  const bound = ceiling != null && ceiling < policy.capWei;
  const rep = replacementFees(last, market, bound ? { ...policy, capWei: ceiling } : policy);
  const what = bound ? 'what its fee or sponsorship pays for over its gas limit' : 'the fee cap';
  if (!rep.ok) return bound ? { ok: false, reason: `${rep.reason}: ${what}` } : rep;
  const base = market.nextBaseFee;
  if (base != null && feePerGas(rep.fees) < base) {
    return {
      ok: false,
      reason: `a replacement may offer at most ${formatGwei(feePerGas(rep.fees))} gwei per gas (${what}), below the base fee of ${formatGwei(base)} gwei: it waits for the base fee to fall`,
    };
  }
  return rep;
}
