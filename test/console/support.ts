// Console API helpers: calls as the page makes them (JSON POSTs, the session cookie) or as a script does (bearer token).
import type { FastifyInstance } from 'fastify';
import { rpc } from '../support/service.ts';

export type Call = (method: string, body?: unknown, headers?: Record<string, string>) => Promise<{ status: number; headers: Record<string, unknown>; body: any }>;

export function consoleClient(app: FastifyInstance): Call {
  return (method, body = {}, headers = {}) => rpc(app, `/rpc/Console/${method}`, body, headers) as ReturnType<Call>;
}

/** Signs in with an admin token; returns the Cookie header to send and the Set-Cookie seen. */
export async function signIn(call: Call, token: string): Promise<{ cookie: string; setCookie: string }> {
  const r = await call('SignIn', { token });
  if (r.status !== 200) throw new Error(`SignIn failed: ${JSON.stringify(r.body)}`);
  const setCookie = String(r.headers['set-cookie']);
  return { cookie: setCookie.split(';')[0], setCookie };
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
