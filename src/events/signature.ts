import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Deliveries are signed like Stripe's: `Metarelay-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>` over
 * `<t>.<raw body>`, keyed with the endpoint's secret (the whole `whsec_…` string, as UTF-8 bytes).
 */
export const SIGNATURE_HEADER = 'metarelay-signature';

export function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

export function signature(secret: string, timestamp: number, body: string): string {
  return createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
}

export function signatureHeader(secret: string, timestamp: number, body: string): string {
  return `t=${timestamp},v1=${signature(secret, timestamp, body)}`;
}

/** What a receiver does (examples/webhook-receiver.mjs has the same in plain JS): true when the header signs the body and is fresh. */
export function verifySignature(secret: string, header: string, body: string, toleranceSec = 300, now = Date.now()): boolean {
  const parts = new Map<string, string[]>();
  for (const kv of header.split(',')) {
    const i = kv.indexOf('=');
    if (i > 0) parts.set(kv.slice(0, i).trim(), [...(parts.get(kv.slice(0, i).trim()) ?? []), kv.slice(i + 1).trim()]);
  }
  const t = Number(parts.get('t')?.[0]);
  if (!Number.isInteger(t) || Math.abs(now / 1000 - t) > toleranceSec) return false;
  const want = Buffer.from(signature(secret, t, body), 'hex');
  return (parts.get('v1') ?? []).some((v) => {
    const got = Buffer.from(v, 'hex');
    return got.length === want.length && timingSafeEqual(got, want);
  });
}
