import type { Hex } from 'viem';

// Sequence v3 wallets are out of scope (docs/api.md): no registry package ships their contracts, so
// none can be deployed and tested locally. What this file does is recognise a v3 call, so a v3 client
// is told that is what it sent instead of "not an execute call".

/** v3's `execute(bytes payload, bytes signature)` on a deployed wallet. */
const V3_EXECUTE_SELECTOR = '0x1f6a1eb9';

/**
 * The number of calls of a v3 packed calls payload (`Payload.encode` of @0xsequence/wallet-primitives,
 * what the 3.x relayer client's feeOptions sends as `data`), when `input` is one that decodes to its
 * last byte; null otherwise. The layout is the encoder's: a flag byte (bit 0 space is zero, bits 1-3
 * nonce bytes, bit 4 a single call, bit 5 a 2-byte call count), then per call a flag byte (bit 0 to
 * self, bit 1 value, bit 2 data, bit 3 gas limit) and the fields it announces.
 */
function packedCallCount(input: Hex): number | null {
  const b = Buffer.from(input.slice(2), 'hex');
  let at = 0;
  const take = (n: number) => {
    if (at + n > b.length) throw new RangeError('short');
    const out = b.subarray(at, at + n);
    at += n;
    return out;
  };
  try {
    const flag = take(1)[0]!;
    if (flag & 0xc0) return null;
    if (!(flag & 0x01)) take(20);
    take((flag >> 1) & 0x07);
    const count = flag & 0x10 ? 1 : take(flag & 0x20 ? 2 : 1).readUIntBE(0, flag & 0x20 ? 2 : 1);
    if (count === 0) return null;
    for (let i = 0; i < count; i++) {
      const f = take(1)[0]!;
      if (f >> 6 === 3) return null;
      if (!(f & 0x01)) take(20);
      if (f & 0x02) take(32);
      if (f & 0x04) take(take(3).readUIntBE(0, 3));
      if (f & 0x08) take(32);
    }
    return at === b.length ? count : null;
  } catch {
    return null;
  }
}

/** What a v3 input is, in words for an error, or null when it is not recognisably v3. */
export function describeV3Input(input: Hex): string | null {
  if (input.slice(0, 10).toLowerCase() === V3_EXECUTE_SELECTOR) return `a Sequence v3 wallet call (execute(bytes,bytes), selector ${V3_EXECUTE_SELECTOR})`;
  const calls = packedCallCount(input);
  return calls === null ? null : `a Sequence v3 packed calls payload (${calls} call${calls === 1 ? '' : 's'}, as @0xsequence/relayer 3.x sends to FeeOptions)`;
}
