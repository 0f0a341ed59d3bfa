import type { FastifyRequest } from 'fastify';

export const SESSION_COOKIE = 'mr_console';

export function readCookie(req: FastifyRequest, name: string): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return undefined;
}

/**
 * HttpOnly keeps the secret out of the page's JavaScript; SameSite=Strict keeps other sites from
 * making the browser send it, which is what protects the console's POSTs from cross-site requests.
 */
export function sessionCookie(secret: string, maxAgeSec: number, secure: boolean): string {
  return `${SESSION_COOKIE}=${secret}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSec}${secure ? '; Secure' : ''}`;
}

export function clearedSessionCookie(secure: boolean): string {
  return sessionCookie('', 0, secure);
}
