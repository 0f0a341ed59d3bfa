import type { PublicClient } from 'viem';

export type Fees = { type: 'eip1559'; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } | { type: 'legacy'; gasPrice: bigint };
/** First-attempt fees with the next block's base fee and number they were read with (none on a legacy-priced chain). */
export type Market = Fees & { nextBaseFee?: bigint; nextBlock?: bigint };

export interface FeePolicy {
  /** No max fee (or legacy gas price) above this. */
  capWei: bigint;
  minPriorityWei: bigint;
  bumpPercent: number;
  /** The chain's fee model is `legacy` (fee-model.ts): a legacy gas price even where the node reports a base fee. */
  legacy?: boolean;
}

/** The fee policy of a relayer's configuration (what the dispatcher signs with, and simulations run at). */
export function feePolicyOf(c: { feeCapGwei: number; minPriorityFeeGwei: number; replacementBumpPercent: number }, legacy: boolean): FeePolicy {
  return { capWei: gweiToWei(c.feeCapGwei), minPriorityWei: gweiToWei(c.minPriorityFeeGwei), bumpPercent: c.replacementBumpPercent, legacy };
}

export function gweiToWei(gwei: number): bigint {
  return BigInt(Math.round(gwei * 1e9));
}

/** x * (100 + percent) / 100, rounded up: what a node's replacement rule compares against. */
export function raise(x: bigint, percent: number): bigint {
  const p = BigInt(Math.round(percent * 100));
  return (x * (10_000n + p) + 9_999n) / 10_000n;
}

const max = (a: bigint, b: bigint) => (a > b ? a : b);
const min = (a: bigint, b: bigint) => (a < b ? a : b);

function median(xs: bigint[]): bigint {
  if (xs.length === 0) return 0n;
  const s = [...xs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return s[Math.floor(s.length / 2)];
}

/**
 * The price of a first attempt from the last blocks' fee history: the median of their median tips,
 * and room for the base fee to double before the transaction is priced out.
 */
export async function marketFees(client: PublicClient, policy: FeePolicy): Promise<Market> {
  if (policy.legacy) return { type: 'legacy', gasPrice: min(await client.getGasPrice(), policy.capWei) };
  const h = await client.getFeeHistory({ blockCount: 10, blockTag: 'latest', rewardPercentiles: [50] });
  const next = h.baseFeePerGas.at(-1);
  if (next == null || h.baseFeePerGas.every((b) => b === 0n)) {
    return { type: 'legacy', gasPrice: min(await client.getGasPrice(), policy.capWei) };
  }
  const tip = max(median((h.reward ?? []).map((r) => r[0] ?? 0n)), policy.minPriorityWei);
  const maxFee = min(next * 2n + tip, policy.capWei);
  return { type: 'eip1559', maxFeePerGas: maxFee, maxPriorityFeePerGas: min(tip, maxFee), nextBaseFee: next, nextBlock: h.oldestBlock + BigInt(h.baseFeePerGas.length - 1) };
}

export type Replacement = { ok: true; fees: Fees } | { ok: false; reason: string };

/**
 * Fees for a replacement at the same nonce: both raised by at least bumpPercent over the last
 * broadcast (rounded up), or the market price if higher; never above the cap.
 */
export function replacementFees(last: Fees, market: Fees, policy: FeePolicy): Replacement {
  if (last.type === 'legacy') {
    const floor = raise(last.gasPrice, policy.bumpPercent);
    if (floor > policy.capWei) return { ok: false, reason: `a replacement needs a gas price of ${floor} wei, above the cap of ${policy.capWei}` };
    const want = market.type === 'legacy' ? market.gasPrice : market.maxFeePerGas;
    return { ok: true, fees: { type: 'legacy', gasPrice: min(max(floor, want), policy.capWei) } };
  }
  const feeFloor = raise(last.maxFeePerGas, policy.bumpPercent);
  const tipFloor = raise(last.maxPriorityFeePerGas, policy.bumpPercent);
  if (feeFloor > policy.capWei) return { ok: false, reason: `a replacement needs a max fee of ${feeFloor} wei per gas, above the cap of ${policy.capWei}` };
  const marketFee = market.type === 'eip1559' ? market.maxFeePerGas : market.gasPrice;
  const marketTip = market.type === 'eip1559' ? market.maxPriorityFeePerGas : 0n;
  const maxFeePerGas = min(max(feeFloor, marketFee), policy.capWei);
  const maxPriorityFeePerGas = max(tipFloor, marketTip);
  if (maxPriorityFeePerGas > maxFeePerGas) return { ok: false, reason: `a replacement needs a priority fee of ${maxPriorityFeePerGas} wei, above its max fee` };
  return { ok: true, fees: { type: 'eip1559', maxFeePerGas, maxPriorityFeePerGas } };
}
