import { getAddress, type Address } from 'viem';
import type { z } from 'zod';
import type { FeeTokenConfigSchema } from '../config/schema.ts';

export type FeeTokenConfig = z.infer<typeof FeeTokenConfigSchema>;

/** A price as an exact fraction, so no fee is ever rounded in the relayer's disfavour. */
export interface Fraction {
  num: bigint;
  den: bigint;
}

export function parseDecimal(text: string): Fraction {
  const [int, frac = ''] = text.split('.');
  return { num: BigInt(int + frac), den: 10n ** BigInt(frac.length) };
}

/** How the relayer learns what a fee token is worth in the native currency. Fixed rates from config by default. */
export interface PriceSource {
  nativePrice(chainId: number, token: FeeTokenConfig): Promise<Fraction>;
}

export const fixedPrices: PriceSource = {
  async nativePrice(_chainId, token) {
    return parseDecimal(token.nativePrice);
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

/** The key a token goes by in quotes and fee records: its lower-case address, or "native". */
export const tokenKey = (t: Pick<FeeTokenConfig, 'address'>) => (t.address ? t.address.toLowerCase() : 'native');

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
export const probeTokens = (tokens: readonly FeeTokenConfig[]): Address[] =>
  tokens.map((t) => (t.address ? (t.address.toLowerCase() as Address) : '0x0000000000000000000000000000000000000000'));
