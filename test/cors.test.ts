// CORS on every route (src/http/core/cors.ts): the caller's origin reflected with Vary: Origin, the
// headers a browser client reads exposed, preflights answered for any path and refused (400)
// when they are not one. The webrpc preflight with its headers is in webrpc.test.ts.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rpc, startTestService, type TestService } from './support/service.ts';
import { TEST_DB } from './support/env.ts';

let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(() => t?.close());

describe(`CORS (${TEST_DB})`, () => {
  it('reflects the origin on answers and refusals, and exposes Webrpc, ETag and Retry-After', async () => {
    for (const res of [
      await t.app.inject({ method: 'GET', url: '/health', headers: { origin: 'https://dapp.example' } }),
      await t.app.inject({ method: 'POST', url: '/rpc/Metadata/GetTokenMetadata', headers: { origin: 'https://dapp.example', 'content-type': 'application/json' }, payload: '{}' }),
      await t.app.inject({ method: 'GET', url: '/nothing-here', headers: { origin: 'https://dapp.example' } }),
    ]) {
      expect(res.headers['access-control-allow-origin']).toBe('https://dapp.example');
      expect(res.headers.vary).toBe('Origin');
      expect(String(res.headers['access-control-expose-headers'])).toBe('Webrpc, ETag, Retry-After');
    }
  });

  it('sends no Allow-Origin without an Origin, but still Vary: Origin', async () => {
    const res = await rpc(t.app, '/rpc/Metadata/Ping', {});
    expect(res.status).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    expect(res.headers.vary).toBe('Origin');
  });

  it('answers a preflight on any path with 204 and its limits, and refuses one without origin or method', async () => {
    const ok = await t.app.inject({ method: 'OPTIONS', url: '/tokens/1/0xabc/1', headers: { origin: 'https://a.example', 'access-control-request-method': 'GET' } });
    expect(ok.statusCode).toBe(204);
    expect(ok.headers['access-control-allow-origin']).toBe('https://a.example');
    expect(ok.headers['access-control-allow-methods']).toBe('GET, POST, PUT, OPTIONS');
    expect(ok.headers['access-control-max-age']).toBe('86400');
    expect(ok.body).toBe('');
    const noMethod = await t.app.inject({ method: 'OPTIONS', url: '/health', headers: { origin: 'https://a.example' } });
    expect(noMethod.statusCode).toBe(400);
    expect(noMethod.body).toBe('Invalid Preflight Request');
    const noOrigin = await t.app.inject({ method: 'OPTIONS', url: '/health', headers: { 'access-control-request-method': 'GET' } });
    expect(noOrigin.statusCode).toBe(400);
  });
});
