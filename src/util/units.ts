/*
 * Native amounts as people read them, for the command line and logs (the console page has its own copy in
 * console/src/amount.tsx, which the browser bundle cannot share with the server's modules).
 */

const WEI = 10n ** 18n;

/** Native units rounded for reading: four decimals from 1 up, four significant digits below it ("0.0002281"). */
export function readableNative(wei: bigint | string): string {
  const v = BigInt(wei);
  if (v === 0n) return '0';
  const a = v < 0n ? -v : v;
  const sign = v < 0n ? '-' : '';
  const whole = a / WEI;
  const frac = (a % WEI).toString().padStart(18, '0');
  if (whole > 0n) {
    const f = frac.slice(0, 4).replace(/0+$/, '');
    return `${sign}${whole.toLocaleString('en-US')}${f ? `.${f}` : ''}`;
  }
  const lead = frac.search(/[1-9]/);
  return `${sign}0.${frac.slice(0, Math.min(18, lead + 4)).replace(/0+$/, '')}`;
}

/** Native units ("0.05", at most 18 decimals) to wei; null when the text is not such an amount. */
export function parseNative(text: string): bigint | null {
  const m = /^(\d{1,60})(?:\.(\d{1,18}))?$/.exec(text.trim());
  if (!m) return null;
  return BigInt(m[1]) * WEI + BigInt((m[2] ?? '').padEnd(18, '0'));
}
