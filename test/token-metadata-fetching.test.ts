// Token metadata end to end: what the service does around a fetch. Private-network refusal with and
// without an allowlist, the bounded inline wait, single-flight across concurrent requests and
// processes, and a failed refresh keeping the last good document.

import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { erc1155IdHex, rpcCall, startOriginServer, type OriginServer } from '../src/devchain/index.ts';
import type { AppConfigInput } from '../src/config/schema.ts';
import { startTestService, type TestService } from './support/service.ts';
import { eventually, explain, getRest, getTokenMetadata, secondProcess, startRawServer, startTokenChain, type RawServer, type TokenChain, type WireToken } from './support/token-chain.ts';

let chain: TokenChain;
let origin: OriginServer;
let allowed: RawServer; // the allowlisted private host
let other: OriginServer; // a private host nobody may reach
let tt: Address;

beforeAll(async () => {
  [chain, origin, other] = await Promise.all([startTokenChain(), startOriginServer(), startOriginServer()]);
  allowed = await startRawServer((_req, res, url) => {
    if (url.pathname === '/ok.json') res.writeHead(200, { 'content-type': 'application/json' }).end('{"name":"allowlisted"}');
    else if (url.pathname === '/to-other') res.writeHead(302, { location: `${other.url}/doc.json` }).end();
    else res.writeHead(404).end();
  });
  other.setDocument('/doc.json', { name: 'private' });
  origin.setDocument('/never', { name: 'too late' }, { delayMs: 60_000 });
  origin.setDocument('/slow', { name: 'slow but fine' }, { delayMs: 700 });
  origin.setDocument('/sf/10', { name: 'single flight' }, { delayMs: 300 });
  origin.setDocument('/rf/11', { name: 'v1', description: 'first' });
  origin.setDocument('/hang/30', { name: 'far too late' }, { delayMs: 60_000 });
  origin.setDocument('/quick/31', { name: 'quick 31' });
  origin.setDocument('/quick/32', { name: 'quick 32' });

  [tt] = await chain.deploy([{ contract: 'TestTokenURI' }]);
  const uris: Record<string, string> = {
    '1': `${allowed.url}/ok.json`,
    '2': `${allowed.url}/to-other`,
    '3': `${other.url}/doc.json`,
    '4': `http://localhost:${other.port}/doc.json`,
    '10': `${origin.url}/sf/10`,
    '11': `${origin.url}/rf/11`,
    '20': `${origin.url}/never`,
    '21': `${origin.url}/slow`,
    '30': `${origin.url}/hang/30`,
    '31': `${origin.url}/quick/31`,
    '32': `${origin.url}/quick/32`,
  };
  await chain.send(Object.entries(uris).map(([id, uri]) => ({ address: tt, contract: 'TestTokenURI', functionName: 'setTokenURI', args: [BigInt(id), uri] })));
});

afterAll(async () => {
  await Promise.all([chain?.stop(), origin?.stop(), other?.stop(), allowed?.stop()]);
});

describe('private networks', () => {
  it('with an allowlisted origin, refuses its redirect into another 127.0.0.1 port: BLOCKED_ADDRESS', async () => {
    const t = await startTestService({
      chains: [chain.chainConfig],
      allowPrivateNetworks: false,
      metadata: { allowedPrivateHosts: [`127.0.0.1:${allowed.port}`], fetchTimeoutMs: 1_500, inlineWaitMs: 10_000 },
    });
    try {
      const [ok, redirected] = await getTokenMetadata(t, tt, ['1', '2']);
      expect([ok.status, ok.name]).toEqual(['AVAILABLE', 'allowlisted']);
      expect([redirected.status, redirected.failureReason]).toEqual(['NOT_AVAILABLE', 'BLOCKED_ADDRESS']);
      const e = await explain(t, tt, 2);
      expect(e.trace.attempts.map((a) => [a.url, a.status, a.error])).toEqual([
        [`${allowed.url}/to-other`, 302, undefined],
        [`${other.url}/doc.json`, undefined, 'BLOCKED_ADDRESS'],
      ]);
      expect(other.requestCount()).toBe(0);
    } finally {
      await t.close();
    }
  });

  it('without an allowlist, refuses 127.0.0.1 and localhost URIs: BLOCKED_ADDRESS', async () => {
    const t = await startTestService({ chains: [chain.chainConfig], allowPrivateNetworks: false, metadata: { fetchTimeoutMs: 1_500, inlineWaitMs: 10_000 } });
    try {
      const okBefore = allowed.requestCount('/ok.json');
      const tokens = await getTokenMetadata(t, tt, ['3', '4', '1']);
      expect(tokens.map((x) => [x.tokenId, x.status, x.failureReason])).toEqual([
        ['3', 'NOT_AVAILABLE', 'BLOCKED_ADDRESS'],
        ['4', 'NOT_AVAILABLE', 'BLOCKED_ADDRESS'],
        ['1', 'NOT_AVAILABLE', 'BLOCKED_ADDRESS'],
      ]);
      expect(tokens[1].failureMessage).toMatch(/localhost/);
      expect(other.requestCount()).toBe(0);
      expect(allowed.requestCount('/ok.json')).toBe(okBefore);
    } finally {
      await t.close();
    }
  });
});

describe('bounded inline wait', () => {
  let t: TestService;
  beforeAll(async () => {
    t = await startTestService({ chains: [chain.chainConfig], metadata: { inlineWaitMs: 300, fetchTimeoutMs: 1_500 } });
  });
  afterAll(() => t?.close());

  it('answers NOT_AVAILABLE with queuedAt when the fetch outlasts the wait, then shows the outcome (TIMEOUT / AVAILABLE)', async () => {
    const started = Date.now();
    const first = await getRest(t, `/tokens/anvil/${tt}/20,21`);
    // Back before either fetch ended: no outcome yet, only when the work was queued.
    expect(first.status).toBe(200);
    expect(first.headers['cache-control']).toBe('public, max-age=5');
    for (const x of first.body as WireToken[]) {
      expect(x.status).toBe('NOT_AVAILABLE');
      expect(x.failureReason).toBeUndefined();
      expect(Date.parse(x.queuedAt!)).toBeGreaterThanOrEqual(started - 1_000);
    }

    const [never, slow] = await eventually(
      () => getTokenMetadata(t, tt, ['20', '21']),
      (tokens) => expect(tokens[0].failureReason).toBeDefined(),
      15_000,
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_400);
    expect([never.status, never.failureReason, never.queuedAt]).toEqual(['NOT_AVAILABLE', 'TIMEOUT', null]);
    expect([slow.status, slow.name, slow.queuedAt]).toEqual(['AVAILABLE', 'slow but fine', null]);
    const e = await explain(t, tt, 20);
    expect(e.trace.attempts).toHaveLength(1);
    expect(e.trace.attempts[0]).toMatchObject({ url: `${origin.url}/never`, error: 'TIMEOUT' });
    // One fetch each: the requests made while it ran joined it instead of starting their own.
    expect(origin.requestCount('/never')).toBe(1);
    expect(origin.requestCount('/slow')).toBe(1);
  });
});

describe('partial answers', () => {
  let t: TestService;
  beforeAll(async () => {
    t = await startTestService({ chains: [chain.chainConfig], metadata: { inlineWaitMs: 1_500, fetchTimeoutMs: 8_000, hotCacheTtlMs: 0 } });
  });
  afterAll(() => t?.close());

  const storedIds = async () =>
    (
      await t.testDb.db.query<{ token_id: string }>(`SELECT token_id::text AS token_id FROM token_metadata WHERE contract_address = $1 AND metadata IS NOT NULL ORDER BY token_id`, [tt.toLowerCase()])
    ).rows.map((r) => r.token_id);

  it('answers the tokens that resolve inside the wait AVAILABLE beside one whose origin hangs, and stores them at once', async () => {
    const started = Date.now();
    const [slow, a, b] = await getTokenMetadata(t, tt, ['30', '31', '32']);
    expect([a.status, a.name, a.queuedAt]).toEqual(['AVAILABLE', 'quick 31', null]);
    expect([b.status, b.name, b.queuedAt]).toEqual(['AVAILABLE', 'quick 32', null]);
    expect(slow.status).toBe('NOT_AVAILABLE');
    expect(Date.parse(slow.queuedAt!)).toBeGreaterThanOrEqual(started - 1_000);
    // Saved as they arrived, not when the batch's slowest fetch ends (that one is still hanging).
    expect(await storedIds()).toEqual(expect.arrayContaining(['31', '32']));
    expect(await storedIds()).not.toContain('30');
    expect(origin.requestCount('/hang/30')).toBe(1);

    // The REST form gives the same split, and joins the fetch still in flight instead of starting another.
    const rest = await getRest(t, `/tokens/anvil/${tt}/31,30,32?accessKey=${t.accessKey}`);
    expect((rest.body as WireToken[]).map((x) => [x.tokenId, x.status])).toEqual([
      ['31', 'AVAILABLE'],
      ['30', 'NOT_AVAILABLE'],
      ['32', 'AVAILABLE'],
    ]);
    expect(origin.requestCount('/hang/30')).toBe(1);
  });
});

describe('single flight and the store', () => {
  let t: TestService;
  let config: Partial<AppConfigInput>;
  beforeAll(async () => {
    config = { chains: [chain.chainConfig], metadata: { fetchTimeoutMs: 1_500, inlineWaitMs: 10_000 } };
    t = await startTestService(config);
  });
  afterAll(() => t?.close());

  it('fetches a token asked by 20 concurrent requests exactly once, and serves later rounds without fetching', async () => {
    const round = (api: { app: TestService['app']; accessKey: string }) =>
      Promise.all(
        Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? getTokenMetadata(api, tt, ['10']).then((r) => r[0]) : getRest(api, `/tokens/anvil/${tt}/10`).then((r) => (r.body as WireToken[])[0]))),
      );
    const first = await round(t);
    for (const x of first) expect([x.status, x.name]).toEqual(['AVAILABLE', 'single flight']);
    expect(origin.requestCount('/sf/10')).toBe(1);

    const second = await round(t);
    for (const x of second) expect([x.status, x.name]).toEqual(['AVAILABLE', 'single flight']);
    expect(origin.requestCount('/sf/10')).toBe(1);

    // A process with an empty hot cache finds it in the database.
    const p = await secondProcess(t, config);
    try {
      const third = await round({ app: p.app, accessKey: t.accessKey });
      for (const x of third) expect([x.status, x.name]).toEqual(['AVAILABLE', 'single flight']);
      expect(origin.requestCount('/sf/10')).toBe(1);
    } finally {
      await p.close();
    }
  });

  it('keeps the last good metadata when a refresh fails, and explain shows the failure', async () => {
    const [v1] = await getTokenMetadata(t, tt, ['11']);
    expect([v1.status, v1.name]).toEqual(['AVAILABLE', 'v1']);
    const client = t.services.chains.get(chain.anvil.chainId)!;
    const contract = tt.toLowerCase() as Address;

    origin.setDocument('/rf/11', { error: 'backend down' }, { status: 500 });
    const refreshed = await t.services.tokens.refresh(client, contract, ['11']);
    expect(refreshed.get('11')?.failureReason).toBe('HTTP_500');
    expect(origin.requestCount('/rf/11')).toBe(2);

    const [after] = await getTokenMetadata(t, tt, ['11']);
    expect(after).toEqual(v1);
    const rest = await getRest(t, `/tokens/anvil/${tt}/11`);
    expect(rest.body).toEqual([v1]);
    const e = await explain(t, tt, 11);
    expect(e.status).toBe('AVAILABLE');
    expect(e.failureReason).toBe('HTTP_500');
    expect(e.trace.attempts.map((a) => [a.url, a.status, a.error])).toEqual([[`${origin.url}/rf/11`, 500, 'HTTP_500']]);
    expect(e.raw).toEqual({ name: 'v1', description: 'first' });
    expect(e.fetchCount).toBe(2);

    // A refresh that succeeds does replace it, so the check above is not just a cache that never changes.
    origin.setDocument('/rf/11', { name: 'v2', description: 'second' });
    await t.services.tokens.refresh(client, contract, ['11']);
    const [v2] = await getTokenMetadata(t, tt, ['11']);
    expect([v2.status, v2.name, v2.description]).toEqual(['AVAILABLE', 'v2', 'second']);
    expect((await explain(t, tt, 11)).failureReason).toBeNull();
  });
});

describe('contracts that appear later', () => {
  let t: TestService;
  beforeAll(async () => {
    t = await startTestService({ chains: [chain.chainConfig], metadata: { notFoundRetrySec: 0, fetchTimeoutMs: 1_500, inlineWaitMs: 10_000 } });
  });
  afterAll(() => t?.close());

  it('resolves an ERC-1155 {id} token asked before its contract had code, once the code is there', async () => {
    const address = '0x00000000000000000000000000000000c0ffee01' as Address;
    const [before] = await getTokenMetadata(t, address, ['7']);
    expect([before.status, before.failureReason]).toEqual(['NOT_AVAILABLE', 'NOT_A_CONTRACT']);

    origin.setDocument(`/late/${erc1155IdHex(7n)}.json`, { name: 'late 1155' });
    await rpcCall(chain.anvil.rpcUrl, 'anvil_setCode', [address, chain.artifacts.TestURI1155!.deployedBytecode]);
    await chain.send([{ address, contract: 'TestURI1155', functionName: 'setURI', args: [`${origin.url}/late/{id}.json`] }]);

    const [after] = await getTokenMetadata(t, address, ['7']);
    expect([after.status, after.name, after.failureReason]).toEqual(['AVAILABLE', 'late 1155', undefined]);
    expect((await explain(t, address, 7)).trace).toMatchObject({ standard: 'ERC1155', method: 'uri' });
  });
});
