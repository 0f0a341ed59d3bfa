import { causes } from './error.ts';

/**
 * An error in one line an operator can act on: the outer message's first line (viem's short message),
 * what the node answered (an HTTP status), and the innermost cause that names the fault (`connect
 * ECONNREFUSED 10.0.0.7:8545`, `other side closed`). viem's own message for a dead node is only
 * "HTTP request failed.", with the reason two causes down.
 */
export function causeOf(err: unknown): string {
  const e = err as { shortMessage?: unknown; message?: unknown; status?: unknown; cause?: unknown } | undefined;
  if (!e || typeof e !== 'object') return String(err);
  const top = firstLine(typeof e.shortMessage === 'string' ? e.shortMessage : typeof e.message === 'string' ? e.message : String(err));
  const chain = [...causes(err)];
  // The first status any of them gives (viem's HttpRequestError is one or two down), and the innermost.
  const status = chain.find((c) => c.status !== undefined && c.status !== null)?.status;
  const inner = chain.at(-1)!;
  const parts = [top.replace(/\.$/, '')];
  if (typeof status === 'number') parts.push(`HTTP ${status}`);
  if (inner !== e) {
    const msg = typeof inner.message === 'string' ? firstLine(inner.message) : '';
    const code = typeof inner.code === 'string' && !msg.includes(inner.code) ? `${inner.code} ` : '';
    if (code || msg) parts.push(`${code}${msg}`.trim());
  }
  return parts.join(': ');
}

const firstLine = (s: string) => s.split('\n')[0].trim();
