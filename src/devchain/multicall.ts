import { decodeFunctionResult, encodeFunctionData, parseAbi, type Hex } from 'viem';
import { MULTICALL3_ADDRESS } from '../chain/multicall.ts';
import { rpcCall } from './rpc.ts';

export { MULTICALL3_ADDRESS };

const probeAbi = parseAbi([
  'struct Call3 { address target; bool allowFailure; bytes callData; }',
  'struct Result { bool success; bytes returnData; }',
  'function aggregate3(Call3[] calls) payable returns (Result[] returnData)',
  'function getChainId() view returns (uint256)',
]);

/**
 * Puts Multicall3's runtime code at the canonical address (anvil has none by default), then proves it
 * works with an aggregate3 round trip that must echo the node's chain id.
 */
export async function installMulticall3(rpcUrl: string, deployedBytecode: Hex): Promise<void> {
  await rpcCall(rpcUrl, 'anvil_setCode', [MULTICALL3_ADDRESS, deployedBytecode]);

  const data = encodeFunctionData({
    abi: probeAbi,
    functionName: 'aggregate3',
    args: [[{ target: MULTICALL3_ADDRESS, allowFailure: false, callData: encodeFunctionData({ abi: probeAbi, functionName: 'getChainId' }) }]],
  });
  const [raw, chainIdHex] = await Promise.all([rpcCall<Hex>(rpcUrl, 'eth_call', [{ to: MULTICALL3_ADDRESS, data }, 'latest']), rpcCall<Hex>(rpcUrl, 'eth_chainId')]);
  const [result] = decodeFunctionResult({ abi: probeAbi, functionName: 'aggregate3', data: raw });
  const echoed = result?.success ? decodeFunctionResult({ abi: probeAbi, functionName: 'getChainId', data: result.returnData }) : undefined;
  if (echoed !== BigInt(chainIdHex)) {
    throw new Error(`Multicall3 at ${MULTICALL3_ADDRESS} failed verification: aggregate3(getChainId) returned ${raw}`);
  }
}
