const MAX_UINT256 = (1n << 256n) - 1n;

/** `31`, `0x1f` and `0x1F` are the same token; returns the canonical decimal string, or null if not a uint256. */
export function parseTokenId(input: string | number): string | null {
  // Most ids arrive canonical already ("1", "4821"): no BigInt round trip for them.
  if (typeof input === 'string' && /^(0|[1-9]\d{0,14})$/.test(input)) return input;
  const s = String(input).trim();
  let v: bigint;
  if (/^0x[0-9a-f]+$/i.test(s)) v = BigInt(s);
  else if (/^\d+$/.test(s)) v = BigInt(s);
  else return null;
  return v <= MAX_UINT256 ? v.toString() : null;
}
