import type { FastifyRequest } from 'fastify';
import { MetadataErrors, type RpcContext, RpcError, readAccessKey, readBearer } from '../http/index.ts';
import type { AdminTokenStore } from '../access/admin-tokens.ts';
import { SESSION_COOKIE, readCookie } from './cookie.ts';
import type { SessionStore } from './sessions.ts';

/** Methods that answer before sign-in: signing in and out, and asking whether one is signed in. */
export const OPEN_METHODS = new Set(['SignIn', 'SignOut', 'Session']);

/**
 * Lets a console call through with an admin session cookie, or an admin bearer token (scripts).
 * A project access key is never enough: it gets PermissionDenied, and nobody gets data unsigned.
 */
export function consoleAccess(sessions: SessionStore, tokens: AdminTokenStore) {
  return async (ctx: RpcContext): Promise<void> => {
    if (OPEN_METHODS.has(ctx.params.method)) return;
    await admitConsoleRequest(sessions, tokens, ctx.request);
  };
}

/** The console's rule for any of its requests (its API, its uploads): an admin session cookie or an admin bearer token. */
export async function admitConsoleRequest(sessions: SessionStore, tokens: AdminTokenStore, request: FastifyRequest): Promise<void> {
  const bearer = readBearer(request);
  if (bearer !== undefined) {
    if (await tokens.verify(bearer)) return;
    throw new RpcError(MetadataErrors.Unauthorized, 'invalid admin token');
  }
  const state = await sessions.check(readCookie(request, SESSION_COOKIE));
  if (state === 'valid') return;
  if (state === 'expired') throw new RpcError(MetadataErrors.SessionExpired, 'the console session has expired: sign in again');
  if (readAccessKey(request, false)) throw new RpcError(MetadataErrors.PermissionDenied, 'a project access key cannot use the console API');
  throw new RpcError(MetadataErrors.Unauthorized, 'sign in to the console, or send Authorization: Bearer <admin token>');
}
