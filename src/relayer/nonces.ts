import { decodeFunctionResult, encodeFunctionData, type Address, type PublicClient } from 'viem';
import { walletAbi } from './abi.ts';

/** Each wallet's current nonce in a space; a wallet not deployed yet is at 0. Issued together, so one batch. */
export async function readNonces(client: PublicClient, items: { wallet: Address; space: bigint }[]): Promise<bigint[]> {
  return Promise.all(
    items.map(async ({ wallet, space }) => {
      const r = await client.call({ to: wallet, data: encodeFunctionData({ abi: walletAbi, functionName: 'readNonce', args: [space] }) });
      if (!r.data || r.data === '0x') return 0n;
      return decodeFunctionResult({ abi: walletAbi, functionName: 'readNonce', data: r.data });
    }),
  );
}
