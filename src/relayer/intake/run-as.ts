import type { Address, BlockOverrides, StateOverride } from 'viem';

/*
 * Simulations run like the transaction that will be mined, so a contract cannot tell the two apart by what
 * the relayer chose: the fee fields the dispatcher signs its first attempt with (so GASPRICE is the price
 * the mined run pays, never a multiple of it), a real sender of this relayer with its real balance, and,
 * where the node takes block overrides, the next block's base fee and number. What cannot be hidden is in
 * docs/relayer-worst-case.md ("What a simulation cannot hide").
 */

/** The fee fields of the transaction: EIP-1559's, or a legacy gas price on a chain priced so. */
export type RunFees = { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } | { gasPrice: bigint };

export interface RunAs {
  /** The sender a simulation with no sender of its own runs from (FeeOptions, Simulate): a real one of this relayer. */
  sender: Address;
  fees: RunFees;
  /**
   * The next block, as block overrides: its base fee (from the fee history) and number. Undefined where the
   * node refuses block overrides (then the latest block's are what a simulation sees).
   */
  next?: { number: bigint; baseFeePerGas?: bigint };
  /** A sender's own balance at the block the fees were read for. */
  balanceOf(sender: Address): Promise<bigint>;
  /** Told when a sender cannot afford the gas a simulation is given and is lent exactly enough by state override. */
  onFunded?(sender: Address, has: bigint, need: bigint): void;
}

/** The most per gas the transaction may pay: what a node checks the sender's balance against (gas × this). */
export const feeCapOf = (fees: RunFees): bigint => ('gasPrice' in fees ? fees.gasPrice : fees.maxFeePerGas);

/**
 * The sender's balance override for a run given `gas`: none when its own balance buys that gas at the fee
 * cap (a node refuses the call otherwise), else exactly that much — the only case a simulation's sender
 * balance is not the real one, and said so through onFunded.
 */
export async function fundingFor(runAs: RunAs, sender: Address, gas: bigint): Promise<StateOverride> {
  const need = gas * feeCapOf(runAs.fees);
  const has = await runAs.balanceOf(sender);
  if (has >= need) return [];
  runAs.onFunded?.(sender, has, need);
  return [{ address: sender, balance: need }];
}

/**
 * The block overrides of a run: the next block's base fee, and its number when the run is pinned to a block
 * (`pinned`: the number is then pinned + 1, taken back off what the run reports). A run at "latest" keeps
 * the node's own number: it is how the relayer learns which block a run met (a node behind is run again).
 */
export function blockOverridesFor(runAs: RunAs, pinned?: bigint): BlockOverrides | undefined {
  const next = runAs.next;
  if (!next) return undefined;
  const out: BlockOverrides = {};
  if (next.baseFeePerGas !== undefined) out.baseFeePerGas = next.baseFeePerGas;
  if (pinned !== undefined) out.number = pinned + 1n;
  return Object.keys(out).length ? out : undefined;
}

/** The block overrides of a run whose block number tells nothing to the relayer (FeeOptions, Simulate): the next block's. */
export function nextBlockOverrides(runAs: RunAs): BlockOverrides | undefined {
  const next = runAs.next;
  if (!next) return undefined;
  return { number: next.number, ...(next.baseFeePerGas !== undefined ? { baseFeePerGas: next.baseFeePerGas } : {}) };
}
