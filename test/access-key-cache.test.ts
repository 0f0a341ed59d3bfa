// Access keys are resolved from an in-process cache (auth.keyCacheMs), so a busy key costs no query
// per request. The bound that buys: a key revoked by another process (straight in the database,
// this process not told) stops working within keyCacheMs, on RPC and REST alike; one revoked
// through this process stops at once.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessKeyRepo } from '../src/store/access-keys.ts';
import { rpc, startTestService, type TestService } from './support/service.ts';
import { getRest } from './support/token-chain.ts';
import { TEST_DB } from './support/env.ts';

const TTL_MS = 1_500;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let t: TestService;

beforeAll(async () => {
  t = await startTestService({ auth: { rpc: 'required', rest: 'required', keyCacheMs: TTL_MS } });
});
afterAll(() => t?.close());

// The chain is unknown on purpose: a live key gets past the access check to the method's own
// refusal (not 401), a revoked one is refused before it.
const rpcCall = (key: string) => rpc(t.app, '/rpc/Metadata/GetTokenMetadata', { chainID: 'nochain', contractAddress: `0x${'1'.repeat(40)}`, tokenIDs: ['1'] }, { 'x-access-key': key });
const restCall = (key: string) => getRest(t, `/tokens/nochain/0x${'1'.repeat(40)}/1?accessKey=${key}`);

describe(`access key cache (${TEST_DB})`, () => {
  it('a key revoked by another process is refused within keyCacheMs, and served from the cache until then', async () => {
    const { key } = await t.services.accessKeys.create(t.project.id, 'elsewhere');
    expect((await rpcCall(key)).status).not.toBe(401);
    expect((await restCall(key)).status).not.toBe(401);

    // Another process revokes it: the database changes, this process's cache is not told.
    const revokedAt = Date.now();
    expect(await accessKeyRepo(t.testDb.db).revoke(key)).toBe(true);
    const soon = await rpcCall(key);
    // Still cached here, unless the machine was so slow the entry already aged out.
    if (Date.now() - revokedAt < TTL_MS / 2) expect(soon.status).not.toBe(401);

    let refusedAfter = -1;
    while (Date.now() - revokedAt < TTL_MS + 5_000) {
      const r = await rpcCall(key);
      if (r.status === 401) {
        refusedAfter = Date.now() - revokedAt;
        expect(r.body).toMatchObject({ error: 'Unauthorized', cause: 'invalid access key' });
        break;
      }
      await sleep(100);
    }
    expect(refusedAfter).toBeGreaterThanOrEqual(0);
    // Within the TTL; the slack is for the poll interval and a loaded machine, not the cache.
    expect(refusedAfter).toBeLessThanOrEqual(TTL_MS + 1_000);
    const rest = await restCall(key);
    expect(rest.status).toBe(401);
  });

  it('a key revoked through this process is refused at once', async () => {
    const { key } = await t.services.accessKeys.create(t.project.id, 'here');
    expect((await rpcCall(key)).status).not.toBe(401);
    expect((await restCall(key)).status).not.toBe(401);
    expect(await t.services.auth.revoke(key)).toBe(true);
    expect((await rpcCall(key)).status).toBe(401);
    expect((await restCall(key)).status).toBe(401);
  });
});
