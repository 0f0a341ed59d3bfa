// A real Sequence v2 user for tests, built on the official client packages. Two levels:
//
// - signedBundle: the exact calldata a v2 client relays, built with @0xsequence/core, for tests
//   that need to control every field (nonce space, deployed or not, a wrong signer) or that send it
//   themselves.
// - officialWallet: the official `Wallet` of @0xsequence/wallet with an `RpcRelayer` (any relayer
//   URL, metarelay included) or a `LocalRelayer`, so the wire traffic is what real clients produce.
//
// The 2.x packages are CommonJS and bring their own ethers 6 objects; the few casts below bridge
// their types where two copies of @0xsequence/core (2.3.50 here, 2.3.43 under @0xsequence/wallet)
// describe the same shapes.

import { commons, v2 } from '@0xsequence/core';
import { LocalRelayer, RpcRelayer, RpcRelayerProto, type FeeOption, type FeeQuote, type Relayer } from '@0xsequence/relayer';
import { Orchestrator, signers } from '@0xsequence/signhub';
import { Wallet } from '@0xsequence/wallet';
import { createRequire } from 'node:module';
import { concat, encodeFunctionData, getAddress, getContractAddress, pad, parseAbi, type Address, type Hash, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { SEQUENCE_V2_CONTEXT, WALLET_CREATION_CODE } from '../../src/devchain/sequence.ts';

// The CommonJS build of ethers, the copy the 2.x packages require(): an ESM import would load a
// second ethers whose providers and signers those packages only know by duck typing. The types are
// the ESM declarations of the same version, hence the `as never` where objects cross over.
const ethers = createRequire(import.meta.url)('ethers') as typeof import('ethers');
type JsonRpcProvider = import('ethers').JsonRpcProvider;

export const sequenceWalletAbi = parseAbi([
  'struct Transaction { bool delegateCall; bool revertOnError; uint256 gasLimit; address target; uint256 value; bytes data; }',
  'function execute(Transaction[] _txs, uint256 _nonce, bytes _signature)',
  'function readNonce(uint256 _space) view returns (uint256)',
  'function nonce() view returns (uint256)',
  'function imageHash() view returns (bytes32)',
  'event TxExecuted(bytes32 indexed _tx, uint256 _index)',
  'event TxFailed(bytes32 indexed _tx, uint256 _index, bytes _reason)',
  'event NonceChange(uint256 _space, uint256 _newNonce)',
  'error BadNonce(uint256 _space, uint256 _provided, uint256 _current)',
  'error InvalidSignature(bytes32 _hash, bytes _signature)',
  'error NotEnoughGas(uint256 _index, uint256 _requested, uint256 _available)',
]);

export const sequenceFactoryAbi = parseAbi(['function deploy(address _mainModule, bytes32 _salt) payable returns (address _contract)', 'error DeployFailed(address _mainModule, bytes32 _salt)']);

/** The gas limit Wallet.buildDeployTransaction gives the factory call (outside SKALE Nebula/Somnia). */
export const WALLET_DEPLOY_GAS_LIMIT = 100_000n;

export interface TestSigner {
  privateKey: Hex;
  address: Address;
}

export function newSigner(): TestSigner {
  const privateKey = generatePrivateKey();
  return { privateKey, address: privateKeyToAccount(privateKey).address };
}

export interface SequenceTestWallet {
  signer: Address;
  config: v2.config.WalletConfig;
  imageHash: Hash;
  /** Counterfactual address: where Factory.deploy(mainModule, imageHash) puts the wallet. */
  address: Address;
}

/** The 1-of-1 v2 wallet of one EOA, as the official clients derive it. */
export function walletFor(signerAddress: Address): SequenceTestWallet {
  const signer = getAddress(signerAddress);
  const config = v2.config.toWalletConfig({ threshold: 1, checkpoint: 0, members: [{ address: signer, weight: 1 }] });
  const imageHash = v2.config.imageHash(config) as Hash;
  const address = getAddress(commons.context.addressOf(v2.DeployedWalletContext, imageHash));
  // The relayer derives wallet addresses itself, so prove both derivations agree here.
  const create2 = getContractAddress({
    opcode: 'CREATE2',
    from: SEQUENCE_V2_CONTEXT.factory,
    salt: imageHash,
    bytecode: concat([WALLET_CREATION_CODE, pad(SEQUENCE_V2_CONTEXT.mainModule)]),
  });
  if (create2 !== address) {
    throw new Error(`@0xsequence/core puts wallet ${imageHash} at ${address}, CREATE2 over the factory gives ${create2}`);
  }
  return { signer, config, imageHash, address };
}

/** One call of a bundle. Unlike @0xsequence/core, revertOnError defaults to true here. */
export interface SequenceTx {
  to: Address;
  value?: bigint;
  data?: Hex;
  gasLimit?: bigint;
  delegateCall?: boolean;
  revertOnError?: boolean;
}

// commons.transaction would silently use revertOnError=false and gasLimit=0 for missing fields.
function toCoreTx(tx: SequenceTx): commons.transaction.Transaction {
  return {
    to: tx.to,
    value: tx.value ?? 0n,
    data: tx.data ?? '0x',
    gasLimit: tx.gasLimit ?? 0n,
    delegateCall: tx.delegateCall ?? false,
    revertOnError: tx.revertOnError ?? true,
  };
}

export interface SignedBundleInput {
  signerKey: Hex;
  wallet: SequenceTestWallet;
  chainId: number | bigint;
  txs: SequenceTx[];
  /** Nonce space and the nonce within it; default space 0, nonce 0. */
  nonce?: { space: bigint; n: bigint };
  /** false: wrap in the guest module with the factory deploy first, as Wallet.decorateTransactions does. */
  deployed: boolean;
}

export interface SignedBundle {
  /** Where the relayer sends `input`: the wallet, or the guest module for an undeployed wallet. */
  entrypoint: Address;
  /** execute(...) calldata for `entrypoint`. */
  input: Hex;
  /** The meta-transaction id: the wallet bundle's subdigest, or the guest bundle's for the guest form (as Account computes it). */
  id: Hash;
  /** Subdigest of the wallet's own bundle: the `_tx` of the wallet's TxExecuted/TxFailed events. */
  walletId: Hash;
  /** Space-encoded nonce (space << 96 | n). */
  nonce: bigint;
  signature: Hex;
  /** execute(...) calldata for the wallet itself (equal to `input` when deployed). */
  walletInput: Hex;
  /** The guest module's calls when not deployed: [factory.deploy, wallet.execute]. */
  guestTxs?: SequenceTx[];
}

/** Signs a bundle with the wallet's EOA (v2 legacy encoding, ecrecover of the subdigest) and encodes it for relaying. */
export async function signedBundle(input: SignedBundleInput): Promise<SignedBundle> {
  const { wallet } = input;
  const chainId = BigInt(input.chainId);
  const transactions = input.txs.map(toCoreTx);
  const nonce = commons.transaction.encodeNonce(input.nonce?.space ?? 0n, input.nonce?.n ?? 0n);
  const digest = commons.transaction.digestOfTransactions(nonce, transactions);
  const walletId = commons.signature.subdigestOf({ address: wallet.address, chainId, digest }) as Hash;

  const eoaSignature = await privateKeyToAccount(input.signerKey).sign({ hash: walletId });
  // Trailing type byte 0x01: plain ecrecover of the subdigest (0x02 would be eth_sign-prefixed).
  const parts = new Map<string, commons.signature.SignaturePart>([[wallet.signer, { signature: concat([eoaSignature, '0x01']), isDynamic: false }]]);
  const signature = v2.signature.encodeSigners(wallet.config, parts, [], chainId).encoded as Hex;

  const signed: commons.transaction.SignedTransactionBundle = {
    entrypoint: wallet.address,
    transactions,
    nonce,
    signature,
    chainId,
    intent: { id: walletId, wallet: wallet.address },
  };
  const walletInput = commons.transaction.encodeBundleExecData(signed) as Hex;

  if (input.deployed) {
    return { entrypoint: wallet.address, input: walletInput, id: walletId, walletId, nonce, signature, walletInput };
  }

  const guestTxs: SequenceTx[] = [
    {
      to: SEQUENCE_V2_CONTEXT.factory,
      data: encodeFunctionData({
        abi: sequenceFactoryAbi,
        functionName: 'deploy',
        args: [SEQUENCE_V2_CONTEXT.mainModule, wallet.imageHash],
      }),
      gasLimit: WALLET_DEPLOY_GAS_LIMIT,
      delegateCall: false,
      revertOnError: true,
      value: 0n,
    },
    { to: wallet.address, data: walletInput, gasLimit: 0n, delegateCall: false, revertOnError: true, value: 0n },
  ];
  const guestCoreTxs = guestTxs.map(toCoreTx);
  return {
    entrypoint: SEQUENCE_V2_CONTEXT.guestModule,
    // An unsigned bundle encodes as execute(txs, 0, 0x), which is what the guest module takes.
    input: commons.transaction.encodeBundleExecData({
      entrypoint: SEQUENCE_V2_CONTEXT.guestModule,
      transactions: guestCoreTxs,
    }) as Hex,
    id: commons.transaction.subdigestOfGuestModuleTransactions(SEQUENCE_V2_CONTEXT.guestModule, chainId, guestCoreTxs) as Hash,
    walletId,
    nonce,
    signature,
    walletInput,
    guestTxs,
  };
}

const erc20TransferAbi = parseAbi(['function transfer(address to, uint256 value) returns (bool)']);

/**
 * The call that pays a relayer fee option, built the way the v2 AccountSigner does
 * (encodeGasRefundTransaction): appended after the user's calls, revertOnError true, the option's
 * gasLimit; a native option (token type UNKNOWN) is a plain value transfer to `option.to`, an ERC20
 * option is `token.transfer(option.to, option.value)`.
 */
export function feeTransaction(option: FeeOption): SequenceTx {
  const value = BigInt(option.value);
  const gasLimit = BigInt(option.gasLimit);
  switch (option.token.type) {
    case RpcRelayerProto.FeeTokenType.UNKNOWN:
      return { to: getAddress(option.to), value, gasLimit, delegateCall: false, revertOnError: true, data: '0x' };
    case RpcRelayerProto.FeeTokenType.ERC20_TOKEN: {
      if (!option.token.contractAddress) throw new Error('ERC20 fee option without a token contractAddress');
      return {
        to: getAddress(option.token.contractAddress),
        value: 0n,
        gasLimit,
        delegateCall: false,
        revertOnError: true,
        data: encodeFunctionData({ abi: erc20TransferAbi, functionName: 'transfer', args: [getAddress(option.to), value] }),
      };
    }
    default:
      throw new Error(`fee token type ${option.token.type} is not payable by the v2 client`);
  }
}

export interface OfficialWalletOptions {
  signerKey: Hex;
  rpcUrl: string;
  chainId: number;
  /** Base URL of a Sequence-compatible relayer; RpcRelayer calls `${relayerUrl}/rpc/Relayer/<Method>`. */
  relayerUrl?: string;
  projectAccessKey?: string;
  /** Instead of relayerUrl: relay with LocalRelayer, which sends from this funded EOA directly. */
  localRelayerKey?: Hex;
}

export interface SendOptions {
  quote?: FeeQuote;
  /** Appends the payment for this fee option (see feeTransaction). */
  fee?: FeeOption;
  /** A space-encoded nonce, or `{ space }` for the next nonce of that space read on chain. Default: a random space, as Wallet.sendTransaction does. */
  nonce?: bigint | { space: bigint };
}

export interface SentMetaTxn {
  /** intent.id of the relayed bundle: what RpcRelayer polls GetMetaTxnReceipt with. */
  id: Hash;
  /** The relayed (decorated) bundle. */
  bundle: commons.transaction.IntendedTransactionBundle;
  /** Hash of the chain transaction that carried it. */
  hash: Hash;
  response: commons.transaction.TransactionResponse;
}

export interface OfficialWallet {
  address: Address;
  imageHash: Hash;
  wallet: Wallet;
  relayer: RpcRelayer | LocalRelayer;
  provider: JsonRpcProvider;
  /** Signs, decorates (guest module + deploy when undeployed) and relays, exactly as Wallet.sendTransaction. */
  sendTransaction(txs: SequenceTx[], opts?: SendOptions): Promise<SentMetaTxn>;
  /** RpcRelayer.getFeeOptions(wallet, ...txs): FeeTokens, then (if fees are required) GetMetaTxnNonce and FeeOptions. */
  getFeeOptions(txs: SequenceTx[]): Promise<{ options: FeeOption[]; quote?: FeeQuote }>;
  /**
   * What Account.gasRefundQuotes sends: FeeOptions for the decorated bundle (entrypoint and its
   * execute calldata), here signed for real rather than with a stub signature.
   */
  getFeeOptionsRaw(txs: SequenceTx[], opts?: { nonce?: bigint }): Promise<{ options: FeeOption[]; quote?: FeeQuote }>;
  isDeployed(): Promise<boolean>;
  close(): void;
}

export function officialWallet(opts: OfficialWalletOptions): OfficialWallet {
  const w = walletFor(privateKeyToAccount(opts.signerKey).address);
  // ethers caches identical reads for 250 ms by default, so right after a relay the Wallet would still
  // see its code as "0x" and wrap the next bundle in a second, failing deployment. Its 4 s default
  // polling would make LocalRelayer's receipt wait dominate test time.
  const provider = new ethers.JsonRpcProvider(opts.rpcUrl, opts.chainId, {
    staticNetwork: true,
    pollingInterval: 50,
    cacheTimeout: -1,
  });

  let relayer: RpcRelayer | LocalRelayer;
  if (opts.localRelayerKey) {
    relayer = new LocalRelayer(new ethers.Wallet(opts.localRelayerKey, provider) as never);
  } else if (opts.relayerUrl) {
    relayer = new RpcRelayer({ url: opts.relayerUrl, provider: provider as never, projectAccessKey: opts.projectAccessKey });
  } else {
    throw new Error('officialWallet needs relayerUrl or localRelayerKey');
  }

  const wallet = Wallet.newWallet({
    coders: v2.coders,
    context: v2.DeployedWalletContext,
    config: w.config,
    chainId: opts.chainId,
    orchestrator: new Orchestrator([new signers.SignerWrapper(new ethers.Wallet(opts.signerKey) as never)]),
    provider,
    relayer: relayer as Relayer,
  } as unknown as Parameters<typeof Wallet.newWallet>[0]) as unknown as Wallet;
  if (getAddress(wallet.address) !== w.address) {
    throw new Error(`the official Wallet derived ${wallet.address}, walletFor ${w.address}`);
  }

  const coreTxs = (txs: SequenceTx[]) => txs.map(toCoreTx);

  const decorate = async (txs: SequenceTx[], nonce: bigint | { space: bigint } | undefined) => {
    const signed = await wallet.signTransactions(coreTxs(txs) as never, nonce ?? wallet.randomNonce());
    return (await wallet.decorateTransactions(signed as never)) as unknown as commons.transaction.IntendedTransactionBundle;
  };

  return {
    address: w.address,
    imageHash: w.imageHash,
    wallet,
    relayer,
    provider,
    async sendTransaction(txs, sendOpts = {}) {
      const all = sendOpts.fee ? [...txs, feeTransaction(sendOpts.fee)] : txs;
      const bundle = await decorate(all, sendOpts.nonce);
      const response = (await wallet.sendSignedTransaction(bundle as never, sendOpts.quote)) as commons.transaction.TransactionResponse;
      return { id: bundle.intent.id as Hash, bundle, hash: response.hash as Hash, response };
    },
    getFeeOptions(txs) {
      return relayer.getFeeOptions(w.address, ...coreTxs(txs));
    },
    async getFeeOptionsRaw(txs, rawOpts = {}) {
      const bundle = await decorate(txs, rawOpts.nonce);
      return relayer.getFeeOptionsRaw(bundle.entrypoint, commons.transaction.encodeBundleExecData(bundle));
    },
    async isDeployed() {
      return (await provider.getCode(w.address)) !== '0x';
    },
    close() {
      provider.destroy();
    },
  };
}
