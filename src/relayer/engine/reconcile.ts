import type { Address, Hex } from 'viem';
import type { SequenceContext } from '../context.ts';
import { bareId, decodeCall } from '../intake/bundle.ts';
import { calledContracts, structuralFees, tokenKey, type FeeTokenConfig } from '../intake/fees.ts';
import type { Shortfall } from '../bars.ts';
import type { MetaTxnRow } from '../store.ts';

/**
 * After inclusion: what a mined meta-transaction cost against what it was admitted with (its fee's worth,
 * or its sponsor's hold, in wei at intake: `cover_wei`). Intake prices and holds the gas limit that is
 * signed, so a cost beyond the cover means either the gas price rose past the margin (`price`: the
 * operator's risk, counted and shown) or the bundle burnt more gas than was priced (`gas`: which worst-case
 * pricing rules out, so it is treated as an attack that got through): the latter bars the fee payer, the
 * key, the client address and the contracts it called from fee-paid relaying.
 */
export interface CostCheck {
  shortfallWei: bigint | null;
  kind: 'gas' | 'price' | null;
}

export function reconcileCost(m: Pick<MetaTxnRow, 'cover_wei' | 'gas_price_priced'>, gasUsed: bigint | null, gasPrice: bigint | null, l1Fee = 0n): CostCheck {
  if (m.cover_wei == null || gasUsed == null || gasPrice == null) return { shortfallWei: null, kind: null };
  const cover = BigInt(m.cover_wei);
  // The sender paid the gas and, on an OP-stack chain, the L1 data fee on top (the receipt's l1Fee).
  const cost = gasUsed * gasPrice + l1Fee;
  if (cost <= cover) return { shortfallWei: null, kind: null };
  const priced = m.gas_price_priced == null ? gasPrice : BigInt(m.gas_price_priced);
  // The L1 fee moves with L1 prices, not with the gas burnt: a cover it alone exceeds is a price shortfall.
  return { shortfallWei: cost - cover, kind: gasUsed * priced > cover ? 'gas' : 'price' };
}

/** The contracts a gas shortfall bars: what the bundle called, never the wallet contracts or a fee token (barring those would bar everyone). */
export function contractsToBar(m: MetaTxnRow, ctx: { chainId: number; context: SequenceContext; payee: Address; feeTokens: readonly FeeTokenConfig[] }): string[] {
  try {
    const call = decodeCall(ctx.chainId, ctx.context, m.wallet as Address, m.entrypoint as Address, m.input as Hex);
    const spared = new Set<string>([...Object.values(ctx.context), ...ctx.feeTokens.map(tokenKey)].map((a) => a.toLowerCase()));
    return calledContracts(call, structuralFees(call, ctx.payee, ctx.feeTokens)).filter((a) => !spared.has(a.toLowerCase()));
  } catch {
    return [];
  }
}

/** The bar record of a gas shortfall (owed = the cost, received = the cover, both in wei). */
export function gasShortfall(m: MetaTxnRow, chainId: number, shortfallWei: bigint, contracts: string[]): Shortfall {
  const cover = BigInt(m.cover_wei ?? '0');
  return {
    chainId,
    metaTxnId: bareId(m.id),
    wallet: m.fee_payer,
    keyId: m.key_id,
    clientIp: m.client_ip,
    clientNet: m.client_net ?? null,
    feeToken: null,
    owed: cover + shortfallWei,
    received: cover,
    contracts,
  };
}
