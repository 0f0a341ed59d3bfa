import { decodeFunctionData, getAddress, type Address } from 'viem';
import type { z } from 'zod';
import type { FeeTokenConfigSchema } from '../../config/schema.ts';
import { erc20Abi } from '../abi.ts';
import { selectorOf, type DecodedCall } from './bundle.ts';
import { fixedPrice, tokenKey, type Fraction, type PriceResult } from '../../prices/index.ts';

// The source-neutral price types live in src/prices/ (the indexer prices balances with them too).
export { fixedPrice, fractionToDecimal, parseDecimal, tokenKey, type Fraction, type PriceOrigin, type PriceResult } from '../../prices/index.ts';

export type FeeTokenConfig = z.infer<typeof FeeTokenConfigSchema>;

/**
 * How the relayer learns what each fee token is worth in the native currency (src/prices/
 * reads live feeds and pools; `fixedPrices` only the configured rates). Keyed by tokenKey.
 */
export interface PriceSource {
  prices(chainId: number, tokens: readonly FeeTokenConfig[]): Promise<Map<string, PriceResult>>;
  /** USD per whole native unit (the relayer's nativeUsdFeed), for sponsorship caps in USD; absent: none. */
  nativeUsd?(): Promise<{ ok: true; price: Fraction } | { ok: false; reason: string }>;
}

export const fixedPrices: PriceSource = {
  async prices(_chainId, tokens) {
    return new Map(tokens.map((t) => [tokenKey(t), fixedPrice(t)]));
  },
};

const ceilDiv = (a: bigint, b: bigint) => (a + b - 1n) / b;

/** A cost in wei as an amount of `token`'s base units, rounded up. */
export function weiToToken(wei: bigint, token: FeeTokenConfig, price: Fraction): bigint {
  if (price.num === 0n) throw new Error(`fee token ${token.symbol} has a zero price`);
  return ceilDiv(wei * 10n ** BigInt(token.decimals) * price.den, price.num * 10n ** 18n);
}

/** v × factor, rounded up; the factor is applied in millionths. */
export const ceilMul = (v: bigint, factor: number) => ceilDiv(v * BigInt(Math.round(factor * 1_000_000)), 1_000_000n);

/** gas × price × markup, rounded up. */
export const gasCost = (gas: bigint, gasPrice: bigint, markup: number): bigint => ceilMul(gas * gasPrice, markup);

/**
 * What a fee-paying bundle must be worth, in wei: the gas it is expected to use with the markup, and never
 * less than its whole gas limit at the gas price. A simulation is evidence, not a guarantee: a contract can
 * behave one way when simulated and another when mined (or be switched between the two by its owner), and
 * what it can then burn is bounded only by the signed gas limit. Pricing that limit is what makes the
 * relayer's worst case a paid one.
 */
/**
 * The least fee, in wei: the expected use with the markup, and never less than the whole signed limit at
 * the price times `room` — the room the base fee has to climb before inclusion, since no attempt may offer
 * more per gas than the fee pays for over the limit (engine/cover-ceiling.ts): past it the bundle waits.
 */
export function requiredWei(used: bigint, gasLimit: bigint, gasPrice: bigint, markup: number, l1FeeBound = 0n, room = 1): bigint {
  const expected = gasCost(used, gasPrice, markup);
  const worst = ceilMul(gasLimit * gasPrice, room);
  // An L1 data fee (OP stack) is charged on top of the gas, whatever the gas: its upper bound is added whole.
  return (expected > worst ? expected : worst) + l1FeeBound;
}

/** An amount of `token`'s base units in wei at `price`, rounded down (what it is worth to the relayer). */
export function tokenToWei(amount: bigint, token: FeeTokenConfig, price: Fraction): bigint {
  return (amount * price.num * 10n ** 18n) / (price.den * 10n ** BigInt(token.decimals));
}

export function feeTokenWire(chainId: number, t: FeeTokenConfig) {
  return {
    chainId,
    name: t.name,
    symbol: t.symbol,
    type: t.address ? 'ERC20_TOKEN' : 'UNKNOWN',
    decimals: t.decimals,
    logoURL: t.logoURL,
    contractAddress: t.address ? getAddress(t.address) : null,
    tokenID: null,
  };
}

/** The token list the probe measures: address(0) stands for native. */
export const probeTokens = (tokens: readonly FeeTokenConfig[]): Address[] => tokens.map((t) => (t.address ? (t.address.toLowerCase() as Address) : '0x0000000000000000000000000000000000000000'));

/** One fee payment found in a bundle's calldata. */
export interface FeePayment {
  /** tokenKey of the fee token: its lower-case address, or "native". */
  token: string;
  value: bigint;
  /** The paying wallet bundle (index into DecodedCall.bundles) and the transaction's index in it. */
  bundle: number;
  index: number;
  wallet: Address;
}

const TRANSFER_SELECTOR = '0xa9059cbb';

/**
 * The fees a meta-transaction pays, read from its calldata alone — never from what a simulation saw,
 * which a contract that detects simulation can fake. A fee is a transaction of a signed bundle that the
 * entrypoint runs directly (the wallet's own bundle, or one the guest module calls), with
 * revertOnError=true and no delegate call, that is either `transfer(paymentAddress, v)` on an accepted
 * fee token, or native value v sent to the payment address with no calldata. With revertOnError=true the
 * whole bundle reverts unless it is paid, so a mined success means the fee arrived. Anything else —
 * a payment by another contract, by the guest module, in a nested bundle or a sub-call — is not a fee.
 */
export function structuralFees(call: DecodedCall, payee: Address, feeTokens: readonly FeeTokenConfig[]): FeePayment[] {
  const accepted = new Set(feeTokens.map(tokenKey));
  const directDepth = call.kind === 'guest' ? 1 : 0;
  const out: FeePayment[] = [];
  for (const leaf of call.leaves) {
    if (leaf.bundle === undefined || leaf.delegateCall || !leaf.revertOnError) continue;
    const b = call.bundles[leaf.bundle];
    if (b.depth !== directDepth) continue;
    const at = { bundle: leaf.bundle, index: leaf.index, wallet: b.wallet };
    if (leaf.target === payee && leaf.value > 0n && leaf.data === '0x' && accepted.has('native')) {
      out.push({ token: 'native', value: leaf.value, ...at });
      continue;
    }
    if (leaf.value !== 0n || !accepted.has(leaf.target) || selectorOf(leaf.data) !== TRANSFER_SELECTOR) continue;
    try {
      const { args } = decodeFunctionData({ abi: erc20Abi, data: leaf.data });
      if ((args[0] as string).toLowerCase() === payee) out.push({ token: leaf.target, value: args[1] as bigint, ...at });
    } catch {
      // not a well-formed transfer: not a fee
    }
  }
  return out;
}

/** The structural fee per token key. */
export function feeTotals(payments: readonly FeePayment[]): Map<string, bigint> {
  const out = new Map<string, bigint>();
  for (const p of payments) out.set(p.token, (out.get(p.token) ?? 0n) + p.value);
  return out;
}

/** The contracts a bundle calls, other than its own wallets and its fee transfers (what a gas shortfall bars). */
export function calledContracts(call: DecodedCall, payments: FeePayment[] = []): Address[] {
  const wallets = new Set(call.bundles.map((b) => b.wallet));
  const fees = new Set(payments.map((p) => `${p.bundle}:${p.index}`));
  const out = new Set<Address>();
  for (const l of call.leaves) {
    if (wallets.has(l.target) || (l.bundle !== undefined && fees.has(`${l.bundle}:${l.index}`))) continue;
    out.add(l.target);
  }
  return [...out];
}
