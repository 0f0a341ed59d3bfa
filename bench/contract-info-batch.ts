/**
 * GetContractInfoBatch of 100 cold contracts: chain round trips and wall time, against the naive
 * approach (one eth_call per field and one eth_getCode per contract) in the same run.
 * Usage: npx tsx bench/contract-info-batch.ts   (BENCH_CONTRACTS=100)
 */
import { encodeFunctionData, parseAbi, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { createChainClient } from '../src/chain/client.ts';
import { parseConfig } from '../src/config/load.ts';
import { ANVIL_DEPLOYER_KEY, compileContracts, devPublicClient, devWalletClient, installMulticall3, startAnvil } from '../src/devchain/index.ts';
import { createServices } from '../src/services.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { createMetrics } from '../src/telemetry/metrics.ts';
import { benchDb, log } from './support.ts';

const N = Number(process.env.BENCH_CONTRACTS ?? 100);
const anvil = await startAnvil({ blockTime: null });
const { db, location, drop } = await benchDb('pglite');
try {
  const artifacts = await compileContracts({ cacheDir: 'node_modules/.cache/metarelay/solc' });
  await installMulticall3(anvil.rpcUrl, artifacts.Multicall3.deployedBytecode);
  const account = privateKeyToAccount(ANVIL_DEPLOYER_KEY);
  const wallet = devWalletClient(anvil.rpcUrl, anvil.chainId, account);
  const pub = devPublicClient(anvil.rpcUrl, anvil.chainId);
  log(`deploying ${N} ERC20 contracts…`);
  let nonce = await pub.getTransactionCount({ address: account.address });
  const hashes: Hex[] = [];
  for (let i = 0; i < N; i++) {
    hashes.push(await wallet.deployContract({ abi: artifacts.DevERC20.abi, bytecode: artifacts.DevERC20.bytecode, args: [`Bench Token ${i}`, `BT${i}`], nonce: nonce++ }));
  }
  const addresses = (await Promise.all(hashes.map((hash) => pub.waitForTransactionReceipt({ hash })))).map((r) => r.contractAddress!.toLowerCase() as Address);

  const chainCfg = { chainId: anvil.chainId, name: 'anvil', rpcUrls: [anvil.rpcUrl] };
  const config = parseConfig({ database: location, chains: [chainCfg], logLevel: 'silent', allowPrivateNetworks: true });
  const s = await createServices(config, { db, log: createLogger('silent') });
  const chain = s.chains.get(anvil.chainId)!;
  const before = await s.metrics.chainRpcRequests.get();
  const t0 = performance.now();
  const { infos } = await s.contracts.get(chain, addresses, { waitMs: 60_000 });
  const metarelayMs = performance.now() - t0;
  const after = await s.metrics.chainRpcRequests.get();
  const calls = await s.metrics.chainRpcCalls.get();
  const roundTrips = (after.values[0]?.value ?? 0) - (before.values[0]?.value ?? 0);
  const allErc20 = [...infos.values()].every((i) => i.type === 'ERC20' && i.decimals === 6);
  await s.close();

  // Naive: each field its own eth_call, plus eth_getCode, 8 contracts at a time.
  const naiveMetrics = createMetrics();
  const naive = createChainClient({ ...chainCfg, rpcBatchSize: 1 }, { metrics: naiveMetrics });
  const abi = parseAbi([
    'function name() view returns (string)',
    'function symbol() view returns (string)',
    'function decimals() view returns (uint8)',
    'function totalSupply() view returns (uint256)',
    'function supportsInterface(bytes4) view returns (bool)',
    'function contractURI() view returns (string)',
    'function balanceOf(address) view returns (uint256)',
  ]);
  const fields: Hex[] = [
    encodeFunctionData({ abi, functionName: 'name' }),
    encodeFunctionData({ abi, functionName: 'symbol' }),
    encodeFunctionData({ abi, functionName: 'decimals' }),
    encodeFunctionData({ abi, functionName: 'totalSupply' }),
    encodeFunctionData({ abi, functionName: 'supportsInterface', args: ['0x80ac58cd'] }),
    encodeFunctionData({ abi, functionName: 'supportsInterface', args: ['0xd9b67a26'] }),
    encodeFunctionData({ abi, functionName: 'contractURI' }),
    encodeFunctionData({ abi, functionName: 'balanceOf', args: ['0x000000000000000000000000000000000000dEaD'] }),
  ];
  const t1 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < addresses.length) {
        const a = addresses[next++];
        await naive.public.getCode({ address: a });
        for (const data of fields) await naive.public.call({ to: a, data }).catch(() => undefined);
      }
    }),
  );
  const naiveMs = performance.now() - t1;
  const naiveTrips = (await naiveMetrics.chainRpcRequests.get()).values[0]?.value ?? 0;

  console.log(
    JSON.stringify(
      {
        contracts: N,
        metarelay: { roundTrips, jsonRpcCalls: Object.fromEntries(calls.values.map((v) => [v.labels.method, v.value])), wallMs: Math.round(metarelayMs), allDecodedAsErc20: allErc20 },
        naive: { roundTrips: naiveTrips, wallMs: Math.round(naiveMs) },
        speedup: Math.round((naiveMs / metarelayMs) * 10) / 10,
      },
      null,
      2,
    ),
  );
} finally {
  await drop();
  await anvil.stop();
}
