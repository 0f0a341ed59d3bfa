import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';

/** What a fee quote promises: this wallet may run this bundle for these fees until `e`. */
export const QuotePayload = z.object({
  v: z.literal(1),
  c: z.number().int(),
  w: z.string(),
  k: z.string(),
  g: z.string().regex(/^\d+$/),
  /** The gas limit the fees were priced on (the worst case); a bundle that needs a larger limit is priced again. Absent in quotes from before it was: `g` stands in. */
  l: z.string().regex(/^\d+$/).optional(),
  o: z.record(z.string(), z.string().regex(/^\d+$/)),
  /** The price each token was quoted at (native per whole token, "num/den"), and the block it was read at. */
  p: z.record(z.string(), z.string().regex(/^\d+\/\d+$/)).optional(),
  b: z.string().regex(/^\d+$/).optional(),
  e: z.number().int(),
});
export type QuotePayload = z.infer<typeof QuotePayload>;

const b64 = (b: Buffer | string) => Buffer.from(b).toString('base64url');

export function signQuote(secret: string, payload: QuotePayload): string {
  const body = b64(JSON.stringify(payload));
  const mac = createHmac('sha256', secret).update(body).digest();
  return `${body}.${b64(mac)}`;
}

export type QuoteCheck = { ok: true; payload: QuotePayload } | { ok: false; reason: string };

/** Some clients (sequence.js v3) JSON-encode the opaque quote a second time; both forms are accepted. */
function unwrap(quote: string): string {
  const q = quote.trim();
  if (q.startsWith('"')) {
    try {
      const inner = JSON.parse(q);
      if (typeof inner === 'string') return inner;
    } catch {
      // not JSON: fall through and fail the format check
    }
  }
  return q;
}

export function verifyQuote(secret: string, quote: string, nowSec = Math.floor(Date.now() / 1000)): QuoteCheck {
  const [body, mac, extra] = unwrap(quote).split('.');
  if (!body || !mac || extra !== undefined) return { ok: false, reason: 'the quote is not one this relayer issued' };
  const expected = createHmac('sha256', secret).update(body).digest();
  const given = Buffer.from(mac, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return { ok: false, reason: 'the quote was altered or was not issued by this relayer' };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
  } catch {
    return { ok: false, reason: 'the quote is malformed' };
  }
  const payload = QuotePayload.safeParse(parsed);
  if (!payload.success) return { ok: false, reason: 'the quote is malformed' };
  if (payload.data.e < nowSec) return { ok: false, reason: `the quote expired at ${new Date(payload.data.e * 1000).toISOString()}` };
  return { ok: true, payload: payload.data };
}
