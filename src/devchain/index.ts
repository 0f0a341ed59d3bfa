import { startAnvil, type AnvilHandle } from './anvil.ts';
import { compileContracts, type Artifacts } from './compile.ts';
import { seedOriginDocuments, type DevTokens } from './documents.ts';
import { installMulticall3 } from './multicall.ts';
import { startOriginServer, type OriginServer } from './origin.ts';
import { deploySamples, DEV_TOKENS, type DevContracts } from './samples.ts';
import { deploySequenceV2Context } from './sequence.ts';

export { findAnvilBinary, startAnvil, type AnvilHandle, type StartAnvilOptions } from './anvil.ts';
export { compileContracts, REPO_ROOT, CONTRACTS_DIR, type Artifact, type Artifacts } from './compile.ts';
export { installMulticall3, MULTICALL3_ADDRESS } from './multicall.ts';
export { startOriginServer, type OriginServer, type DocumentOptions } from './origin.ts';
export { deploySamples, ANVIL_DEPLOYER_KEY, DEV_TOKENS, type DevContracts, type DevManifestChainPart } from './samples.ts';
export * from './documents.ts';
export { devChainDefinition, devPublicClient, devWalletClient } from './clients.ts';
export { rpcCall, RpcError } from './rpc.ts';
export * from './sequence.ts';
export { deployDelegatedWallet, delegatedWalletAddress } from './delegated-wallet.ts';

export interface DevManifest {
  chain: { chainId: number; name: 'anvil'; rpcUrl: string };
  /** The Sequence v2 wallet contracts, at their production addresses. */
  sequenceContext: Record<'factory' | 'mainModule' | 'mainModuleUpgradable' | 'guestModule' | 'utils', string>;
  contracts: DevContracts;
  tokens: DevTokens;
  deployer: `0x${string}`;
}

export interface DevChain {
  anvil: AnvilHandle;
  origin: OriginServer;
  artifacts: Artifacts;
  manifest: DevManifest;
  stop(): Promise<void>;
}

export interface StartDevChainOptions {
  cacheDir: string;
  originPort?: number;
  originHost?: string;
  anvilBinary?: string;
  chainId?: number;
  /** See StartAnvilOptions.blockTime; default 1 s. */
  blockTime?: number | null;
  log?: (msg: string) => void;
}

/**
 * Starts anvil, the metadata origin and the contract compile concurrently, then seeds the origin,
 * installs Multicall3 and deploys the sample contracts.
 */
export async function startDevChain(opts: StartDevChainOptions): Promise<DevChain> {
  const started = Date.now();
  const log = opts.log;
  const [anvilR, originR, artifactsR] = await Promise.allSettled([
    startAnvil({ binary: opts.anvilBinary, chainId: opts.chainId, blockTime: opts.blockTime, log }),
    startOriginServer({ port: opts.originPort, host: opts.originHost }),
    compileContracts({ cacheDir: opts.cacheDir, log }),
  ]);
  const anvil = anvilR.status === 'fulfilled' ? anvilR.value : undefined;
  const origin = originR.status === 'fulfilled' ? originR.value : undefined;
  const stop = async () => {
    await Promise.all([anvil?.stop(), origin?.stop()]);
  };

  try {
    for (const r of [anvilR, originR, artifactsR]) if (r.status === 'rejected') throw r.reason;
    const artifacts = (artifactsR as PromiseFulfilledResult<Artifacts>).value;
    const a = anvil!;
    const o = origin!;
    const multicall = artifacts.Multicall3;
    if (!multicall) throw new Error('Multicall3 artifact missing; is contracts/Multicall3.sol present?');
    // Documents go up before their URIs reach the chain, so no reader ever sees a 404 for them.
    seedOriginDocuments(o, DEV_TOKENS);
    await installMulticall3(a.rpcUrl, multicall.deployedBytecode);
    const [part, sequence] = await Promise.all([deploySamples({ rpcUrl: a.rpcUrl, chainId: a.chainId, originUrl: o.url, artifacts, log }), deploySequenceV2Context(a.rpcUrl)]);
    log?.(`dev chain ready in ${Date.now() - started} ms (rpc ${a.rpcUrl}, origin ${o.url})`);
    return {
      anvil: a,
      origin: o,
      artifacts,
      manifest: {
        chain: { chainId: a.chainId, name: 'anvil', rpcUrl: a.rpcUrl },
        sequenceContext: {
          factory: sequence.factory,
          mainModule: sequence.mainModule,
          mainModuleUpgradable: sequence.mainModuleUpgradable,
          guestModule: sequence.guestModule,
          utils: sequence.utils,
        },
        ...part,
      },
      stop,
    };
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
}
