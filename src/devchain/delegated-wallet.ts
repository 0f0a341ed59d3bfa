// The EIP-7702 wallet implementation (contracts/DelegatedWallet.sol) on a dev anvil, at a fixed address:
// deployed with CREATE2 (salt 0) through anvil's built-in deterministic deployer, so every dev chain
// built from the same sources has it at the same address, and deploying twice is a no-op.

import { concat, createPublicClient, getContractAddress, http, pad, toHex, type Address, type Hex } from 'viem';
import type { Artifacts } from './compile.ts';
import { ANVIL_CREATE2_DEPLOYER } from './sequence.ts';

const DEPLOYER: Address = '0x5e0c0de7000000000000000000000000000de711';
const SALT = pad('0x00', { size: 32 });

export function delegatedWalletAddress(artifacts: Artifacts): Address {
  const a = artifacts.DelegatedWallet;
  if (!a) throw new Error('artifact DelegatedWallet missing; is contracts/DelegatedWallet.sol present?');
  return getContractAddress({ opcode: 'CREATE2', from: ANVIL_CREATE2_DEPLOYER, salt: SALT, bytecode: a.bytecode });
}

/** Deploys DelegatedWallet if it is not there yet; returns its address. */
export async function deployDelegatedWallet(rpcUrl: string, artifacts: Artifacts): Promise<Address> {
  const address = delegatedWalletAddress(artifacts);
  const client = createPublicClient({ transport: http(rpcUrl), pollingInterval: 50, cacheTime: 0 });
  if (((await client.getCode({ address }))?.length ?? 0) > 2) return address;
  await client.request({ method: 'anvil_impersonateAccount' as never, params: [DEPLOYER] as never });
  await client.request({ method: 'anvil_setBalance' as never, params: [DEPLOYER, toHex(10n ** 20n)] as never });
  const hash = (await client.request({
    method: 'eth_sendTransaction' as never,
    params: [{ from: DEPLOYER, to: ANVIL_CREATE2_DEPLOYER, data: concat([SALT, artifacts.DelegatedWallet!.bytecode]), gas: toHex(3_000_000) }] as never,
  })) as Hex;
  await client.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 });
  const code = await client.getCode({ address });
  if (!code || code === '0x') throw new Error(`DelegatedWallet deployment failed on ${rpcUrl}: no code at ${address} (transaction ${hash})`);
  return address;
}
