// The response cache in front of token metadata reads (RPC GetTokenMetadata / GetTokenMetadataBatch
// and REST /tokens/<net>/<contract>/<ids>): a repeated read is answered whole, but only after the
// access check, only to the caller that produced the answer, never past the hot cache's TTL or the
// moment a token turns stale, never once a token was re-resolved here, and never for an answer that
// holds an error, a NOT_AVAILABLE or a REFRESHING token.

import { request } from 'node:http';
import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOriginServer, type OriginServer } from '../src/devchain/index.ts';
import type { Services } from '../src/services.ts';
import { rpc, startTestService, type TestService } from './support/service.ts';
import { eventually, getRest, secondProcess, startTokenChain, type TokenChain, type WireToken } from './support/token-chain.ts';

let chain: TokenChain;
let origin: OriginServer;
let t: TestService;
let tt: Address; // TestTokenURI: ids 1-6 on the origin, 8 on a slow path; any other id reverts
let other: Address; // a second TestTokenURI, for the batch form

const IDS = ['1', '2', '3', '4', '5', '6'];
// A long hot-cache TTL: whatever is seen to change within a test changed because the cache was
// invalidated, not because an entry aged out.
const METADATA = { hotCacheTtlMs: 60_000, inlineWaitMs: 2_000, fetchTimeoutMs: 10_000 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let base: string; // the service listening on a socket: REST repeats are answered there before routing

beforeAll(async () => {
  [chain, origin] = await Promise.all([startTokenChain(), startOriginServer()]);
  for (const id of IDS) origin.setDocument(`/rc/${id}`, { name: `token ${id}` });
  origin.setDocument('/other/1', { name: 'other 1' });
  origin.setDocument('/rc/8', { name: 'token 8 slow' }, { delayMs: METADATA.inlineWaitMs + 1_500 });
  [tt, other] = await chain.deploy([{ contract: 'TestTokenURI' }, { contract: 'TestTokenURI' }]);
  await chain.send([
    ...IDS.map((id) => ({ address: tt, contract: 'TestTokenURI', functionName: 'setTokenURI', args: [BigInt(id), `${origin.url}/rc/${id}`] })),
    { address: tt, contract: 'TestTokenURI', functionName: 'setTokenURI', args: [8n, `${origin.url}/rc/8`] },
    { address: other, contract: 'TestTokenURI', functionName: 'setTokenURI', args: [1n, `${origin.url}/other/1`] },
  ]);
  t = await startTestService({ chains: [chain.chainConfig], metadata: METADATA });
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  // Resolve everything once, so the tests below read settled tokens.
  await eventually(
    () => rpc(t.app, '/rpc/Metadata/GetTokenMetadata', { chainID: 'anvil', contractAddress: tt, tokenIDs: IDS }, { 'x-access-key': t.accessKey }),
    (r) => expect((r.body.tokenMetadata as WireToken[]).map((x) => x.status)).toEqual(IDS.map(() => 'AVAILABLE')),
  );
});

afterAll(async () => {
  await t?.close();
  await Promise.all([chain?.stop(), origin?.stop()]);
});

/** Token lookups by where they were answered from: hot, store, stale, miss, response. */
async function lookups(s: Services): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const v of (await s.metrics.metadataCache.get()).values) out[String(v.labels.result)] = v.value;
  return out;
}

/** How many token answers came from the response cache, and how many were assembled, during `fn`. */
async function served<T>(s: Services, fn: () => Promise<T>): Promise<{ value: T; reused: number; assembled: number }> {
  const before = await lookups(s);
  const value = await fn();
  const after = await lookups(s);
  const d = (k: string) => (after[k] ?? 0) - (before[k] ?? 0);
  return { value, reused: d('response'), assembled: d('hot') + d('store') + d('stale') + d('miss') };
}

const getTokens = (app: TestService['app'], key: string | undefined, contract: Address, tokenIDs: string[]) =>
  rpc(app, '/rpc/Metadata/GetTokenMetadata', { chainID: 'anvil', contractAddress: contract, tokenIDs }, key ? { 'x-access-key': key } : {});

type Get = (url: string, headers?: Record<string, string>) => Promise<{ status: number; headers: Record<string, unknown>; text: string; body: any }>;
/** Through fastify's inject: every request is routed, a repeat is answered by the route's hooks. */
const routed: Get = (url, headers) => getRest(t, url, headers);
/** Over a real socket: a repeat the caller may have now is answered before routing (http/core/early-answers.ts). */
const overSocket: Get = async (url, headers = {}) => {
  const res = await fetch(`${base}${url}`, { headers });
  const text = await res.text();
  return { status: res.status, headers: Object.fromEntries(res.headers), text, body: text ? JSON.parse(text) : undefined };
};
const TRANSPORTS: Array<[string, () => Get]> = [
  ['routed', () => routed],
  ['over a socket', () => overSocket],
];

/** fastify's inject over a real socket, for `rpc` and the tests that inject: repeats are answered before routing. */
const socketApp = {
  async inject(o: { method: string; url: string; headers?: Record<string, string>; payload?: string }) {
    const res = await fetch(`${base}${o.url}`, { method: o.method, headers: o.headers, body: o.payload });
    return { statusCode: res.status, headers: Object.fromEntries(res.headers), body: await res.text() };
  },
} as unknown as TestService['app'];
const RPC_TRANSPORTS: Array<[string, () => TestService['app']]> = [
  ['routed', () => t.app],
  ['over a socket', () => socketApp],
];

const names = (body: { tokenMetadata: WireToken[] }) => body.tokenMetadata.map((x) => x.name);

async function newKey(): Promise<string> {
  return (await t.services.accessKeys.create(t.project.id, 'rc')).key;
}

describe.each(RPC_TRANSPORTS)('RPC GetTokenMetadata (%s)', (transport, app) => {
  it('answers a repeat from the cache with the same bytes, to the same key only', async () => {
    const keyA = await newKey();
    const otherProject = await t.services.projects.create(`rc-other-${transport}`);
    const keyB = (await t.services.accessKeys.create(otherProject.id, 'b')).key;

    const first = await served(t.services, () => getTokens(app(), keyA, tt, ['1', '2']));
    expect(first.value.status).toBe(200);
    expect(names(first.value.body)).toEqual(['token 1', 'token 2']);
    expect(first.assembled).toBe(2);

    const again = await served(t.services, () => getTokens(app(), keyA, tt, ['1', '2']));
    expect(again.value.body).toEqual(first.value.body);
    expect(again.value.headers['content-type']).toBe(first.value.headers['content-type']);
    expect(again).toMatchObject({ reused: 2, assembled: 0 });

    // The same body from another project's key is assembled for that key, not given A's answer.
    const fromB = await served(t.services, () => getTokens(app(), keyB, tt, ['1', '2']));
    expect(fromB.value.body).toEqual(first.value.body);
    expect(fromB).toMatchObject({ reused: 0, assembled: 2 });
    const bAgain = await served(t.services, () => getTokens(app(), keyB, tt, ['1', '2']));
    expect(bAgain).toMatchObject({ reused: 2, assembled: 0 });

    // Another key of the same project is another caller too.
    const keyA2 = await newKey();
    const fromA2 = await served(t.services, () => getTokens(app(), keyA2, tt, ['1', '2']));
    expect(fromA2).toMatchObject({ reused: 0, assembled: 2 });
  });

  it('checks the key before any lookup: no key, an unknown key and a revoked key are refused', async () => {
    const key = await newKey();
    expect((await getTokens(app(), key, tt, ['3'])).status).toBe(200);
    expect((await served(t.services, () => getTokens(app(), key, tt, ['3']))).reused).toBe(1);

    const none = await getTokens(app(), undefined, tt, ['3']);
    expect(none.status).toBe(401);
    expect(none.body).toMatchObject({ error: 'Unauthorized', code: 1000 });
    const unknown = await getTokens(app(), 'mr_not-a-real-key', tt, ['3']);
    expect(unknown.status).toBe(401);
    expect(unknown.body.cause).toBe('invalid access key');

    expect(await t.services.auth.revoke(key)).toBe(true);
    const revoked = await served(t.services, () => getTokens(app(), key, tt, ['3']));
    expect(revoked.value.status).toBe(401);
    expect(revoked.value.body).toMatchObject({ error: 'Unauthorized', code: 1000, cause: 'invalid access key' });
    expect(revoked).toMatchObject({ reused: 0, assembled: 0 });
  });

  it('a bad body is still WebrpcBadRequest, never a cached answer', async () => {
    const key = await newKey();
    const body = JSON.stringify({ chainID: 'anvil', contractAddress: tt, tokenIDs: ['4'] });
    const send = (payload: string, contentType = 'application/json') =>
      app().inject({ method: 'POST', url: '/rpc/Metadata/GetTokenMetadata', headers: { 'content-type': contentType, 'x-access-key': key }, payload });
    expect((await send(body)).statusCode).toBe(200);
    expect((await send(body)).statusCode).toBe(200);
    // The very bytes of a cached request, declared as another type, are refused as before.
    const wrongType = await send(body, 'text/plain');
    expect(wrongType.statusCode).toBe(400);
    expect(JSON.parse(wrongType.body)).toMatchObject({ error: 'WebrpcBadRequest' });
    const broken = await send(body.slice(0, -1));
    expect(broken.statusCode).toBe(400);
    expect(JSON.parse(broken.body)).toMatchObject({ error: 'WebrpcBadRequest' });
  });

  it('shows a token re-resolved in this process at once, well within the TTL', async () => {
    const key = await newKey();
    const before = names((await getTokens(app(), key, tt, ['4', '5'])).body);
    expect(before[1]).toBe('token 5');
    expect((await served(t.services, () => getTokens(app(), key, tt, ['4', '5']))).reused).toBe(2);

    origin.setDocument('/rc/4', { name: `token 4 ${transport}` });
    // What the refresh worker runs for a task (and RefreshTokenMetadata leads to).
    await t.services.tokens.refresh(t.services.chains.get(chain.anvil.chainId)!, tt.toLowerCase() as Address, ['4']);

    const after = await served(t.services, () => getTokens(app(), key, tt, ['4', '5']));
    expect(names(after.value.body)).toEqual([`token 4 ${transport}`, 'token 5']);
    expect(after.reused).toBe(0);
  });

  it('never keeps an answer holding a NOT_AVAILABLE token, an error, or a token still resolving', async () => {
    const key = await newKey();
    const cache = t.services.responses;

    // Id 77 has no URI: the contract reverts, the token is NOT_AVAILABLE (and not retried for a while).
    const mixed = await getTokens(app(), key, tt, ['1', '77']);
    expect(mixed.body.tokenMetadata.map((x: WireToken) => x.failureReason ?? x.status)).toEqual(['AVAILABLE', 'TOKEN_NOT_FOUND']);
    const size = cache.size;
    for (let i = 0; i < 3; i++) {
      const r = await served(t.services, () => getTokens(app(), key, tt, ['1', '77']));
      expect(r.value.body).toEqual(mixed.body);
      expect(r).toMatchObject({ reused: 0, assembled: 2 });
    }
    expect(cache.size).toBe(size);

    // Errors.
    for (let i = 0; i < 2; i++) {
      const bad = await rpc(app(), '/rpc/Metadata/GetTokenMetadata', { chainID: 'nosuchnet', contractAddress: tt, tokenIDs: ['1'] }, { 'x-access-key': key });
      expect(bad.status).toBe(400);
      expect(bad.body).toMatchObject({ error: 'ChainNotFound' });
      const badId = await getTokens(app(), key, tt, ['1', 'x']);
      expect(badId.status).toBe(400);
    }
    expect(cache.size).toBe(size);
  });
});

describe('RPC GetTokenMetadata of a token still resolving', () => {
  it('never keeps the NOT_AVAILABLE answer: AVAILABLE as soon as it resolves, over a socket too', async () => {
    const key = await newKey();
    const cache = t.services.responses;
    const size = cache.size;
    // A token whose origin answers later than inlineWaitMs: NOT_AVAILABLE while it resolves, then
    // AVAILABLE, long before the hot cache's TTL would have let a cached NOT_AVAILABLE go.
    const pending = await getTokens(t.app, key, tt, ['8']);
    expect(pending.body.tokenMetadata[0]).toMatchObject({ status: 'NOT_AVAILABLE', queuedAt: expect.any(String) });
    expect(cache.size).toBe(size);
    await eventually(
      () => getTokens(socketApp, key, tt, ['8']),
      (r) => expect(r.body.tokenMetadata[0]).toMatchObject({ status: 'AVAILABLE', name: 'token 8 slow' }),
      15_000,
    );
  });
});

describe.each(RPC_TRANSPORTS)('RPC GetTokenMetadataBatch (%s)', (transport, app) => {
  it('answers a repeat from the cache, and shows a re-resolved token of either contract at once', async () => {
    const key = await newKey();
    const batch = (k: string) => rpc(app(), '/rpc/Metadata/GetTokenMetadataBatch', { chainID: 'anvil', contractTokenMap: { [tt]: ['2'], [other]: ['1'] } }, { 'x-access-key': k });
    const nameOf = (body: { contractTokenMetadata: Record<string, WireToken[]> }) =>
      Object.values(body.contractTokenMetadata)
        .flatMap((l) => l.map((x) => x.name))
        .sort();
    await eventually(
      () => batch(key),
      (r) => expect(nameOf(r.body)[1]).toEqual('token 2'),
    );
    const first = await batch(key);
    const again = await served(t.services, () => batch(key));
    expect(again.value.body).toEqual(first.body);
    expect(again).toMatchObject({ reused: 2, assembled: 0 });

    origin.setDocument('/other/1', { name: `other 1 ${transport}` });
    await t.services.tokens.refresh(t.services.chains.get(chain.anvil.chainId)!, other.toLowerCase() as Address, ['1']);
    const after = await served(t.services, () => batch(key));
    expect(nameOf(after.value.body)).toEqual([`other 1 ${transport}`, 'token 2']);
    expect(after.reused).toBe(0);
  });
});

describe.each(TRANSPORTS)('one access check before the cache, for REST and RPC alike (%s)', (transport, get) => {
  const app = () => (transport === 'routed' ? t.app : socketApp);
  it('refuses a cached request once the project loses the network, and once the key is over its rate limit', async () => {
    const project = await t.services.projects.create(`rc-held-${transport}`);
    const { key } = await t.services.accessKeys.create(project.id, 'held');
    const url = `/tokens/anvil/${tt}/1`;
    const rest = () => get()(url, { 'x-access-key': key });
    for (let i = 0; i < 2; i++) {
      expect((await getTokens(app(), key, tt, ['1'])).status).toBe(200);
      expect((await rest()).status).toBe(200);
    }
    expect((await served(t.services, () => getTokens(app(), key, tt, ['1']))).reused).toBe(1);
    expect((await served(t.services, () => rest())).reused).toBe(1);

    // Held to mainnet only: the very requests whose answers are cached are refused, nothing reused.
    await t.services.db.query('UPDATE projects SET allowed_chain_ids = $2 WHERE id = $1', [project.id, [1]]);
    t.services.auth.forgetAll();
    const rpcHeld = await served(t.services, () => getTokens(app(), key, tt, ['1']));
    expect(rpcHeld.value.status).toBe(403);
    expect(rpcHeld.value.body).toMatchObject({ error: 'PermissionDenied' });
    const restHeld = await served(t.services, () => rest());
    expect(restHeld.value.status).toBe(403);
    expect(rpcHeld.reused + restHeld.reused).toBe(0);

    // Allowed again, with a bucket of one: the first request (a cache hit) spends it, the next is refused.
    await t.services.db.query('UPDATE projects SET allowed_chain_ids = NULL WHERE id = $1', [project.id]);
    await t.services.db.query('UPDATE access_keys SET rate_per_sec = 0.01, rate_burst = 1 WHERE project_id = $1', [project.id]);
    t.services.auth.forgetAll();
    const spent = await served(t.services, () => rest());
    expect(spent.value.status).toBe(200);
    expect(spent.reused).toBe(1);
    const limited = await served(t.services, () => getTokens(app(), key, tt, ['1']));
    expect(limited.value.status).toBe(429);
    expect(limited.value.body).toMatchObject({ error: 'RateLimited' });
    expect(limited.reused).toBe(0);
  });
});

describe.each(TRANSPORTS)('REST /tokens (%s)', (_transport, get) => {
  it('answers a repeat from the cache with the same body and ETag, and 304 on If-None-Match', async () => {
    const url = `/tokens/anvil/${tt}/2,3`;
    const first = await get()(url);
    expect(first.status).toBe(200);
    const again = await served(t.services, () => get()(url));
    expect(again).toMatchObject({ reused: 2, assembled: 0 });
    expect(again.value.text).toBe(first.text);
    expect(again.value.headers.etag).toBe(first.headers.etag);
    expect(again.value.headers['cache-control']).toBe(first.headers['cache-control']);
    expect(again.value.headers['content-type']).toBe(first.headers['content-type']);
    const notModified = await get()(url, { 'if-none-match': String(first.headers.etag) });
    expect(notModified.status).toBe(304);
    expect(notModified.text).toBe('');
  });

  it('keys answers by caller, and refuses a revoked key before any lookup', async () => {
    const key = await newKey();
    const url = `/tokens/anvil/${tt}/5,6`;
    const anon = await get()(url);
    expect(anon.status).toBe(200);
    // The same URL with a key in the header is that key's answer, assembled for it.
    const withKey = await served(t.services, () => get()(url, { 'x-access-key': key }));
    expect(withKey).toMatchObject({ reused: 0, assembled: 2 });
    expect(withKey.value.text).toBe(anon.text);
    expect((await served(t.services, () => get()(url, { 'x-access-key': key }))).reused).toBe(2);

    expect(await t.services.auth.revoke(key)).toBe(true);
    const revoked = await get()(url, { 'x-access-key': key });
    expect(revoked.status).toBe(401);
    expect(revoked.body).toMatchObject({ error: 'Unauthorized', cause: 'invalid access key' });
    const inQuery = await get()(`${url}?accessKey=${key}`);
    expect(inQuery.status).toBe(401);
  });

  it('never keeps an answer holding a NOT_AVAILABLE token, and shows a re-resolved token at once', async () => {
    const url = `/tokens/anvil/${tt}/3,78`;
    const first = await get()(url);
    expect(first.body.map((x: WireToken) => x.failureReason ?? x.status)).toEqual(['AVAILABLE', 'TOKEN_NOT_FOUND']);
    expect(first.headers['cache-control']).toBe('public, max-age=5');
    const again = await served(t.services, () => get()(url));
    expect(again).toMatchObject({ reused: 0, assembled: 2 });

    const url3 = `/tokens/anvil/${tt}/3`;
    await get()(url3);
    expect((await served(t.services, () => get()(url3))).reused).toBe(1);
    origin.setDocument('/rc/3', { name: 'token 3 v2' });
    await t.services.tokens.refresh(t.services.chains.get(chain.anvil.chainId)!, tt.toLowerCase() as Address, ['3']);
    const after = await get()(url3);
    expect(after.body[0].name).toBe('token 3 v2');
    expect(after.headers.etag).not.toBe(first.headers.etag);
  });
});

describe('REST repeats answered before routing', () => {
  /** Headers of an answer, without those of the connection and the clock. */
  const stable = (h: Record<string, unknown>) => Object.fromEntries(Object.entries(h).filter(([k]) => !['date', 'connection', 'keep-alive'].includes(k)));

  it('sends what the route sends: same status, bytes and headers, for 200 and 304, with and without an Origin', async () => {
    const url = `/tokens/anvil/${tt}/4`;
    for (const origin of [undefined, 'https://app.example']) {
      const key = await newKey();
      const h: Record<string, string> = { 'x-access-key': key, ...(origin ? { origin } : {}) };
      const first = await served(t.services, () => overSocket(url, h));
      expect(first).toMatchObject({ reused: 0, assembled: 1 }); // a new caller: the route answered
      const again = await served(t.services, () => overSocket(url, h));
      expect(again.reused).toBe(1);
      expect(again.value.status).toBe(200);
      expect(again.value.text).toBe(first.value.text);
      expect(stable(again.value.headers)).toEqual(stable(first.value.headers));
      if (origin) expect(again.value.headers['access-control-allow-origin']).toBe(origin);

      const etag = String(first.value.headers.etag);
      const otherKey = await newKey();
      const h304 = { ...h, 'x-access-key': otherKey, 'if-none-match': etag };
      const routed304 = await served(t.services, () => overSocket(url, h304));
      expect(routed304).toMatchObject({ reused: 0, assembled: 1 });
      // A 304 is not kept; this key's 200 is, and then the key's If-None-Match is answered from it.
      expect((await overSocket(url, { ...h, 'x-access-key': otherKey })).status).toBe(200);
      const early304 = await served(t.services, () => overSocket(url, h304));
      expect(early304.reused).toBe(1);
      expect([routed304.value.status, early304.value.status]).toEqual([304, 304]);
      expect(early304.value.text).toBe('');
      expect(stable(early304.value.headers)).toEqual(stable(routed304.value.headers));
    }
  });

  it("counts each answer in /metrics under the route, and spends the key's rate limit like any request", async () => {
    const url = `/tokens/anvil/${tt}/6`;
    const count = async () => (await t.services.metrics.httpRequests.get()).values.find((v) => v.labels.route === '/tokens/:network/:contract/*' && v.labels.status === '200')?.value ?? 0;
    const project = await t.services.projects.create('rc-early-limit');
    const { key } = await t.services.accessKeys.create(project.id, 'limited');
    expect((await overSocket(url, { 'x-access-key': key })).status).toBe(200);
    const before = await count();
    for (let i = 0; i < 5; i++) expect((await served(t.services, () => overSocket(url, { 'x-access-key': key }))).reused).toBe(1);
    expect((await count()) - before).toBe(5);

    // A bucket of two: two cached answers, then 429 (the third is not answered from memory).
    await t.services.db.query('UPDATE access_keys SET rate_per_sec = 0.01, rate_burst = 2 WHERE project_id = $1', [project.id]);
    t.services.auth.forgetAll();
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await overSocket(url, { 'x-access-key': key })).status);
    expect(statuses).toEqual([200, 200, 429]);
  });

  it("puts each answer given before routing in the project's request log, as the route's own answer is", async () => {
    const project = await t.services.projects.create('rc-early-journal');
    const { key, info } = await t.services.accessKeys.create(project.id, 'journal');
    const keyId = info.id;
    const url = `/tokens/anvil/${tt}/5,6?x=1`;
    const rpcBody = JSON.stringify({ chainID: 'anvil', contractAddress: tt, tokenIDs: ['5'] });
    const callRpc = () => socketApp.inject({ method: 'POST', url: '/rpc/Metadata/GetTokenMetadata', headers: { 'content-type': 'application/json', 'x-access-key': key }, payload: rpcBody });
    // The first of each is answered by the route (and stored); the repeats before routing, a 304 among them.
    const rest = await overSocket(url, { 'x-access-key': key });
    expect(rest.status).toBe(200);
    expect((await served(t.services, () => overSocket(url, { 'x-access-key': key }))).reused).toBe(2);
    expect((await served(t.services, () => overSocket(url, { 'x-access-key': key, 'if-none-match': String(rest.headers.etag) }))).reused).toBe(2);
    expect((await callRpc()).statusCode).toBe(200);
    expect((await served(t.services, callRpc)).reused).toBe(1);

    await t.services.requestJournal.flush();
    const rows = (
      await t.services.db.query<{ key_id: string; method: string; status: number; client_net: string; ms: number }>(
        'SELECT key_id, method, status, client_net, ms FROM project_requests WHERE project_id = $1 ORDER BY id',
        [project.id],
      )
    ).rows;
    const read = 'GET /tokens/:network/:contract/*';
    expect(rows.map((r) => [Number(r.key_id), r.method, r.status, r.client_net])).toEqual([
      [keyId, read, 200, '127.0.0.0/24'],
      [keyId, read, 200, '127.0.0.0/24'],
      [keyId, read, 304, '127.0.0.0/24'],
      [keyId, 'Metadata/GetTokenMetadata', 200, '127.0.0.0/24'],
      [keyId, 'Metadata/GetTokenMetadata', 200, '127.0.0.0/24'],
    ]);
    for (const r of rows) expect(r.ms).toBeGreaterThanOrEqual(0);
    // Never the key, never the query string.
    expect(JSON.stringify(rows)).not.toContain(key.slice(0, 12));
    expect(JSON.stringify(rows)).not.toContain('x=1');
  });
});

describe('RPC repeats answered before routing', () => {
  const stable = (h: Record<string, unknown>) => Object.fromEntries(Object.entries(h).filter(([k]) => !['date', 'connection', 'keep-alive'].includes(k)));
  const call = (key: string, body: string, headers: Record<string, string> = {}) =>
    socketApp.inject({ method: 'POST', url: '/rpc/Metadata/GetTokenMetadata', headers: { 'content-type': 'application/json', 'x-access-key': key, ...headers }, payload: body });

  it('sends what the router sends, and counts it per method', async () => {
    const key = await newKey();
    const body = JSON.stringify({ chainID: 'anvil', contractAddress: tt, tokenIDs: ['2', '6'] });
    const h = { origin: 'https://app.example' };
    const first = await served(t.services, () => call(key, body, h));
    expect(first).toMatchObject({ reused: 0, assembled: 2 });
    const counted = async () => (await t.services.metrics.rpcRequests.get()).values.find((v) => v.labels.method === 'GetTokenMetadata' && v.labels.code === '0')?.value ?? 0;
    const before = await counted();
    const again = await served(t.services, () => call(key, body, h));
    expect(again.reused).toBe(2);
    expect(again.value.body).toBe(first.value.body);
    expect(stable(again.value.headers)).toEqual(stable(first.value.headers));
    expect(again.value.headers.webrpc).toMatch(/^webrpc@/);
    expect((await counted()) - before).toBe(1);
  });

  it('reads a body sent in pieces, and hands what it cannot answer to the router with the body intact', async () => {
    const key = await newKey();
    const body = JSON.stringify({ chainID: 'anvil', contractAddress: tt, tokenIDs: ['2', '5'] });
    const inPieces = () =>
      new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = request(
          `${base}/rpc/Metadata/GetTokenMetadata`,
          { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-access-key': key } },
          (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (c) => (text += c));
            res.on('end', () => resolve({ status: res.statusCode!, text }));
          },
        );
        req.on('error', reject);
        req.write(body.slice(0, 10));
        setTimeout(() => req.end(body.slice(10)), 50);
      });
    // The key known in memory (another call), so the next call's body is read before routing...
    expect((await call(key, JSON.stringify({ chainID: 'anvil', contractAddress: tt, tokenIDs: ['6'] }))).statusCode).toBe(200);
    // ...and, a miss, handed to the router, whose parser gets the body read here.
    const first = await served(t.services, inPieces);
    expect(first.value.status).toBe(200);
    expect(names(JSON.parse(first.value.text))).toEqual(['token 2', 'token 5']);
    expect(first.assembled).toBe(2);
    const again = await served(t.services, inPieces);
    expect(again).toMatchObject({ reused: 2, assembled: 0 });
    expect(again.value.text).toBe(first.value.text);
    // A client that goes away half-way through its body costs nothing: the next call is answered.
    await new Promise<void>((resolve) => {
      const req = request(`${base}/rpc/Metadata/GetTokenMetadata`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-access-key': key } });
      req.on('error', () => resolve());
      req.write(body.slice(0, 10), () => setTimeout(() => (req.destroy(), resolve()), 50));
    });
    expect((await served(t.services, inPieces)).reused).toBe(2);
    // Longer than any cache key: never read here, answered by the router as always.
    const long = JSON.stringify({ chainID: 'anvil', contractAddress: tt, tokenIDs: ['2'], padding: 'x'.repeat(20_000) });
    const r = await call(key, long);
    expect(r.statusCode).toBe(200);
    expect(names(JSON.parse(r.body))).toEqual(['token 2']);
  });
});

describe('lifetime', () => {
  it('gives an answer no longer than the hot cache keeps the records it was built from', async () => {
    // Another process, with a short hot-cache TTL; the change below is made by this file's main
    // service, which the other process hears nothing about: only the TTL can bring it in.
    const ttl = 1_500;
    const p = await secondProcess(t, { chains: [chain.chainConfig], metadata: { ...METADATA, hotCacheTtlMs: ttl } });
    try {
      const api = { app: p.app, accessKey: t.accessKey };
      const t0 = Date.now();
      // Loads token 1 into the hot cache at t0.
      expect(names((await getTokens(api.app, api.accessKey, tt, ['1'])).body)).toEqual(['token 1']);

      origin.setDocument('/rc/1', { name: 'token 1 v2' });
      await t.services.tokens.refresh(t.services.chains.get(chain.anvil.chainId)!, tt.toLowerCase() as Address, ['1']);

      // Half-way through the TTL, a request with another body is assembled from the hot record
      // read at t0, and cached. It must not outlive that record.
      await sleep(Math.max(0, t0 + ttl / 2 - Date.now()));
      const spelled = ['0x1'];
      await getTokens(api.app, api.accessKey, tt, spelled);
      await sleep(Math.max(0, t0 + ttl + 400 - Date.now()));
      expect(names((await getTokens(api.app, api.accessKey, tt, spelled)).body)).toEqual(['token 1 v2']);
      expect(names((await getTokens(api.app, api.accessKey, tt, ['1'])).body)).toEqual(['token 1 v2']);
    } finally {
      await p.close();
    }
  });

  it('gives an answer no longer than its tokens are fresh: once stale, a read starts the re-read', async () => {
    const staleAfterSec = 2;
    const p = await secondProcess(t, { chains: [chain.chainConfig], metadata: { ...METADATA, staleAfterSec } });
    try {
      const client = p.services.chains.get(chain.anvil.chainId)!;
      await p.services.tokens.refresh(client, tt.toLowerCase() as Address, ['5']);
      const fresh = await getTokens(p.app, t.accessKey, tt, ['5']);
      expect(fresh.body.tokenMetadata[0]).toMatchObject({ status: 'AVAILABLE' });
      expect((await served(p.services, () => getTokens(p.app, t.accessKey, tt, ['5']))).reused).toBe(1);

      await sleep(staleAfterSec * 1000 + 500);
      const stale = await getTokens(p.app, t.accessKey, tt, ['5']);
      expect(stale.body.tokenMetadata[0]).toMatchObject({ status: 'REFRESHING' });
    } finally {
      await p.close();
    }
  });

  it('is off when the hot cache is off', async () => {
    const p = await secondProcess(t, { chains: [chain.chainConfig], metadata: { ...METADATA, hotCacheTtlMs: 0 } });
    try {
      for (let i = 0; i < 3; i++) {
        const r = await served(p.services, () => getTokens(p.app, t.accessKey, tt, ['2']));
        expect(r).toMatchObject({ reused: 0, assembled: 1 });
      }
      expect(p.services.responses.size).toBe(0);
    } finally {
      await p.close();
    }
  });
});
