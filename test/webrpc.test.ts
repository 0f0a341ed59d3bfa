import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rpc, startTestService, type TestService, asOperator } from './support/service.ts';

let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(async () => {
  await t?.close();
});

function expectWireError(body: any, name: string, code: number, status: number) {
  expect(body).toMatchObject({ error: name, code, status });
  expect(typeof body.msg).toBe('string');
  expect(body.message).toBe(body.msg);
  expect(typeof body.cause).toBe('string');
}

describe('webrpc conventions', () => {
  it('answers Ping with {status:true} for {}, null and an empty body', async () => {
    for (const payload of ['{}', 'null', '']) {
      const res = await t.app.inject({ method: 'POST', url: '/rpc/Metadata/Ping', headers: { 'content-type': 'application/json' }, payload });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ status: true });
      expect(res.headers['content-type']).toMatch(/^application\/json/);
    }
  });

  it('puts a Webrpc header on every response, errors included', async () => {
    const ok = await rpc(t.app, '/rpc/Metadata/Ping', {});
    expect(ok.headers.webrpc).toMatch(/^webrpc@v[\d.]+;.*sequence-metadata@v0\.4\.0$/);
    const bad = await t.app.inject({ method: 'GET', url: '/rpc/Metadata/Ping' });
    expect(bad.headers.webrpc).toBeDefined();
  });

  it('refuses GET with 405 WebrpcBadMethod and Allow: POST', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/rpc/Metadata/Ping' });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('POST');
    expectWireError(res.json(), 'WebrpcBadMethod', -3, 405);
  });

  it('answers an unknown method with 404 WebrpcBadRoute naming the path', async () => {
    const res = await rpc(t.app, '/rpc/Metadata/NoSuchMethod', {});
    expect(res.status).toBe(404);
    expectWireError(res.body, 'WebrpcBadRoute', -2, 404);
    expect(res.body.cause).toContain('/rpc/Metadata/NoSuchMethod');
    const unknownService = await rpc(t.app, '/rpc/Nope/Ping', {});
    expectWireError(unknownService.body, 'WebrpcBadRoute', -2, 404);
  });

  it('rejects a non-JSON content type and a body that does not parse with 400 WebrpcBadRequest', async () => {
    const text = await t.app.inject({ method: 'POST', url: '/rpc/Metadata/Ping', headers: { 'content-type': 'text/plain' }, payload: '{}' });
    expect(text.statusCode).toBe(400);
    expectWireError(text.json(), 'WebrpcBadRequest', -4, 400);
    expect(text.json().cause).toContain('Content-Type');

    const broken = await t.app.inject({ method: 'POST', url: '/rpc/Metadata/Ping', headers: { 'content-type': 'application/json' }, payload: '{"a":' });
    expect(broken.statusCode).toBe(400);
    expectWireError(broken.json(), 'WebrpcBadRequest', -4, 400);
    expect(broken.json().cause).toContain('failed to unmarshal request data');

    const array = await t.app.inject({ method: 'POST', url: '/rpc/Metadata/Ping', headers: { 'content-type': 'application/json' }, payload: '[1,2]' });
    expectWireError(array.json(), 'WebrpcBadRequest', -4, 400);
  });

  it('accepts application/json with parameters', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/rpc/Metadata/Ping', headers: { 'content-type': 'Application/JSON; charset=utf-8' }, payload: '{}' });
    expect(res.statusCode).toBe(200);
  });

  it('keeps the error shape for a body over the size limit', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/rpc/Metadata/Ping',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ pad: 'x'.repeat(1_100_000) }),
    });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toMatchObject({ error: 'WebrpcBadRequest', code: -4 });
    expect(res.json().cause).toContain('larger than');
  });

  it('answers a CORS preflight allowing the webrpc headers', async () => {
    const res = await t.app.inject({
      method: 'OPTIONS',
      url: '/rpc/Metadata/GetTokenMetadata',
      headers: {
        origin: 'https://dapp.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type,webrpc,x-access-key,authorization',
      },
    });
    expect(res.statusCode).toBeLessThan(300);
    expect(res.headers['access-control-allow-origin']).toBe('https://dapp.example');
    const allowed = String(res.headers['access-control-allow-headers']).toLowerCase();
    for (const h of ['content-type', 'webrpc', 'x-access-key', 'authorization']) expect(allowed).toContain(h);
  });

  it('serves Version without a key', async () => {
    const res = await rpc(t.app, '/rpc/Metadata/Version', {});
    expect(res.status).toBe(200);
    expect(res.body.version).toMatchObject({ schemaVersion: 'v0.4.0', webrpcVersion: expect.any(String), appVersion: expect.stringContaining('metarelay') });
  });
});

describe('access keys on RPC', () => {
  it('refuses a key-protected method without a key: 401 Unauthorized code 1000', async () => {
    const res = await rpc(t.app, '/rpc/Metadata/RuntimeStatus', {});
    expect(res.status).toBe(401);
    expectWireError(res.body, 'Unauthorized', 1000, 401);
  });

  it('refuses an unknown key', async () => {
    const res = await rpc(t.app, '/rpc/Metadata/RuntimeStatus', {}, { 'x-access-key': 'mr_not-a-real-key' });
    expect(res.status).toBe(401);
    expectWireError(res.body, 'Unauthorized', 1000, 401);
    expect(res.body.cause).toBe('invalid access key');
  });

  it('serves a protected method with a live key, and refuses the same key once revoked', async () => {
    const { key } = await t.services.accessKeys.create(t.project.id, 'short-lived');
    const ok = await rpc(t.app, '/rpc/Metadata/RuntimeStatus', {}, { 'x-access-key': key });
    expect(ok.status).toBe(200);
    expect(ok.body.status).toMatchObject({ healthOK: true, uptime: expect.any(Number), runnable: { database: { running: true } } });
    expect(await t.services.auth.revoke(key)).toBe(true);
    const after = await rpc(t.app, '/rpc/Metadata/RuntimeStatus', {}, { 'x-access-key': key });
    expect(after.status).toBe(401);
    expectWireError(after.body, 'Unauthorized', 1000, 401);
  });

  it('checks a key sent to a public method', async () => {
    const res = await rpc(t.app, '/rpc/Metadata/Ping', {}, { 'x-access-key': 'mr_wrong' });
    expect(res.status).toBe(401);
  });

  it('counts requests per key and records last use', async () => {
    const { key, info } = await t.services.accessKeys.create(t.project.id, 'counted');
    for (let i = 0; i < 3; i++) await rpc(t.app, '/rpc/Metadata/Ping', {}, { 'x-access-key': key });
    await t.services.auth.flush();
    const listed = (await t.services.accessKeys.list(t.project.id)).find((k) => k.id === info.id)!;
    expect(listed.requestCount).toBe(3);
    expect(listed.lastUsedAt).not.toBeNull();
  });
});

describe('argument names', () => {
  it('hints at the spelling when chainId is sent for chainID', async () => {
    const r = await rpc(t.app, '/rpc/Metadata/GetContractInfo', { chainId: 'mainnet', contractAddress: '0x0000000000000000000000000000000000000001' }, { 'x-access-key': t.accessKey });
    expect(r.status).toBe(400);
    expect(r.body.cause).toMatch(/^chainID: .*\(the body has "chainId": field names are case-sensitive, send "chainID"\)/);
  });
});

describe('health, readiness and metrics', () => {
  it('GET /health answers ok', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/health' });
    expect(res.statusCode).toBe(200);
    expect(res.json().status).toBe('ok');
  });

  it('GET /ready reports the database', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/ready', headers: asOperator });
    expect(res.statusCode).toBe(200);
    expect(res.json().checks).toEqual([expect.objectContaining({ name: 'database', ok: true })]);
  });

  it('GET /metrics exposes request counters per method in Prometheus format', async () => {
    await rpc(t.app, '/rpc/Metadata/Ping', {});
    const res = await t.app.inject({ method: 'GET', url: '/metrics', headers: asOperator });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/text\/plain/);
    expect(res.body).toMatch(/metarelay_rpc_requests_total\{service="Metadata",method="Ping",code="0"\} \d+/);
    expect(res.body).toContain('metarelay_rpc_request_duration_seconds_bucket');
  });

  it('answers unknown non-RPC paths with a JSON 404 in the error shape', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/nope' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ error: 'NotFound', code: 3000 });
  });
});
