import type { FastifyRequest } from 'fastify';

// The Authenticator lives in src/access (the wiring builds it without the HTTP layer); re-exported
// here for code that still imports it from its old place.
export { Authenticator, type AuthOutcome } from '../../access/authenticator.ts';

export function readAccessKey(req: FastifyRequest, allowQuery: boolean): string | undefined {
  return pickAccessKey(req.headers['x-access-key'], allowQuery ? (req.query as Record<string, unknown> | undefined)?.accessKey : undefined);
}

/**
 * The key a request carries: the X-Access-Key header, else `?accessKey=` (where the route takes it).
 * A query key given twice parses as an array and is no key, as a malformed one would be.
 */
export function pickAccessKey(header: string | string[] | undefined, query: unknown): string | undefined {
  const fromHeader = Array.isArray(header) ? header[0] : header;
  if (fromHeader?.trim()) return fromHeader.trim();
  if (typeof query === 'string' && query.trim()) return query.trim();
  return undefined;
}

/** `Authorization: Bearer <token>` (any case of "bearer"), or undefined. */
export function readBearer(req: FastifyRequest): string | undefined {
  const h = req.headers.authorization;
  const m = typeof h === 'string' ? /^bearer\s+(.+)$/i.exec(h.trim()) : null;
  return m ? m[1].trim() : undefined;
}
