import { parseAbi, type Address, type PublicClient } from 'viem';

/*
 * How a chain charges the sender for a transaction, beyond gasUsed × effectiveGasPrice (docs/relayer-l2.md):
 * - `ethereum`: nothing more (EIP-1559, or a legacy gas price where the node reports no base fee);
 * - `legacy`: the same, always priced with a legacy gas price;
 * - `opStack`: an L1 data fee, charged from the sender's balance on top of the gas, read from the
 *   GasPriceOracle predeploy before signing (its upper bound for the transaction's size) and from the
 *   receipt's `l1Fee` after inclusion;
 * - `arbitrum`: the L1 component is gas inside the limit: eth_estimateGas counts it, a trial eth_call
 *   does not, so the gas limit is sized by the node's estimate.
 */
export type FeeModelName = 'ethereum' | 'legacy' | 'opStack' | 'arbitrum';

/** Chains known to run the OP stack's fee model (mainnets and their testnets). */
const OP_STACK_CHAINS = new Set([10, 420, 11155420, 8453, 84532, 7777777, 999999999, 34443, 919, 252, 1135, 4202, 480, 4801, 130, 1301, 57073, 763373]);
/** Arbitrum One, Nova, Sepolia. */
const ARBITRUM_CHAINS = new Set([42161, 42170, 421614]);

/** The configured model, else the one the chain id is known by, else `ethereum`. */
export function feeModelFor(chainId: number, configured?: FeeModelName): FeeModelName {
  if (configured) return configured;
  if (OP_STACK_CHAINS.has(chainId)) return 'opStack';
  if (ARBITRUM_CHAINS.has(chainId)) return 'arbitrum';
  return 'ethereum';
}

export const GAS_PRICE_ORACLE: Address = '0x420000000000000000000000000000000000000F';
export const gasPriceOracleAbi = parseAbi(['function getL1Fee(bytes _data) view returns (uint256)', 'function getL1FeeUpperBound(uint256 _unsignedTxSize) view returns (uint256)']);

/**
 * The unsigned size of the transaction that will carry `dataBytes` of calldata: the calldata and room for
 * every other field at its largest (nonce, fees, gas, to, value, chain id, list headers: under 100 bytes),
 * and an EIP-7702 authorization (under 120) when one is carried. Over-counting only raises the bound.
 */
export function unsignedTxSize(dataBytes: number, withAuthorization = false): number {
  return dataBytes + 100 + (withAuthorization ? 120 : 0);
}

/** Bytes of a 0x-prefixed hex string. */
export const hexBytes = (hex: string) => Math.max(0, (hex.length - 2) / 2);

/** The most the L1 data fee of a transaction of `size` unsigned bytes can be now, in wei (the oracle's bound). */
export function l1FeeUpperBound(client: PublicClient, size: number): Promise<bigint> {
  return client.readContract({ address: GAS_PRICE_ORACLE, abi: gasPriceOracleAbi, functionName: 'getL1FeeUpperBound', args: [BigInt(size)] });
}

/** The L1 data fee a receipt says the sender paid (OP stack: `l1Fee`), 0 when it carries none. */
export function receiptL1Fee(receipt: { l1Fee?: string | null }): bigint {
  return receipt.l1Fee ? BigInt(receipt.l1Fee) : 0n;
}
