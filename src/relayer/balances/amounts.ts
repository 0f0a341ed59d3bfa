import { formatEther } from 'viem';
import { z } from 'zod';

/*
 * Balances are kept in wei (exact integers); the wire speaks native units as JSON numbers (the
 * reference's decimal.Decimal fields). Incoming amounts are read from their decimal text, so 0.1 is
 * exactly 10^17 wei, never the binary float's neighbour.
 */

export class AmountError extends Error {}

/** A decimal in text (as JSON.stringify writes a number: "0.1", "1e-7", "-2.5") as an exact fraction. */
export function parseDecimal(input: number | string, what: string): { num: bigint; den: bigint } {
  if (typeof input === 'number' && !Number.isFinite(input)) throw new AmountError(`${what} must be a finite number`);
  const text = String(input).trim();
  const m = /^([+-]?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (!m) throw new AmountError(`${what} must be a decimal number, not ${JSON.stringify(input)}`);
  const [, sign, whole, frac = '', exp = '0'] = m;
  const e = Number(exp) - frac.length;
  if (Math.abs(e) > 100) throw new AmountError(`${what} is out of range`);
  let num = BigInt(whole + frac);
  let den = 1n;
  if (e >= 0) num *= 10n ** BigInt(e);
  else den = 10n ** BigInt(-e);
  return { num: sign === '-' ? -num : num, den };
}

/** Native units (e.g. 0.25 ETH) to wei; refuses what has more than 18 decimals (a fraction of a wei). */
export function toWei(input: number | string, what = 'amount'): bigint {
  const { num, den } = parseDecimal(input, what);
  const scaled = num * 10n ** 18n;
  if (scaled % den !== 0n) throw new AmountError(`${what} ${input} has more than 18 decimals (a fraction of a wei)`);
  const wei = scaled / den;
  if (wei >= 10n ** 60n || wei <= -(10n ** 60n)) throw new AmountError(`${what} is out of range`);
  return wei;
}

/** Wei as native units on the wire (a JSON number; the exact value goes beside it as a wei string). */
export function fromWei(wei: bigint): number {
  return Number(formatEther(wei));
}

/** A fee markup factor (e.g. 1.25): positive, at most 100, at most 6 decimals; kept as its exact text. */
export function parseFactor(input: number | string): string {
  const { num, den } = parseDecimal(input, 'feeMarkupFactor');
  if (num <= 0n) throw new AmountError('feeMarkupFactor must be above 0');
  if (num > 100n * den) throw new AmountError('feeMarkupFactor must be at most 100');
  if ((num * 10n ** 6n) % den !== 0n) throw new AmountError('feeMarkupFactor has more than 6 decimals');
  const micro = (num * 10n ** 6n) / den;
  const whole = micro / 10n ** 6n;
  const frac = (micro % 10n ** 6n).toString().padStart(6, '0').replace(/0+$/, '');
  return frac ? `${whole}.${frac}` : `${whole}`;
}

/** cost × factor, rounded up to the wei (the project never pays less than the cost times its markup). */
export function applyFactor(costWei: bigint, factor: string): bigint {
  const { num, den } = parseDecimal(factor, 'feeMarkupFactor');
  return (costWei * num + den - 1n) / den;
}

/** USD value of an amount at a native/USD rate (display only). */
export function usdOf(wei: bigint, rate: number | null): number | null {
  return rate == null ? null : Math.round(fromWei(wei) * rate * 100) / 100;
}

/** A parse at an edge (zod): a parse error of ours becomes the field's issue, not a 500. */
const parsed = <T>(max: number, parse: (v: number | string) => T) =>
  z.union([z.number(), z.string().max(max)]).transform((v, ctx) => {
    try {
      return parse(v);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: err instanceof AmountError ? err.message : String(err) });
      return z.NEVER;
    }
  });

/** An amount of native currency: a JSON number or decimal string, at most 18 decimals, read exactly (to wei). */
export const NativeAmount = parsed(100, (v) => toWei(v));
/** A gas tank's fee markup factor. */
export const MarkupFactor = parsed(40, parseFactor);
