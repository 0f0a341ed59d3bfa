// Units of intake/finality.ts: when a fee is final by construction (nothing after it can take it back),
// and how much gas a bundle must be signed with for every call after the fee to fail at its worst.
import { describe, expect, it } from 'vitest';
import { concat, encodeFunctionData, pad, type Address, type Hex } from 'viem';
import { decodeCall } from '../src/relayer/intake/bundle.ts';
import { structuralFees } from '../src/relayer/intake/fees.ts';
import { failGas, feeFinality, maxReturnWords, signatureCallsContracts } from '../src/relayer/intake/finality.ts';
import { SEQUENCE_V2_CONTEXT } from '../src/devchain/sequence.ts';
import { erc20 } from './support/relayer-env.ts';
import { newSigner, signedBundle, walletFor, type SequenceTx } from './support/sequence-wallet.ts';

const CHAIN = 31337;
const TOKEN = '0x00000000000000000000000000000000000f0e01' as Address;
const PAYEE = '0x00000000000000000000000000000000000a11ce' as Address;
const OTHER = '0x0000000000000000000000000000000000000b0b' as Address;
const feeTokens = [{ address: TOKEN, name: 'Fee', symbol: 'FEE', decimals: 6, nativePrice: '0.0004' }];
const context = { ...SEQUENCE_V2_CONTEXT } as never;

const fee: SequenceTx = { to: TOKEN, data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [PAYEE, 1_000n] }) };
const bounded = (gasLimit: bigint): SequenceTx => ({ to: OTHER, data: '0x12345678', revertOnError: false, gasLimit });

async function judge(txs: SequenceTx[], deployed = true, authorization = false) {
  const s = newSigner();
  const wallet = walletFor(s.address);
  const b = await signedBundle({ signerKey: s.privateKey, wallet, chainId: CHAIN, txs, deployed });
  const call = decodeCall(CHAIN, context, wallet.address.toLowerCase() as Address, b.entrypoint, b.input);
  return feeFinality(call, structuralFees(call, PAYEE, feeTokens as never), SEQUENCE_V2_CONTEXT.factory, authorization);
}

describe('the largest revert reason a call can return', () => {
  it('is the most memory its own gas pays for (3 gas a word plus words²/512)', () => {
    const cost = (w: bigint) => 3n * w + (w * w) / 512n;
    for (const gas of [0n, 2n, 3n, 30_000n, 100_000n, 1_000_000n, 30_000_000n]) {
      const w = maxReturnWords(gas);
      expect(cost(w) <= gas, `${gas}`).toBe(true);
      expect(cost(w + 1n) > gas, `${gas}`).toBe(true);
    }
  });

  it('makes a failing call cost the wallet many times its own gas: 256 KB of reason logged costs over 2 M gas', () => {
    // 400 000 gas can return ~ 11 000 words; the wallet copies them twice and logs them at 8 gas a byte.
    expect(failGas([{ delegateCall: false, revertOnError: false, gasLimit: 400_000n, target: OTHER, value: 0n, data: '0x' }])).toBeGreaterThan(2_000_000n);
    // Memory only grows across the loop: two calls cost more than twice one.
    const one = failGas([{ delegateCall: false, revertOnError: false, gasLimit: 200_000n, target: OTHER, value: 0n, data: '0x' }]);
    const two = failGas(Array.from({ length: 2 }, () => ({ delegateCall: false, revertOnError: false, gasLimit: 200_000n, target: OTHER, value: 0n, data: '0x' as Hex })));
    expect(two).toBeGreaterThan(2n * one);
  });
});

describe('a signature that calls a contract when checked', () => {
  it('an EOA signature does not; an ERC-1271 part does, nested or chained; an unknown encoding counts as one', async () => {
    const s = newSigner();
    const b = await signedBundle({ signerKey: s.privateKey, wallet: walletFor(s.address), chainId: CHAIN, txs: [fee], deployed: true });
    expect(signatureCallsContracts(b.signature)).toBe(false);
    // type 0x01, threshold 1, checkpoint 0, then a dynamic part: flag 2, weight 1, signer, size, signature.
    const dynamic = concat(['0x01', '0x0001', '0x00000000', '0x02', '0x01', OTHER, '0x000041', pad('0x01', { size: 65 })]);
    expect(signatureCallsContracts(dynamic)).toBe(true);
    // The same inside a branch (flag 4, size).
    const part = concat(['0x02', '0x01', OTHER, '0x000041', pad('0x01', { size: 65 })]);
    const branch = concat(['0x01', '0x0001', '0x00000000', '0x04', pad(`0x${((part.length - 2) / 2).toString(16)}`, { size: 3 }), part]);
    expect(signatureCallsContracts(branch)).toBe(true);
    // Chained: parts of [size][signature], the EOA's is static.
    const inner = b.signature;
    const chained = concat(['0x03', pad(`0x${((inner.length - 2) / 2).toString(16)}`, { size: 3 }), inner]);
    expect(signatureCallsContracts(chained)).toBe(false);
    expect(signatureCallsContracts('0x09')).toBe(true);
    expect(signatureCallsContracts('0x0100')).toBe(true);
  });
});

describe('a final fee', () => {
  it('is the first transaction, with every later one bounded: revertOnError=false, no delegate call, a gas limit of its own', async () => {
    const f = await judge([fee, bounded(100_000n), bounded(50_000n)]);
    expect(f.final).toBe(true);
    if (f.final)
      expect(f.postFeeGas).toBe(
        failGas([bounded(100_000n), bounded(50_000n)].map((t) => ({ delegateCall: false, revertOnError: false, gasLimit: t.gasLimit!, target: OTHER, value: 0n, data: t.data! }))),
      );
  });

  it('on the guest module: after the wallet deploy (its gas limit counted before the fee), the paying bundle run with all the gas', async () => {
    const f = await judge([fee, bounded(100_000n)], false);
    expect(f.final).toBe(true);
    if (f.final) expect(f.preFeeGas).toBeGreaterThan(100_000n);
  });

  it('is not: a fee sent last, a later call that reverts the bundle, one with all the gas left, or an EIP-7702 call', async () => {
    const why = async (txs: SequenceTx[], auth = false) => {
      const f = await judge(txs, true, auth);
      expect(f.final).toBe(false);
      return f.final ? '' : f.why;
    };
    expect(await why([bounded(100_000n), fee])).toMatch(/transaction 1 of the bundle; a final fee is the first/);
    expect(await why([fee, { ...bounded(100_000n), revertOnError: true }])).toMatch(/revertOnError=true/);
    expect(await why([fee, bounded(0n)])).toMatch(/no gas limit of its own/);
    expect(await why([fee, { ...bounded(100_000n), delegateCall: true }])).toMatch(/delegate call/);
    expect(await why([fee, bounded(100_000n)], true)).toMatch(/EIP-7702/);
  });
});
