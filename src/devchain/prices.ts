// Real price feeds on a dev anvil: Chainlink's MockV3Aggregator (compiled from @chainlink/contracts) for
// native/USD and a token/USD, and a Uniswap v3 pool (the factory from @uniswap/v3-core's artifacts) of the
// token and a wrapped native token, with full-range liquidity and room for observations.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { encodeAbiParameters, encodeDeployData, encodeFunctionData, getContractAddress, keccak256, parseAbi, type Abi, type Address, type Hash, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { Artifacts } from './compile.ts';
import { REPO_ROOT } from './compile.ts';
import { devPublicClient, devWalletClient } from './clients.ts';

/** anvil's well-known account 8: deploys and moves the dev price feeds (never use it on a real network). */
export const PRICE_ADMIN_KEY: Hex = '0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97';

export const POOL_FEE = 3000;
/** Full range for a 0.3 % pool (tick spacing 60). */
export const FULL_RANGE = { lower: -887220, upper: 887220 } as const;

export const aggregatorAdminAbi = parseAbi([
  'function updateAnswer(int256 answer)',
  'function updateRoundData(uint80 roundId, int256 answer, uint256 timestamp, uint256 startedAt)',
  'function latestRound() view returns (uint256)',
]);
export const poolAdminAbi = parseAbi([
  'function initialize(uint160 sqrtPriceX96)',
  'function increaseObservationCardinalityNext(uint16 observationCardinalityNext)',
  'function slot0() view returns (uint160 sqrtPriceX96, int24 tick, uint16 observationIndex, uint16 observationCardinality, uint16 observationCardinalityNext, uint8 feeProtocol, bool unlocked)',
]);
const factoryAbi = parseAbi(['function createPool(address tokenA, address tokenB, uint24 fee) returns (address pool)']);

interface HardhatArtifact {
  abi: Abi;
  bytecode: Hex;
}

function uniswapArtifact(name: 'UniswapV3Factory' | 'UniswapV3Pool'): HardhatArtifact {
  const require = createRequire(path.join(REPO_ROOT, 'package.json'));
  return JSON.parse(readFileSync(require.resolve(`@uniswap/v3-core/artifacts/contracts/${name}.sol/${name}.json`), 'utf8')) as HardhatArtifact;
}

function isqrt(n: bigint): bigint {
  if (n < 2n) return n;
  let x = BigInt(Math.floor(Math.sqrt(Number(n))));
  for (;;) {
    const y = (x + n / x) >> 1n;
    if (y >= x && x * x <= n && (x + 1n) * (x + 1n) > n) return x;
    x = y;
  }
}

/**
 * The pool's sqrtPriceX96 for `nativePerToken` (num/den native per whole token) between a token of
 * `decimals` and an 18-decimal wrapped native, whichever of them sorts first.
 */
export function sqrtPriceX96For(token: Address, wrapped: Address, decimals: number, nativePerToken: { num: bigint; den: bigint }): bigint {
  const tokenFirst = token.toLowerCase() < wrapped.toLowerCase();
  // wei per token base unit = nativePerToken × 10^18 / 10^decimals.
  let num = nativePerToken.num * 10n ** 18n;
  let den = nativePerToken.den * 10n ** BigInt(decimals);
  if (!tokenFirst) [num, den] = [den, num];
  return isqrt((num << 192n) / den);
}

/** The pool address the factory gives (token, wrapped, fee): CREATE2 over the pool's init code. */
export function poolAddress(factory: Address, a: Address, b: Address, fee = POOL_FEE): Address {
  const [t0, t1] = a.toLowerCase() < b.toLowerCase() ? [a, b] : [b, a];
  const salt = keccak256(encodeAbiParameters([{ type: 'address' }, { type: 'address' }, { type: 'uint24' }], [t0, t1, fee]));
  return getContractAddress({ opcode: 'CREATE2', from: factory, salt, bytecodeHash: keccak256(uniswapArtifact('UniswapV3Pool').bytecode) });
}

export interface DevPriceFeeds {
  /** ETH/USD, 8 decimals. */
  nativeUsd: Address;
  /** token/USD, 8 decimals. */
  tokenUsd: Address;
  wrappedNative: Address;
  factory: Address;
  pool: Address;
  helper: Address;
  admin: Address;
}

export interface DeployPriceFeedsOptions {
  rpcUrl: string;
  chainId: number;
  artifacts: Artifacts;
  /** The fee token the feeds and the pool price. */
  token: Address;
  tokenDecimals: number;
  /** Dollars per native and per token (8-decimal feed answers): default $2 000 and $1. */
  nativeUsd?: bigint;
  tokenUsd?: bigint;
  /** Observations the pool keeps (each ~20 k gas to make room for). */
  cardinality?: number;
  adminKey?: Hex;
  log?: (msg: string) => void;
}

/** Deploys the feeds and the pool in one go (explicit nonces, receipts awaited together). */
export async function deployPriceFeeds(opts: DeployPriceFeedsOptions): Promise<DevPriceFeeds> {
  const started = Date.now();
  const account = privateKeyToAccount(opts.adminKey ?? PRICE_ADMIN_KEY);
  const pub = devPublicClient(opts.rpcUrl, opts.chainId);
  const wallet = devWalletClient(opts.rpcUrl, opts.chainId, account);
  const nativeUsd = opts.nativeUsd ?? 2_000n * 10n ** 8n;
  const tokenUsd = opts.tokenUsd ?? 10n ** 8n;
  const art = (name: string) => {
    const a = opts.artifacts[name];
    if (!a) throw new Error(`artifact ${name} missing; is contracts/${name === 'DevAggregator' ? 'DevPriceFeeds' : 'DevUniswapV3'}.sol present?`);
    return a;
  };
  const factoryArt = uniswapArtifact('UniswapV3Factory');
  const [startNonce, fees] = await Promise.all([pub.getTransactionCount({ address: account.address, blockTag: 'pending' }), pub.estimateFeesPerGas()]);
  let nonce = startNonce;
  const feeFields = { maxFeePerGas: fees.maxFeePerGas * 2n, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };
  const sent: Array<{ what: string; hash: Hash }> = [];
  const deploy = async (what: string, data: Hex, gas: bigint) => {
    const address = getContractAddress({ from: account.address, nonce: BigInt(nonce) });
    sent.push({ what, hash: await wallet.sendTransaction({ data, gas, nonce: nonce++, ...feeFields }) });
    return address;
  };
  const call = async (what: string, to: Address, data: Hex, gas: bigint) => {
    sent.push({ what, hash: await wallet.sendTransaction({ to, data, gas, nonce: nonce++, ...feeFields }) });
  };

  const agg = art('DevAggregator');
  const nativeFeed = await deploy('ETH/USD feed', encodeDeployData({ abi: agg.abi, bytecode: agg.bytecode, args: [8, nativeUsd] }), 1_500_000n);
  const tokenFeed = await deploy('token/USD feed', encodeDeployData({ abi: agg.abi, bytecode: agg.bytecode, args: [8, tokenUsd] }), 1_500_000n);
  const weth = await deploy('DevWrappedNative', art('DevWrappedNative').bytecode, 2_000_000n);
  const helper = await deploy('DevUniswapV3Helper', art('DevUniswapV3Helper').bytecode, 1_000_000n);
  const factory = await deploy('UniswapV3Factory', factoryArt.bytecode, 7_000_000n);
  const pool = poolAddress(factory, opts.token, weth);
  await call('createPool', factory, encodeFunctionData({ abi: factoryAbi, functionName: 'createPool', args: [opts.token, weth, POOL_FEE] }), 6_000_000n);
  const price = { num: tokenUsd, den: nativeUsd };
  await call('initialize', pool, encodeFunctionData({ abi: poolAdminAbi, functionName: 'initialize', args: [sqrtPriceX96For(opts.token, weth, opts.tokenDecimals, price)] }), 300_000n);
  const cardinality = opts.cardinality ?? 32;
  await call(
    'increaseObservationCardinalityNext',
    pool,
    encodeFunctionData({ abi: poolAdminAbi, functionName: 'increaseObservationCardinalityNext', args: [cardinality] }),
    BigInt(60_000 + cardinality * 26_000),
  );
  // Full-range liquidity worth about 1 000 000 tokens: L = sqrt(token base units × wei) at the price.
  const tokenUnits = 1_000_000n * 10n ** BigInt(opts.tokenDecimals);
  const wei = (1_000_000n * 10n ** 18n * tokenUsd) / nativeUsd;
  const liquidity = isqrt(tokenUnits * wei);
  const helperArt = art('DevUniswapV3Helper');
  await call('add liquidity', helper, encodeFunctionData({ abi: helperArt.abi, functionName: 'mint', args: [pool, FULL_RANGE.lower, FULL_RANGE.upper, liquidity] }), 1_000_000n);

  const receipts = await Promise.all(sent.map(({ hash }) => pub.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 60_000 })));
  const failed = receipts.flatMap((r, i) => (r.status === 'success' ? [] : [`${sent[i]!.what} (${r.transactionHash})`]));
  if (failed.length > 0) throw new Error(`price feed deployment reverted: ${failed.join('; ')}`);
  opts.log?.(`deployed price feeds in ${Date.now() - started} ms: ETH/USD ${nativeFeed}, token/USD ${tokenFeed}, Uniswap v3 pool ${pool}`);
  return { nativeUsd: nativeFeed, tokenUsd: tokenFeed, wrappedNative: weth, factory, pool, helper, admin: account.address };
}
