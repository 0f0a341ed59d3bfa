// Pure parts of the dispatch engine: what node errors mean, replacement fee arithmetic, sender derivation.
import { describe, expect, it } from 'vitest';
import { RpcRequestError } from 'viem';
import { classifySendError } from '../src/chain/node-errors.ts';
import { raise, replacementFees, type FeePolicy } from '../src/relayer/engine/gas-price.ts';
import { senderAccounts } from '../src/relayer/engine/sender-pool.ts';
import { shareGas } from '../src/relayer/engine/batch.ts';
import { belowBaseFee, clampToCeiling, coverCeiling } from '../src/relayer/engine/cover-ceiling.ts';
import { reconcileCost } from '../src/relayer/engine/reconcile.ts';

/** A JSON-RPC error answer as viem surfaces it. */
const rpcError = (message: string, code = -32000) => new RpcRequestError({ body: {}, url: 'http://node', error: { code, message } });

describe('send errors are recognised by meaning, whatever the client', () => {
  const cases: [string, string, ReturnType<typeof classifySendError>][] = [
    ['geth', 'nonce too low: address 0xabc, tx: 5 state: 7', 'nonceTooLow'],
    ['geth', 'nonce too high: address 0xabc, tx: 9 state: 7', 'nonceTooHigh'],
    ['geth', 'already known', 'known'],
    ['geth', 'replacement transaction underpriced', 'underpriced'],
    ['geth', 'transaction underpriced: tip needed 1, tip permitted 0', 'underpriced'],
    ['geth', 'max fee per gas less than block base fee: address 0xabc, maxFeePerGas: 1, baseFee: 2', 'underpriced'],
    ['geth', 'insufficient funds for gas * price + value: address 0xabc have 0 want 1', 'insufficientFunds'],
    ['reth', 'nonce too low: next nonce 7, tx nonce 5', 'nonceTooLow'],
    ['reth', 'transaction already exists in the pool', 'known'],
    ['anvil', 'Transaction already imported', 'known'],
    ['anvil', 'Nonce too high', 'nonceTooHigh'],
    ['Nethermind', 'OldNonce, Current nonce: 7, nonce of rejected tx: 5', 'nonceTooLow'],
    ['Nethermind', 'NonceGap, Future nonce. Expected nonce: 7', 'nonceTooHigh'],
    ['Nethermind', 'AlreadyKnown', 'known'],
    ['Nethermind', 'FeeTooLowToCompete, ', 'underpriced'],
    ['Nethermind', 'InsufficientFunds, Account balance: 0, cumulative cost: 21000', 'insufficientFunds'],
    ['Besu', 'Nonce too low', 'nonceTooLow'],
    ['Besu', 'Known transaction', 'known'],
    ['Besu', 'Transaction nonce is too distant from current sender nonce', 'nonceTooHigh'],
    ['Besu', 'Upfront cost exceeds account balance', 'insufficientFunds'],
    ['Besu', 'Gas price below configured minimum gas price', 'underpriced'],
  ];
  for (const [client, message, kind] of cases) {
    it(`${client}: "${message}" is ${kind}`, () => {
      expect(classifySendError(rpcError(message))).toBe(kind);
    });
  }

  it('an unrecognised node answer is a refusal; no answer at all is a transport failure (the node may have it)', () => {
    expect(classifySendError(rpcError('max initcode size exceeded'))).toBe('rejected');
    // Recognised since the Arbitrum fee model re-sizes on it (engine/l2-gas.ts).
    expect(classifySendError(rpcError('intrinsic gas too low'))).toBe('intrinsicGasTooLow');
    expect(classifySendError(new Error('fetch failed'))).toBe('transport');
  });
});

describe('replacement fees', () => {
  const policy: FeePolicy = { capWei: 1_000n, minPriorityWei: 1n, bumpPercent: 10 };

  it('raise rounds up: 10% over 101 is 112 (111.1 rounded up), never 111', () => {
    expect(raise(101n, 10)).toBe(112n);
    expect(raise(100n, 10)).toBe(110n);
    expect(raise(0n, 10)).toBe(0n);
  });

  it('both fees rise by at least the bump over the last broadcast, or to the market price when higher', () => {
    const last = { type: 'eip1559' as const, maxFeePerGas: 200n, maxPriorityFeePerGas: 10n };
    const calm = replacementFees(last, { type: 'eip1559', maxFeePerGas: 100n, maxPriorityFeePerGas: 5n }, policy);
    expect(calm).toEqual({ ok: true, fees: { type: 'eip1559', maxFeePerGas: 220n, maxPriorityFeePerGas: 11n } });
    const busy = replacementFees(last, { type: 'eip1559', maxFeePerGas: 500n, maxPriorityFeePerGas: 40n }, policy);
    expect(busy).toEqual({ ok: true, fees: { type: 'eip1559', maxFeePerGas: 500n, maxPriorityFeePerGas: 40n } });
  });

  it('never above the cap: the market is clipped to it, and a bump that cannot fit says so', () => {
    const last = { type: 'eip1559' as const, maxFeePerGas: 800n, maxPriorityFeePerGas: 10n };
    expect(replacementFees(last, { type: 'eip1559', maxFeePerGas: 5_000n, maxPriorityFeePerGas: 10n }, policy)).toEqual({
      ok: true,
      fees: { type: 'eip1559', maxFeePerGas: 1_000n, maxPriorityFeePerGas: 11n },
    });
    const stuck = replacementFees({ ...last, maxFeePerGas: 950n }, { type: 'eip1559', maxFeePerGas: 100n, maxPriorityFeePerGas: 1n }, policy);
    expect(stuck.ok).toBe(false);
    expect(!stuck.ok && stuck.reason).toMatch(/1045 wei.*above the cap of 1000/);
  });

  it('legacy gas price bumps the same way', () => {
    expect(replacementFees({ type: 'legacy', gasPrice: 100n }, { type: 'legacy', gasPrice: 90n }, policy)).toEqual({ ok: true, fees: { type: 'legacy', gasPrice: 110n } });
    expect(replacementFees({ type: 'legacy', gasPrice: 950n }, { type: 'legacy', gasPrice: 90n }, policy).ok).toBe(false);
  });
});

describe('the bound before signing: a fee per gas no higher than the covers pay for over the gas limit', () => {
  it("is the members' covers (less the L1 fee bound) over the transaction's gas limit; none when a member has no cover", () => {
    expect(coverCeiling([{ cover_wei: '1000000' }], 1_000n)).toBe(1_000n);
    // A batch: the members' covers together, over the batch's limit (their limits plus the guest module's overhead).
    expect(coverCeiling([{ cover_wei: '600000' }, { cover_wei: '400000' }], 1_250n)).toBe(800n);
    expect(coverCeiling([{ cover_wei: '1000000' }], 1_000n, 400_000n)).toBe(600n);
    expect(coverCeiling([{ cover_wei: '1000' }], 1_000n, 5_000n)).toBe(0n);
    expect(coverCeiling([{ cover_wei: '1000000' }, { cover_wei: null }], 1_000n)).toBeNull();
  });

  it('lowers the max fee (and a tip above it) or the legacy price to the ceiling, and says when that is under the base fee', () => {
    const market = { type: 'eip1559' as const, maxFeePerGas: 3_000n, maxPriorityFeePerGas: 1_000n };
    expect(clampToCeiling(market, null)).toBe(market);
    expect(clampToCeiling(market, 5_000n)).toBe(market);
    expect(clampToCeiling(market, 2_000n)).toEqual({ type: 'eip1559', maxFeePerGas: 2_000n, maxPriorityFeePerGas: 1_000n });
    expect(clampToCeiling(market, 500n)).toEqual({ type: 'eip1559', maxFeePerGas: 500n, maxPriorityFeePerGas: 500n });
    expect(clampToCeiling({ type: 'legacy', gasPrice: 3_000n }, 2_000n)).toEqual({ type: 'legacy', gasPrice: 2_000n });
    expect(belowBaseFee(clampToCeiling(market, 2_000n), 2_000n, 1_500n)).toBeNull();
    expect(belowBaseFee(clampToCeiling(market, 1_000n), 1_000n, 1_500n)).toMatch(/at most 0\.000001 gwei per gas .* below the base fee of 0\.0000015 gwei: it waits/);
    expect(belowBaseFee(market, null, 10_000n)).toBeNull();
  });

  it('after inclusion, a cost over the cover is a price shortfall when the gas was priced, a gas shortfall when it was not', () => {
    const m = { cover_wei: '1000000', gas_price_priced: '1000' };
    expect(reconcileCost(m, 900n, 1_000n)).toEqual({ shortfallWei: null, kind: null });
    expect(reconcileCost(m, 900n, 2_000n)).toEqual({ shortfallWei: 800_000n, kind: 'price' });
    expect(reconcileCost(m, 1_100n, 1_000n)).toEqual({ shortfallWei: 100_000n, kind: 'gas' });
    expect(reconcileCost({ cover_wei: null, gas_price_priced: null }, 1_100n, 1_000n)).toEqual({ shortfallWei: null, kind: null });
  });
});

describe('sender pool', () => {
  it("keys first, then the mnemonic accounts m/44'/60'/0'/0/i, without duplicates", () => {
    const mnemonic = 'test test test test test test test test test test test junk';
    const accounts = senderAccounts({
      senderKeys: ['0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d'],
      senderMnemonic: mnemonic,
      senderCount: 3,
    });
    // anvil's well-known accounts 1 (the key), 0 and 2 (from the mnemonic; 1 again is dropped).
    expect(accounts.map((a) => a.address)).toEqual(['0x70997970C51812dc3A010C7d01b50e0d17dc79C8', '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266', '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC']);
  });
});

describe("a batch transaction's gas over its members", () => {
  it('splits in proportion to the estimates and adds up to the whole', () => {
    expect(shareGas(300_000n, [100_000n, 50_000n, 50_000n])).toEqual([150_000n, 75_000n, 75_000n]);
    const odd = shareGas(100_001n, [1n, 1n, 1n]);
    expect(odd).toEqual([33_333n, 33_333n, 33_335n]);
    expect(odd.reduce((a, b) => a + b, 0n)).toBe(100_001n);
  });

  it('one member has it all; no estimates share it evenly; nothing to share gives nothing', () => {
    expect(shareGas(90_000n, [40_000n])).toEqual([90_000n]);
    expect(shareGas(90_000n, [0n, 0n])).toEqual([45_000n, 45_000n]);
    expect(shareGas(90_000n, [])).toEqual([]);
  });
});
