import { encodeFunctionData, parseAbi, type Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChainClient } from '../src/chain/client.ts';
import { MULTICALL3_ADDRESS, multicall } from '../src/chain/multicall.ts';
import { ANVIL_DEPLOYER_KEY, compileContracts, devPublicClient, devWalletClient, installMulticall3, startAnvil, type AnvilHandle, type Artifacts } from '../src/devchain/index.ts';
import { createMetrics } from '../src/telemetry/metrics.ts';

const abi = parseAbi(['function tokenURI(uint256) view returns (string)', 'function setTokenURI(uint256,string)']);
const CACHE = 'node_modules/.cache/metarelay/solc';

async function deployWithUris(anvil: AnvilHandle, artifacts: Artifacts, count: number): Promise<Address> {
  const wallet = devWalletClient(anvil.rpcUrl, anvil.chainId, privateKeyToAccount(ANVIL_DEPLOYER_KEY));
  const pub = devPublicClient(anvil.rpcUrl, anvil.chainId);
  const hash = await wallet.deployContract({ abi: artifacts.TestTokenURI.abi, bytecode: artifacts.TestTokenURI.bytecode });
  const address = (await pub.waitForTransactionReceipt({ hash })).contractAddress!;
  let last: `0x${string}` | undefined;
  for (let id = 1; id <= count; id++) {
    last = await wallet.writeContract({ address, abi, functionName: 'setTokenURI', args: [BigInt(id), `https://example.test/${id}-${'x'.repeat(200)}`], chain: null });
  }
  // Automine answers a send before its block is made: a read at once could miss the last URIs (a loaded
  // machine read id 3 as never set). Same sender, consecutive nonces: the last one mined means all were.
  if (last) await pub.waitForTransactionReceipt({ hash: last });
  return address;
}

const uriCalls = (target: Address, ids: number[]) => ids.map((id) => ({ target, data: encodeFunctionData({ abi, functionName: 'tokenURI', args: [BigInt(id)] }) }));

let artifacts: Artifacts;
beforeAll(async () => {
  artifacts = await compileContracts({ cacheDir: CACHE });
});

describe('multicall', () => {
  let anvil: AnvilHandle;
  afterAll(() => anvil?.stop());

  it('reads many calls in one round trip, with per-call failures', async () => {
    anvil = await startAnvil({ blockTime: null });
    await installMulticall3(anvil.rpcUrl, artifacts.Multicall3.deployedBytecode);
    const target = await deployWithUris(anvil, artifacts, 3);
    const metrics = createMetrics();
    const chain = createChainClient({ chainId: anvil.chainId, name: 'anvil', rpcUrls: [anvil.rpcUrl], rpcBatchSize: 200 }, { metrics });
    const res = await multicall(chain, uriCalls(target, [1, 2, 3, 4]));
    expect(res.map((r) => r.ok)).toEqual([true, true, true, false]); // id 4 was never set: it reverts
    expect((await metrics.chainRpcRequests.get()).values[0].value).toBe(1);
  });

  it('splits a batch the node refuses (gas cap) and still answers every call', async () => {
    // A 1.5M gas cap: 150 cold tokenURI reads of long strings cannot share one eth_call.
    const small = await startAnvil({ blockTime: null, args: ['--gas-limit', '1500000'] });
    try {
      await installMulticall3(small.rpcUrl, artifacts.Multicall3.deployedBytecode);
      const target = await deployWithUris(small, artifacts, 150);
      const metrics = createMetrics();
      const chain = createChainClient({ chainId: small.chainId, name: 'anvil', rpcUrls: [small.rpcUrl], rpcBatchSize: 1 }, { metrics });
      const res = await multicall(
        chain,
        uriCalls(
          target,
          Array.from({ length: 150 }, (_, i) => i + 1),
        ),
        { chunkSize: 150 },
      );
      expect(res).toHaveLength(150);
      expect(res.every((r) => r.ok)).toBe(true);
      const trips = (await metrics.chainRpcRequests.get()).values[0].value;
      expect(trips).toBeGreaterThan(1); // it had to split
      expect(trips).toBeLessThan(150); // but did not fall to one call per read
    } finally {
      await small.stop();
    }
  });

  it('falls back to single calls on a chain without Multicall3, and remembers it', async () => {
    const bare = await startAnvil({ blockTime: null });
    try {
      const code = await devPublicClient(bare.rpcUrl, bare.chainId).getCode({ address: MULTICALL3_ADDRESS });
      expect(code ?? '0x').toBe('0x');
      const target = await deployWithUris(bare, artifacts, 2);
      const metrics = createMetrics();
      const chain = createChainClient({ chainId: bare.chainId, name: 'bare', rpcUrls: [bare.rpcUrl], rpcBatchSize: 1 }, { metrics });
      const res = await multicall(chain, uriCalls(target, [1, 2, 3]));
      expect(res.map((r) => r.ok)).toEqual([true, true, false]);
      const calls = async () => Object.fromEntries((await metrics.chainRpcCalls.get()).values.map((v) => [v.labels.method, v.value]));
      expect((await calls()).eth_call).toBe(4); // one aggregate3 that came back empty, then three singles
      await multicall(chain, uriCalls(target, [1]));
      expect((await calls()).eth_call).toBe(5); // no second aggregate3 attempt
    } finally {
      await bare.stop();
    }
  });
});
