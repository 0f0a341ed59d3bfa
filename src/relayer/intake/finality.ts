import { hexToBytes, type Address, type Hex } from 'viem';
import { DEPLOY_SELECTOR, EXECUTE_SELECTOR } from '../abi.ts';
import { selectorOf, type DecodedCall, type WalletTransaction } from './bundle.ts';
import type { FeePayment } from './fees.ts';

/*
 * Whether a fee-paying bundle's fee is final by construction: once the fee transfer has run, can anything
 * later in the transaction undo it? A Sequence v2 wallet runs its bundle in one frame: a call with
 * revertOnError=true that fails reverts the whole bundle (the fee with it), and so does running out of gas
 * in the wallet's own frame — which a later call can force by returning a large revert reason the wallet
 * copies into memory and logs in `TxFailed` (issue 52, finding 2). So a fee is final when
 *   - it is the first transaction of the bundle the entrypoint runs (after nothing but factory deploys
 *     with a gas limit of their own, on the guest module), with revertOnError=true;
 *   - every transaction after it has revertOnError=false, no delegate call and a gas limit of its own
 *     (gasLimit 0 means "all the gas left", which lets a call starve the frame);
 *   - the wallet checks a signature that calls no contract (no ERC-1271 part: its gas is the same
 *     simulated and mined);
 *   - it is not an EIP-7702 call (the EOA can void its delegation before the call is mined);
 *   - and the transaction is signed with enough gas for every later call to fail with the largest revert
 *     reason its gas limit can produce (failGas below).
 * What is not final is the exposure the loss budget counts (docs/relayer-worst-case.md).
 */

export type Finality = { final: true; postFeeGas: bigint; preFeeGas: bigint } | { final: false; why: string };

/** Gas for everything up to the fee being paid (nonce, signature check, the fee transfer, events), beyond intrinsic and deploys. */
export const PRE_FEE_GAS = 120_000n;
/** The memory the wallet's frame holds before its loop (words): a generous baseline for the quadratic term. */
const BASE_MEMORY_WORDS = 256n;

const memoryCost = (words: bigint) => 3n * words + (words * words) / 512n;

function isqrt(n: bigint): bigint {
  if (n < 2n) return n;
  let x = BigInt(Math.floor(Math.sqrt(Number(n))));
  while (x * x > n) x -= 1n;
  while ((x + 1n) * (x + 1n) <= n) x += 1n;
  return x;
}

/** The most 32-byte words a frame given `gas` can return: it pays for that memory itself (3w + w²/512 ≤ gas). */
export function maxReturnWords(gas: bigint): bigint {
  let w = (isqrt(1536n * 1536n + 2048n * gas) - 1536n) / 2n;
  while (w > 0n && memoryCost(w) > gas) w -= 1n;
  while (memoryCost(w + 1n) <= gas) w += 1n;
  return w;
}

/**
 * The most gas the wallet's frame (or the guest module's) can spend running `txs` when every one of them
 * fails with the largest revert reason its gas limit allows: the calls' own gas, the account access, a value
 * transfer to a new account, copying the reason twice (returndatacopy, then the event's encoding), the
 * `TxFailed` log (8 gas a byte) and the frame's memory, which only grows across the loop (quadratic).
 */
export function failGas(txs: readonly WalletTransaction[]): bigint {
  let gas = 0n;
  let words = BASE_MEMORY_WORDS;
  let calldataWords = 0n;
  for (const t of txs) {
    const w = maxReturnWords(t.gasLimit);
    const dataWords = BigInt(Math.ceil((t.data.length - 2) / 64));
    if (dataWords > calldataWords) calldataWords = dataWords;
    gas += t.gasLimit + 2_600n + (t.value > 0n ? 34_000n : 0n);
    gas += 2n * 3n * (w + 4n) + 750n + 8n * (32n * w + 128n) + 3_000n;
    words += 2n * w + 8n;
  }
  return gas + memoryCost(words + calldataWords);
}

/** Transactions that may run after the fee: none can revert the frame, none can take more gas than its own limit. */
export function bounded(txs: readonly WalletTransaction[]): string | null {
  for (const [i, t] of txs.entries()) {
    if (t.delegateCall) return `transaction ${i} is a delegate call`;
    if (t.revertOnError) return `transaction ${i} has revertOnError=true (its failure would revert the fee)`;
    if (t.gasLimit === 0n) return `transaction ${i} has no gas limit of its own (gasLimit 0 hands it all the gas left)`;
  }
  return null;
}

/**
 * Whether a Sequence v2 signature calls a contract when checked (an ERC-1271 "dynamic" part, flag 2,
 * anywhere in its tree, nested or chained). Unknown or malformed encodings count as calling one: the
 * fee is then not final, which is the safe answer.
 */
export function signatureCallsContracts(signature: Hex): boolean {
  try {
    return sigCalls(hexToBytes(signature), 0);
  } catch {
    return true;
  }
}

function sigCalls(b: Uint8Array, depth: number): boolean {
  if (depth > 8 || b.length === 0) return true;
  const type = b[0];
  // 0x00 legacy (threshold's high byte is the type byte), 0x01 dynamic, 0x02 no chain id: threshold, checkpoint, tree.
  if (type === 0x00) return b.length <= 6 || treeCalls(b, 6, b.length, depth);
  if (type === 0x01 || type === 0x02) return b.length <= 7 || treeCalls(b, 7, b.length, depth);
  if (type === 0x03) {
    // Chained: parts of [uint24 size][signature], each a signature of its own.
    let i = 1;
    while (i < b.length) {
      const size = u(b, i, 3);
      i += 3;
      if (i + size > b.length || sigCalls(b.subarray(i, i + size), depth + 1)) return true;
      i += size;
    }
    return false;
  }
  return true;
}

function u(b: Uint8Array, at: number, n: number): number {
  if (at + n > b.length) throw new Error('short signature');
  let v = 0;
  for (let k = 0; k < n; k++) v = v * 256 + b[at + k];
  return v;
}

function treeCalls(b: Uint8Array, from: number, to: number, depth: number): boolean {
  if (depth > 8) return true;
  let i = from;
  while (i < to) {
    const flag = b[i++];
    switch (flag) {
      case 0: // weight, 66-byte ECDSA signature: ecrecover, no call
        i += 1 + 66;
        break;
      case 1: // weight, address
        i += 1 + 20;
        break;
      case 2: // weight, address, size, signature: isValidSignature on a contract
        return true;
      case 3: // node hash
      case 5: // subdigest
        i += 32;
        break;
      case 4: {
        const size = u(b, i, 3);
        i += 3;
        if (treeCalls(b, i, i + size, depth + 1)) return true;
        i += size;
        break;
      }
      case 6: {
        // external weight, internal threshold, size, tree
        const size = u(b, i + 3, 3);
        i += 6;
        if (treeCalls(b, i, i + size, depth + 1)) return true;
        i += size;
        break;
      }
      default:
        return true;
    }
    if (i > to) return true;
  }
  return false;
}

/**
 * The fee's finality for a fee-paying call (see the comment at the top). `factory` is the wallet factory
 * (its deploys may stand before the paying bundle on the guest module).
 */
export function feeFinality(call: DecodedCall, payments: readonly FeePayment[], factory: Address, authorization: boolean): Finality {
  if (authorization) return { final: false, why: 'an EIP-7702 call: the EOA can void its delegation before it is mined' };
  if (payments.length !== 1) return { final: false, why: `it pays ${payments.length} fee transfers; a final fee is one transfer` };
  const fee = payments[0];
  const paying = call.bundles[fee.bundle];
  if (fee.index !== 0) return { final: false, why: `its fee is transaction ${fee.index} of the bundle; a final fee is the first (later calls run after it cannot take it back)` };
  if (!paying.signature || signatureCallsContracts(paying.signature)) {
    return { final: false, why: 'its signature calls a contract (ERC-1271) when checked, which can behave differently when mined' };
  }
  const after = paying.txs.slice(1);
  const notBounded = bounded(after);
  if (notBounded) return { final: false, why: `after the fee, ${notBounded}` };
  let preFee = PRE_FEE_GAS;
  let postFee = failGas(after);
  if (call.kind === 'guest') {
    const entry = call.entryTxs ?? [];
    const at = entry.findIndex((t) => t.target === paying.wallet && selectorOf(t.data) === EXECUTE_SELECTOR && t.revertOnError && !t.delegateCall);
    if (at < 0 || paying.depth !== 1) return { final: false, why: 'the guest module does not run the paying bundle directly' };
    for (const [i, t] of entry.slice(0, at).entries()) {
      if (t.target !== factory.toLowerCase() || selectorOf(t.data) !== DEPLOY_SELECTOR) return { final: false, why: `guest transaction ${i} runs before the fee and is not a wallet deploy` };
      if (t.gasLimit === 0n) return { final: false, why: `guest transaction ${i} (a wallet deploy) has no gas limit of its own` };
      preFee += t.gasLimit + 2_600n;
    }
    const rest = entry.slice(at + 1);
    const restNotBounded = bounded(rest);
    if (restNotBounded) return { final: false, why: `after the paying bundle, guest ${restNotBounded}` };
    // The paying execute must be given all the gas it may need (gasLimit 0: all that is left, 63/64 of it).
    const needed = ((postFee + PRE_FEE_GAS) * 64n) / 63n + 1n;
    if (entry[at].gasLimit !== 0n && entry[at].gasLimit < needed)
      return { final: false, why: `the guest module gives the paying bundle ${entry[at].gasLimit} gas, less than the ${needed} its calls may need` };
    postFee = (postFee * 64n) / 63n + 1n + failGas(rest);
  }
  return { final: true, preFeeGas: preFee, postFeeGas: postFee };
}

/** What to tell a client whose fee is not final: how to shape a bundle that is. */
export const FINAL_SHAPE_HINT =
  'a fee is final when it is the first transaction (revertOnError=true) and every later transaction has revertOnError=false, delegateCall=false and a gasLimit of its own (docs/relayer-worst-case.md)';
