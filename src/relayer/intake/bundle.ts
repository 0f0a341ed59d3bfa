import { concat, decodeFunctionData, encodeAbiParameters, getContractAddress, padHex, parseAbiParameters, sliceHex, type Address, type Hex } from 'viem';
import { keccak256 } from '../../chain/evm-crypto.ts';
import { DEPLOY_SELECTOR, EXECUTE_SELECTOR, TRANSACTION_TUPLE, factoryAbi, walletAbi } from '../abi.ts';
import { WALLET_CREATION_CODE, type SequenceContext } from '../context.ts';
import { describeV3Input } from './v3-payload.ts';

export interface WalletTransaction {
  delegateCall: boolean;
  revertOnError: boolean;
  gasLimit: bigint;
  target: Address;
  value: bigint;
  data: Hex;
}

/** One signed `execute` of one wallet inside a meta-transaction. */
export interface WalletBundle {
  /** The subdigest: what the wallet's signers signed, and this bundle's meta-transaction id. */
  id: Hex;
  wallet: Address;
  space: bigint;
  nonce: bigint;
  txs: WalletTransaction[];
  /** The signature the wallet checks before it runs `txs` (absent where a bundle is made up, e.g. the console's check). */
  signature?: Hex;
}

/** A call some wallet (or the guest module) will make: what sponsorship rules look at. */
export interface Leaf {
  executor: Address;
  target: Address;
  value: bigint;
  data: Hex;
  delegateCall: boolean;
  revertOnError: boolean;
  /** The executing wallet bundle (index into `bundles`); undefined when the guest module makes the call. */
  bundle?: number;
  /** Its index among its bundle's (or the guest module's) own transactions. */
  index: number;
}

export interface DecodedCall {
  /** The meta-transaction id: the top-level subdigest. */
  id: Hex;
  kind: 'wallet' | 'guest';
  entrypoint: Address;
  /** Every wallet bundle inside, outermost first (one for a plain wallet call). */
  bundles: (WalletBundle & { depth: number })[];
  leaves: Leaf[];
  /** Wallets this call deploys through the factory before using them. */
  deploys: Address[];
  /**
   * Targets of execute-selector calls that were not unfolded because `isWallet` said no: judged as
   * plain calls (leaves). Also what a first decoding pass asks the chain about.
   */
  candidates: Address[];
  /** The entrypoint's own transactions (the guest module's, or the wallet's own bundle's). */
  entryTxs?: WalletTransaction[];
}

export class BundleError extends Error {}

const NONCE_BITS = 96n;
const NONCE_MASK = (1n << NONCE_BITS) - 1n;

export const splitNonce = (raw: bigint) => ({ space: raw >> NONCE_BITS, nonce: raw & NONCE_MASK });
export const joinNonce = (space: bigint, nonce: bigint) => (space << NONCE_BITS) | nonce;

const txsParam = parseAbiParameters(`${TRANSACTION_TUPLE}[]`);

export function subdigest(chainId: number, address: Address, digest: Hex): Hex {
  return keccak256(concat(['0x1901', padHex(`0x${chainId.toString(16)}`, { size: 32 }), address, digest]));
}

export function walletDigest(nonce: bigint, txs: readonly WalletTransaction[]): Hex {
  return keccak256(encodeAbiParameters([{ type: 'uint256' }, ...txsParam], [nonce, txs]));
}

export function guestDigest(txs: readonly WalletTransaction[]): Hex {
  return keccak256(encodeAbiParameters([{ type: 'string' }, ...txsParam], ['guest:', txs]));
}

export function walletAddressOf(context: SequenceContext, imageHash: Hex): Address {
  return getContractAddress({
    opcode: 'CREATE2',
    from: context.factory,
    salt: imageHash,
    bytecode: concat([WALLET_CREATION_CODE, padHex(context.mainModule, { size: 32 })]),
  });
}

const lower = (a: string) => a.toLowerCase() as Address;

function decodeExecute(input: Hex): { txs: WalletTransaction[]; nonce: bigint; signature: Hex } {
  if (input.length < 10 || input.slice(0, 10).toLowerCase() !== EXECUTE_SELECTOR) {
    const v3 = describeV3Input(input);
    if (v3)
      throw new BundleError(
        `input is ${v3}: this relayer runs Sequence v2 wallets only (execute(Transaction[],uint256,bytes), selector ${EXECUTE_SELECTOR}); v3 wallets are not supported (docs/api.md)`,
      );
    throw new BundleError(`input is not a wallet execute(Transaction[],uint256,bytes) call (selector ${EXECUTE_SELECTOR})`);
  }
  try {
    const { functionName, args } = decodeFunctionData({ abi: walletAbi, data: input });
    if (functionName !== 'execute') throw new Error(functionName);
    const [txs, nonce, signature] = args;
    return { txs: txs.map((t) => ({ ...t, target: lower(t.target) })), nonce, signature };
  } catch (err) {
    throw new BundleError(`input does not decode as execute(Transaction[],uint256,bytes): ${(err as Error).message.split('\n')[0]}`);
  }
}

/** Nested executes deeper than this are refused: no honest client needs them, and each costs a decode. */
const MAX_DEPTH = 4;
const MAX_TXS = 256;

export interface DecodeOptions {
  /**
   * Whether an address is a Sequence wallet (recognised by its code, or deployed by this call). Only
   * such targets are unfolded as nested bundles; without it every execute-selector call is a candidate
   * and unfolded (the first of two passes: it lists what to ask the chain about).
   */
  isWallet?: (a: Address) => boolean;
}

/**
 * Decodes a relayer call: `contract` is the wallet (a signed bundle) or the guest module (a wrapper that
 * deploys wallets and calls their execute). Everything a wallet will do is unfolded into leaves.
 *
 * A nested execute is unfolded only when its target is a wallet and the call has revertOnError=true and
 * no delegate call: with revertOnError=false a forged signature or a failing bundle would be swallowed,
 * so the calls it claims would not be what ran. Factory deploys are leaves of their own: of the known main
 * module only, once per wallet, and only of wallets the call then uses.
 */
export function decodeCall(chainId: number, context: SequenceContext, walletAddress: Address, contract: Address, input: Hex, opts: DecodeOptions = {}): DecodedCall {
  const entry = lower(contract);
  const guest = lower(context.guestModule);
  const out: DecodedCall = { id: '0x', kind: entry === guest ? 'guest' : 'wallet', entrypoint: entry, bundles: [], leaves: [], deploys: [], candidates: [] };
  const isWallet = opts.isWallet ?? (() => true);
  let txCount = 0;

  const walk = (executor: Address, bundle: number | undefined, txs: WalletTransaction[], depth: number) => {
    txCount += txs.length;
    if (txCount > MAX_TXS) throw new BundleError(`more than ${MAX_TXS} transactions in one meta-transaction`);
    for (const [index, tx] of txs.entries()) {
      const selector = tx.data.length >= 10 ? tx.data.slice(0, 10).toLowerCase() : '';
      if (!tx.delegateCall && tx.target === lower(context.factory) && selector === DEPLOY_SELECTOR) {
        const { args } = decodeFunctionData({ abi: factoryAbi, data: tx.data });
        if (lower(args[0]) !== lower(context.mainModule)) throw new BundleError(`factory deploy of an unknown main module ${args[0]}`);
        const wallet = lower(walletAddressOf(context, args[1]));
        if (out.deploys.includes(wallet)) throw new BundleError(`wallet ${wallet} is deployed twice`);
        out.deploys.push(wallet);
        continue;
      }
      const nested = !tx.delegateCall && selector === EXECUTE_SELECTOR && tx.target !== guest && tx.target !== executor;
      if (nested && !out.candidates.includes(tx.target) && !out.deploys.includes(tx.target)) out.candidates.push(tx.target);
      if (nested && tx.revertOnError && (out.deploys.includes(tx.target) || isWallet(tx.target))) {
        if (depth >= MAX_DEPTH) throw new BundleError(`wallet executes nested deeper than ${MAX_DEPTH}`);
        const inner = decodeExecute(tx.data);
        const { space, nonce } = splitNonce(inner.nonce);
        out.bundles.push({ id: subdigest(chainId, tx.target, walletDigest(inner.nonce, inner.txs)), wallet: tx.target, space, nonce, txs: inner.txs, signature: inner.signature, depth });
        walk(tx.target, out.bundles.length - 1, inner.txs, depth + 1);
        continue;
      }
      out.leaves.push({ executor, target: tx.target, value: tx.value, data: tx.data, delegateCall: tx.delegateCall, revertOnError: tx.revertOnError, bundle, index });
    }
  };

  const top = decodeExecute(input);
  out.entryTxs = top.txs;
  if (out.kind === 'guest') {
    if (top.txs.some((t) => t.delegateCall)) throw new BundleError('the guest module refuses delegate calls');
    out.id = subdigest(chainId, guest, guestDigest(top.txs));
    walk(guest, undefined, top.txs, 1);
    if (out.bundles.length === 0) {
      throw new BundleError('a guest-module call must contain at least one execute of a Sequence wallet with revertOnError=true');
    }
  } else {
    if (entry !== lower(walletAddress)) {
      throw new BundleError(`contract ${contract} is neither the wallet ${walletAddress} nor the guest module ${context.guestModule}`);
    }
    const { space, nonce } = splitNonce(top.nonce);
    out.id = subdigest(chainId, entry, walletDigest(top.nonce, top.txs));
    out.bundles.push({ id: out.id, wallet: entry, space, nonce, txs: top.txs, signature: top.signature, depth: 0 });
    walk(entry, 0, top.txs, 1);
  }
  const used = new Set(out.bundles.map((b) => b.wallet));
  const stray = out.deploys.find((d) => !used.has(d));
  if (stray) throw new BundleError(`the call deploys wallet ${stray} without running a bundle of it`);
  out.candidates = out.candidates.filter((c) => !out.deploys.includes(c));
  return out;
}
/** The id without `0x`, lower case: how ids are stored and returned. */
export const bareId = (id: string) => id.replace(/^0x/i, '').toLowerCase();

export const selectorOf = (data: Hex) => (data.length >= 10 ? sliceHex(data, 0, 4).toLowerCase() : '0x');
