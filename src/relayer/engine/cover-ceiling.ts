import { formatGwei } from 'viem';
import type { Fees } from './gas-price.ts';
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

/** The highest fee per gas its cover pays for; null when a member has no cover (a gasless chain, a row from before covers were kept). */
export function coverCeiling(metas: readonly Pick<MetaTxnRow, 'cover_wei'>[], gas: bigint, l1Bound = 0n): bigint | null {
  if (metas.length === 0 || metas.some((m) => m.cover_wei == null) || gas <= 0n) return null;
  const cover = metas.reduce((a, m) => a + BigInt(m.cover_wei!), 0n) - l1Bound;
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

/** Why fees clamped to a ceiling cannot be included at this base fee, or null when they can. */
export function belowBaseFee(fees: Fees, ceiling: bigint | null, baseFee: bigint | null): string | null {
  if (ceiling == null || baseFee == null || feePerGas(fees) >= baseFee) return null;
  return `its fee or sponsorship pays for at most ${formatGwei(ceiling)} gwei per gas over its gas limit, below the base fee of ${formatGwei(baseFee)} gwei: it waits for the base fee to fall`;
}
