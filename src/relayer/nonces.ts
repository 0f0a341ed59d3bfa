import { decodeFunctionResult, encodeFunctionData, zeroAddress, type Address, type Hex, type PublicClient } from 'viem';
import { probeAbi } from './abi.ts';
import { probeAddress } from './intake/simulate.ts';
import { RELAY_PROBE_CODE } from './intake/probe-code.ts';

/**
 * Each wallet's current nonce in a space; a wallet not deployed yet is at 0. All of them in ONE eth_call
 * (the probe, placed by state override, reads them with no bundle to run), however many there are.
 */
export async function readNonces(client: PublicClient, items: { wallet: Address; space: bigint }[]): Promise<bigint[]> {
  if (items.length === 0) return [];
  const probe = probeAddress();
  const data = encodeFunctionData({ abi: probeAbi, functionName: 'probeMany', args: [[], zeroAddress, [], items.map((x) => x.wallet), items.map((x) => x.space), 0n] });
  const r = await client.call({ to: probe, data, stateOverride: [{ address: probe, code: RELAY_PROBE_CODE as Hex }] });
  const [, nonces] = decodeFunctionResult({ abi: probeAbi, functionName: 'probeMany', data: r.data ?? '0x' });
  return [...nonces];
}
