import type { Address, Hex, PublicClient } from 'viem';
import type { RelayerChainConfig } from '../config.ts';
import { ceilMul } from '../intake/fees.ts';
import type { MetaTxnRow } from '../store.ts';

/*
 * Arbitrum charges the L1 cost of a transaction's data as gas inside its limit (docs/relayer-l2.md): the
 * node's eth_estimateGas counts it, and a transaction whose limit is below it is refused ("intrinsic gas
 * too low"). That component moves with the L1 price, so a limit sized at intake can fall short by the
 * time it is sent. Raising it is safe only within what the bundle was priced and held for: its cover
 * (the fee's worth, or the sponsor's hold, in wei) at the gas price it was priced at.
 */

export type Resize = { ok: true; gasLimit: bigint } | { ok: false; reason: string };

/** The gas limit the node's estimate asks for now (with the margin), if the bundle's cover still pays for it. */
export function resizeWithinCover(row: Pick<MetaTxnRow, 'gas_limit' | 'cover_wei' | 'gas_price_priced'>, estimate: bigint, margin: number, maxGasLimit: number): Resize {
  const gasLimit = ceilMul(estimate, margin);
  if (gasLimit <= BigInt(row.gas_limit)) return { ok: true, gasLimit: BigInt(row.gas_limit) };
  const why = `the chain now asks ${estimate} gas for it (its L1 component rose), more than the gas limit of ${row.gas_limit} it was accepted with`;
  if (gasLimit > BigInt(maxGasLimit)) return { ok: false, reason: `${why}, over this relayer's limit of ${maxGasLimit}` };
  // Without a recorded cover (a gasless chain, or a row from before covers were kept) the operator pays anyway.
  if (row.cover_wei == null || row.gas_price_priced == null) return { ok: true, gasLimit };
  const cost = gasLimit * BigInt(row.gas_price_priced);
  if (cost > BigInt(row.cover_wei)) {
    return { ok: false, reason: `${why}, and its fee or sponsorship (${row.cover_wei} wei) no longer covers ${gasLimit} gas at the price it was priced at; send it again to have it priced anew` };
  }
  return { ok: true, gasLimit };
}

/** After an "intrinsic gas too low": the node's estimate of the same call now, and whether its cover pays for it. */
export async function resizeAfterRefusal(
  client: PublicClient,
  sender: Address,
  unit: { metas: MetaTxnRow[]; to: Address; data: Hex },
  config: Pick<RelayerChainConfig, 'gasMargin' | 'maxGasLimit'>,
): Promise<Resize> {
  const row = unit.metas[0];
  const estimate = await client.estimateGas({ account: sender, to: unit.to, data: unit.data }).catch(() => null);
  // No estimate (a node hiccup): sent again as it was, within the usual attempts.
  if (estimate == null) return { ok: true, gasLimit: BigInt(row.gas_limit) };
  return resizeWithinCover(row, estimate, config.gasMargin, config.maxGasLimit);
}
