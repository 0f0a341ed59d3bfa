import { encodeDeployData, getContractAddress, type Abi, type Address, type Hash, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { Artifacts } from './compile.ts';
import { devPublicClient, devWalletClient } from './clients.ts';
import { CONTRACT_DOCUMENT_PATH, type DevTokens } from './documents.ts';

/** Account 0 of anvil's default mnemonic ("test test ... junk"): 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266. */
export const ANVIL_DEPLOYER_KEY: Hex = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';

export type DevContracts = { erc20: Address; erc721: Address; erc721OnChain: Address; erc1155: Address };

export interface DevManifestChainPart {
  contracts: DevContracts;
  tokens: DevTokens;
  deployer: Address;
}

export interface DeploySamplesOptions {
  rpcUrl: string;
  chainId: number;
  originUrl: string;
  artifacts: Artifacts;
  deployerKey?: Hex;
  log?: (msg: string) => void;
}

export const DEV_TOKENS: DevTokens = { erc721: ['1', '2', '3'], erc721OnChain: ['1'], erc1155: ['1', '2'] };

// Calls are sent before their target contract is mined, so gas cannot be estimated; this covers
// every mint below with room to spare.
const CALL_GAS = 250_000n;

function artifact(artifacts: Artifacts, name: string) {
  const a = artifacts[name];
  if (!a) throw new Error(`artifact ${name} missing; is contracts/${name}.sol present?`);
  return a;
}

/**
 * Deploys and mints the sample token contracts. Every transaction is signed with an explicit nonce
 * and sent at once, then all receipts are awaited together, so the whole set usually lands in a
 * single block instead of one block per transaction.
 */
export async function deploySamples(opts: DeploySamplesOptions): Promise<DevManifestChainPart> {
  const started = Date.now();
  const account = privateKeyToAccount(opts.deployerKey ?? ANVIL_DEPLOYER_KEY);
  const publicClient = devPublicClient(opts.rpcUrl, opts.chainId);
  const wallet = devWalletClient(opts.rpcUrl, opts.chainId, account);

  const deploys: Array<{ key: keyof DevContracts; name: string; args: unknown[] }> = [
    { key: 'erc20', name: 'DevERC20', args: ['Dev USD', 'DUSD'] },
    {
      key: 'erc721',
      name: 'DevERC721',
      args: ['Dev ERC721', 'DEV721', `${opts.originUrl}/erc721/`, `${opts.originUrl}${CONTRACT_DOCUMENT_PATH}`],
    },
    { key: 'erc721OnChain', name: 'DevERC721OnChain', args: [] },
    { key: 'erc1155', name: 'DevERC1155', args: [`${opts.originUrl}/erc1155/{id}.json`] },
  ];
  const deployData = deploys.map((d) => {
    const a = artifact(opts.artifacts, d.name);
    return { ...d, abi: a.abi, data: encodeDeployData({ abi: a.abi, bytecode: a.bytecode, args: d.args }) };
  });

  const [startNonce, fees, ...deployGas] = await Promise.all([
    publicClient.getTransactionCount({ address: account.address, blockTag: 'pending' }),
    publicClient.estimateFeesPerGas(),
    ...deployData.map((d) => publicClient.estimateGas({ account, data: d.data })),
  ]);
  let nonce = startNonce;
  const feeFields = { maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };

  const contracts = {} as DevContracts;
  const abis = {} as Record<keyof DevContracts, Abi>;
  const sent: Array<{ what: string; hash: Hash }> = [];

  for (const [i, d] of deployData.entries()) {
    contracts[d.key] = getContractAddress({ from: account.address, nonce: BigInt(nonce) });
    abis[d.key] = d.abi;
    const hash = await wallet.sendTransaction({ data: d.data, gas: deployGas[i], nonce: nonce++, ...feeFields });
    sent.push({ what: `deploy ${d.name}`, hash });
  }

  const call = async (key: keyof DevContracts, functionName: string, args: unknown[]) => {
    const hash = await wallet.writeContract({
      address: contracts[key],
      abi: abis[key],
      functionName,
      args,
      gas: CALL_GAS,
      nonce: nonce++,
      ...feeFields,
    });
    sent.push({ what: `${key}.${functionName}(${args.join(', ')})`, hash });
  };

  const me = account.address;
  for (const id of DEV_TOKENS.erc721) await call('erc721', 'mint', [me, BigInt(id)]);
  for (const id of DEV_TOKENS.erc721OnChain) await call('erc721OnChain', 'mint', [me, BigInt(id)]);
  for (const id of DEV_TOKENS.erc1155) await call('erc1155', 'mint', [me, BigInt(id), 10n * BigInt(id)]);
  await call('erc20', 'mint', [me, 1_000_000n * 10n ** 6n]);

  const receipts = await Promise.all(sent.map(({ hash }) => publicClient.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 })));
  const failed = receipts.flatMap((r, i) => (r.status === 'success' ? [] : [`${sent[i]!.what} (${r.transactionHash})`]));
  if (failed.length > 0) throw new Error(`sample deployment transactions reverted: ${failed.join('; ')}`);

  opts.log?.(
    `deployed sample contracts in ${Date.now() - started} ms: ` +
      Object.entries(contracts)
        .map(([k, v]) => `${k}=${v}`)
        .join(' '),
  );
  return { contracts, tokens: structuredClone(DEV_TOKENS), deployer: me };
}
