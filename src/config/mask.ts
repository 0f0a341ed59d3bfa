import type { Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { AppConfig } from './schema.ts';

const MASK = '[redacted]';

/**
 * Credentials a URL can carry: the password of user:password@, query values, and path segments
 * that look like an API key (RPC providers put theirs in the path: /v2/<key>, /v3/<key>).
 */
export function maskUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return raw.includes('@') ? MASK : raw;
  }
  if (u.password) u.password = 'redacted';
  for (const k of [...u.searchParams.keys()]) u.searchParams.set(k, 'redacted');
  u.pathname = u.pathname
    .split('/')
    .map((seg) => (/^[A-Za-z0-9_-]{20,}$/.test(seg) && /\d/.test(seg) && /[A-Za-z]/.test(seg) ? 'redacted' : seg))
    .join('/');
  return u.toString();
}

/** The effective config with every secret masked: what `metarelay config --print` shows. */
export function maskedConfig(config: AppConfig): unknown {
  const copy = structuredClone(config) as Record<string, any>;
  copy.database = maskUrl(copy.database);
  copy.ipfsGateways = copy.ipfsGateways.map(maskUrl);
  copy.arweaveGateway = maskUrl(copy.arweaveGateway);
  copy.admin.tokens = copy.admin.tokens.map(() => MASK);
  if (copy.relayer.quoteSecret !== undefined) copy.relayer.quoteSecret = MASK;
  for (const c of copy.chains) {
    c.rpcUrls = c.rpcUrls.map(maskUrl);
    if (!c.relayer) continue;
    // The address a key signs as tells an operator which key was loaded, and is public anyway.
    c.relayer.senderKeys = c.relayer.senderKeys.map((k: string) => `${MASK} (sender ${privateKeyToAccount(k as Hex).address})`);
    if (c.relayer.senderMnemonic !== undefined) c.relayer.senderMnemonic = MASK;
    if (c.relayer.refill) c.relayer.refill.treasuryKey = `${MASK} (treasury ${privateKeyToAccount(c.relayer.refill.treasuryKey as Hex).address})`;
  }
  return copy;
}
