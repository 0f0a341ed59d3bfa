/**
 * Exact comparison of decimal numbers written as text, as PostgreSQL's `numeric` compares them:
 * indexed values (`value_num::text`, e.g. "3.50", "-12", up to 60 digits each side) against the
 * bounds and values of a filter (JSON numbers, written by String(), so perhaps "1e+21"). Doubles
 * would misorder integers past 2^53, which token ids and on-chain amounts often are.
 */
interface Decimal {
  negative: boolean;
  /** Integer digits without leading zeros ("" for zero). */
  int: string;
  /** Fraction digits without trailing zeros. */
  frac: string;
}

const DECIMAL = /^([+-]?)(\d*)(?:\.(\d*))?(?:e([+-]?\d+))?$/i;

export function parseDecimal(text: string): Decimal | null {
  const m = DECIMAL.exec(text.trim());
  if (!m || (m[2] === '' && (m[3] ?? '') === '')) return null;
  let digits = (m[2] ?? '') + (m[3] ?? '');
  // The decimal point's place in `digits`, moved by the exponent.
  let point = (m[2] ?? '').length + Number(m[4] ?? 0);
  if (!Number.isSafeInteger(point) || Math.abs(point) > 1000) return null;
  if (point < 0) {
    digits = '0'.repeat(-point) + digits;
    point = 0;
  }
  if (point > digits.length) digits += '0'.repeat(point - digits.length);
  const int = digits.slice(0, point).replace(/^0+/, '');
  const frac = digits.slice(point).replace(/0+$/, '');
  return { negative: m[1] === '-' && (int !== '' || frac !== ''), int, frac };
}

function compareMagnitude(a: Decimal, b: Decimal): number {
  if (a.int.length !== b.int.length) return a.int.length < b.int.length ? -1 : 1;
  if (a.int !== b.int) return a.int < b.int ? -1 : 1;
  return a.frac === b.frac ? 0 : a.frac < b.frac ? -1 : 1;
}

/** -1, 0 or 1 as a < b, a = b, a > b. */
export function compareDecimal(a: Decimal, b: Decimal): number {
  if (a.negative !== b.negative) return a.negative ? -1 : 1;
  const m = compareMagnitude(a, b);
  return a.negative ? -m : m;
}
