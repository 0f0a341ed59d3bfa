// Per-request counters are tallied as plain numbers and added to prom-client when read: /metrics
// must still show every request, by route and status, and every RPC call, by method and code.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rpc, startTestService, type TestService, asOperator } from './support/service.ts';
import { TEST_DB } from './support/env.ts';

let t: TestService;
beforeAll(async () => {
  t = await startTestService({ auth: { rpc: 'required', rest: 'optional' } });
});
afterAll(() => t?.close());

async function metricsText(): Promise<string> {
  return (await t.app.inject({ method: 'GET', url: '/metrics', headers: asOperator })).body;
}

function value(text: string, name: string, labels: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && labels.split(',').every((kv) => l.includes(kv)));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

describe(`request metrics (${TEST_DB})`, () => {
  it('counts every request and RPC call, read after read', async () => {
    for (let i = 0; i < 3; i++) expect((await t.app.inject({ method: 'GET', url: '/health' })).statusCode).toBe(200);
    for (let i = 0; i < 2; i++) expect((await rpc(t.app, '/rpc/Metadata/Ping', {})).status).toBe(200);
    expect((await rpc(t.app, '/rpc/Metadata/GetTokenMetadata', { chainID: 'anvil' })).status).toBe(401);
    const first = await metricsText();
    expect(value(first, 'metarelay_http_requests_total', 'route="/health",status="200"')).toBe(3);
    expect(value(first, 'metarelay_rpc_requests_total', 'service="Metadata",method="Ping",code="0"')).toBe(2);
    expect(value(first, 'metarelay_rpc_requests_total', 'method="GetTokenMetadata",code="1000"')).toBe(1);
    expect(value(first, 'metarelay_rpc_request_duration_seconds_count', 'method="Ping"')).toBe(2);

    // Counted again after a read: nothing is lost or counted twice across reads.
    expect((await t.app.inject({ method: 'GET', url: '/health' })).statusCode).toBe(200);
    const second = await metricsText();
    expect(value(second, 'metarelay_http_requests_total', 'route="/health",status="200"')).toBe(4);
    expect(value(second, 'metarelay_rpc_requests_total', 'service="Metadata",method="Ping",code="0"')).toBe(2);
    // The /metrics read itself was counted when answered, so the second read shows the first.
    expect(value(second, 'metarelay_http_requests_total', 'route="/metrics",status="200"')).toBe(1);
  });
});
