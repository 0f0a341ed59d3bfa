import { z } from 'zod';
import { MetadataErrors, type MethodDef, NoArgs, RpcError, clientAddress, method, readBearer } from '../../http/index.ts';
import { SESSION_COOKIE, clearedSessionCookie, readCookie, sessionCookie } from '../cookie.ts';
import type { ConsoleDeps } from '../deps.ts';
import type { Services } from '../../services.ts';

/** What the session methods read: the console's config. */
export type SessionServices = Pick<Services, 'config'>;
import { SignInThrottle } from '../sign-in-throttle.ts';

export function sessionMethods({ s, sessions, tokens }: ConsoleDeps<SessionServices>): Record<string, MethodDef<any>> {
  const { sessionTtlSec, secureCookie } = s.config.console;
  const throttle = new SignInThrottle();
  return {
    SignIn: method({
      input: z.object({ token: z.string().min(1).max(200) }),
      handler: async (a, ctx) => {
        const ip = clientAddress(ctx.request.ip, s.config.clientIpv6Prefix);
        const wait = throttle.retryAfterSec(ip);
        if (wait > 0) throw new RpcError(MetadataErrors.RateLimited, `too many failed sign-ins from this address; retry in ${wait}s`, { 'Retry-After': String(wait) });
        if (!(await tokens.verify(a.token))) {
          throttle.fail(ip);
          throw new RpcError(MetadataErrors.Unauthorized, 'invalid admin token');
        }
        const { secret, expiresAt } = await sessions.create(a.token);
        ctx.reply.header('Set-Cookie', sessionCookie(secret, sessionTtlSec, secureCookie));
        return { ok: true, expiresAt: expiresAt.toISOString() };
      },
    }),
    SignOut: method({
      input: NoArgs,
      handler: async (_a, ctx) => {
        await sessions.end(readCookie(ctx.request, SESSION_COOKIE));
        ctx.reply.header('Set-Cookie', clearedSessionCookie(secureCookie));
        return { ok: true };
      },
    }),
    /**
     * Ends every console session signed in with the caller's admin token (this browser's included): for
     * a cookie that may have leaked, or a shared machine left signed in.
     */
    SignOutEverywhere: method({
      input: NoArgs,
      handler: async (_a, ctx) => {
        const ended = await sessions.endEverywhere({ session: readCookie(ctx.request, SESSION_COOKIE), adminToken: readBearer(ctx.request) });
        ctx.reply.header('Set-Cookie', clearedSessionCookie(secureCookie));
        return { ok: true, ended };
      },
    }),
    Session: method({
      input: NoArgs,
      handler: async (_a, ctx) => ({ state: await sessions.check(readCookie(ctx.request, SESSION_COOKIE)) }),
    }),
  };
}
