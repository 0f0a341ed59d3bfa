// Refresh tasks end to end through the RPC API: the service's testing flow (metadata changed on
// chain or at the origin, EnqueueTokensForRefresh, GetTokenRefreshStatus until DONE, the change
// served), 1 000 tokens with per-token failures, retries with backoff and Retry-After, a failed
// refresh keeping good metadata, cancel, task visibility per project, dedupe, cool-off and quota.
// Real anvil, real origin servers; the database backend is the run's (PGlite or PostgreSQL).

import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppConfigInput } from '../src/config/schema.ts';
import { startOriginServer, type OriginServer } from '../src/devchain/index.ts';
import { call, countsFor, enqueue, erc721WithTokens, range, resultOf, statusOf, waitForEnd } from './support/refresh.ts';
import { startTestService, type TestService } from './support/service.ts';
import { eventually, getTokenMetadata, startRawServer, startTokenChain, type RawServer, type TokenChain } from './support/token-chain.ts';

let chain: TokenChain;
let origin: OriginServer;
let flaky: RawServer;
let flowA: Address; // base URI moved on chain by the flow test
let flowB: Address; // documents changed at the origin by the flow test
let big: Address; // 1 000 tokens at /k/<id>
let misc: Address; // 200 tokens at /m/<id>: cancel, visibility, dedupe, cool-off, quota, last good
let tt: Address; // TestTokenURI: ids pointing at the flaky server

const BIG = range(1, 1000);
const BIG_404 = ['13', '404', '999'];
const BIG_BAD_JSON = ['77', '555'];

// The flaky server: /once-500 answers 500 the first time, /always-500 always, /gone 404,
// /once-429 answers 429 with Retry-After: 2 the first time. Request times are kept per path.
const hits = new Map<string, number[]>();

beforeAll(async () => {
  [chain, origin] = await Promise.all([startTokenChain(), startOriginServer()]);
  flaky = await startRawServer((_req, res, url) => {
    const seen = hits.get(url.pathname) ?? [];
    seen.push(Date.now());
    hits.set(url.pathname, seen);
    const json = (status: number, body: unknown, headers: Record<string, string> = {}) => res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
    if (url.pathname === '/once-500') return seen.length === 1 ? json(500, { error: 'down' }) : json(200, { name: 'recovered' });
    if (url.pathname === '/always-500') return json(500, { error: 'down' });
    if (url.pathname === '/once-429') return seen.length === 1 ? json(429, { error: 'slow down' }, { 'retry-after': '2' }) : json(200, { name: 'after the wait' });
    return json(404, { error: 'not found' });
  });

  for (const id of BIG) {
    if (BIG_404.includes(id)) continue;
    if (BIG_BAD_JSON.includes(id)) origin.setDocument(`/k/${id}`, '{"name": "broken', { contentType: 'application/json' });
    else origin.setDocument(`/k/${id}`, { name: `Big #${id}`, attributes: [{ trait_type: 'n', value: Number(id) }] });
  }
  for (const id of range(1, 200)) origin.setDocument(`/m/${id}`, { name: `Misc #${id}` });

  [flowA, flowB, misc, big] = await Promise.all([
    erc721WithTokens(chain, origin, '/a1/', ['1', '2']),
    erc721WithTokens(chain, origin, '/b/', ['1', '2']),
    erc721WithTokens(chain, origin, '/m/', range(1, 200)),
    erc721WithTokens(chain, origin, '/k/', BIG),
  ]);
  [tt] = await chain.deploy([{ contract: 'TestTokenURI' }]);
  tt = tt.toLowerCase() as Address;
  const uris = { '1': '/once-500', '2': '/always-500', '3': '/gone', '4': '/once-429' };
  await chain.send(Object.entries(uris).map(([id, p]) => ({ address: tt, contract: 'TestTokenURI', functionName: 'setTokenURI', args: [BigInt(id), `${flaky.url}${p}`] })));
}, 180_000);

afterAll(async () => {
  await Promise.all([chain?.stop(), origin?.stop(), flaky?.stop()]);
});

/** A service on its own database; the chain is not watched, so only the API queues refreshes. */
async function service(overrides: Partial<AppConfigInput> = {}): Promise<TestService> {
  const { metadata, refresh, ...rest } = overrides;
  return startTestService({
    chains: [{ ...chain.chainConfig, watch: false }],
    metadata: { hotCacheTtlMs: 0, fetchTimeoutMs: 3_000, inlineWaitMs: 10_000, ...metadata },
    refresh: { pollMs: 50, ...refresh },
    ...rest,
  });
}

async function withService(overrides: Partial<AppConfigInput>, fn: (t: TestService) => Promise<void>) {
  const t = await service(overrides);
  try {
    await fn(t);
  } finally {
    await t.close();
  }
}

const names = async (t: TestService, contract: string, ids: string[]) => (await getTokenMetadata(t, contract, ids)).map((x) => x.name);

describe('the testing flow: fetch, change, EnqueueTokensForRefresh, GetTokenRefreshStatus until DONE, fetch again', () => {
  it('(a) the base URI changed on chain', () =>
    withService({}, async (t) => {
      origin.setDocument('/a1/1', { name: 'flow A #1 v1' });
      origin.setDocument('/a1/2', { name: 'flow A #2 v1' });
      origin.setDocument('/a2/1', { name: 'flow A #1 v2' });
      origin.setDocument('/a2/2', { name: 'flow A #2 v2' });
      expect(await names(t, flowA, ['1', '2'])).toEqual(['flow A #1 v1', 'flow A #2 v1']);

      await chain.send([{ address: flowA, contract: 'DevERC721', functionName: 'setBaseURI', args: [`${origin.url}/a2/`] }]);
      // Stored metadata is served as it is until something refreshes it.
      expect(await names(t, flowA, ['1', '2'])).toEqual(['flow A #1 v1', 'flow A #2 v1']);

      const taskId = await enqueue(t, flowA, ['1', '2']);
      expect(await statusOf(t, taskId)).toBe('QUEUED');
      t.services.startBackground();
      expect(await waitForEnd(t, taskId)).toBe('DONE');

      expect(await names(t, flowA, ['1', '2'])).toEqual(['flow A #1 v2', 'flow A #2 v2']);
      expect(countsFor(origin, ['/a1/1', '/a1/2', '/a2/1', '/a2/2'])).toEqual([1, 1, 1, 1]);
      expect(await resultOf(t, taskId)).toEqual({ status: 'DONE', tokens: { '1': true, '2': true }, failureReasons: {} });
    }));

  it('(b) the document changed at the origin', () =>
    withService({}, async (t) => {
      origin.setDocument('/b/1', { name: 'flow B #1 v1', description: 'before' });
      expect(await names(t, flowB, ['1'])).toEqual(['flow B #1 v1']);

      origin.setDocument('/b/1', { name: 'flow B #1 v2', description: 'after' });
      expect(await names(t, flowB, ['1'])).toEqual(['flow B #1 v1']);

      const taskId = await enqueue(t, flowB, ['1']);
      expect(await statusOf(t, taskId)).toBe('QUEUED');
      t.services.startBackground();
      expect(await waitForEnd(t, taskId)).toBe('DONE');

      const [after] = await getTokenMetadata(t, flowB, ['1']);
      expect([after.status, after.name, after.description]).toEqual(['AVAILABLE', 'flow B #1 v2', 'after']);
      expect(origin.requestCount('/b/1')).toBe(2);
      const task = (await call(t, 'GetTask', { taskId })).body.task;
      expect(task).toMatchObject({
        id: taskId,
        queue: 'refresh_tokens',
        status: 'DONE',
        payload: { chainId: chain.anvil.chainId, contractAddress: flowB, source: 'api' },
        result: { total: 1, succeeded: 1, failed: 0 },
      });
    }));
});

describe('a refresh of 1 000 tokens', () => {
  it('ends DONE with per-token outcomes: 404 and invalid JSON named per token, every document fetched once', () =>
    withService({}, async (t) => {
      const taskId = await enqueue(t, big, BIG);
      t.services.startBackground();
      expect(await waitForEnd(t, taskId, 60_000)).toBe('DONE');

      const r = await resultOf(t, taskId);
      expect(r.status).toBe('DONE');
      expect(Object.keys(r.tokens).sort()).toEqual([...BIG].sort());
      const expectedReasons = Object.fromEntries([...BIG_404.map((id) => [id, 'HTTP_404']), ...BIG_BAD_JSON.map((id) => [id, 'INVALID_JSON'])]);
      expect(r.failureReasons).toEqual(expectedReasons);
      expect(BIG.filter((id) => r.tokens[id] !== !(id in expectedReasons))).toEqual([]);

      const task = (await call(t, 'GetTask', { taskId })).body.task;
      expect(task.result).toMatchObject({ total: 1000, succeeded: 995, failed: 5 });
      // Final failures are not retried, and no token was fetched twice.
      expect(BIG.filter((id) => origin.requestCount(`/k/${id}`) !== 1)).toEqual([]);

      const served = await getTokenMetadata(t, big, ['12', '13', '77', '1000']);
      expect(served.map((x) => [x.status, x.name, x.failureReason])).toEqual([
        ['AVAILABLE', 'Big #12', undefined],
        ['NOT_AVAILABLE', '', 'HTTP_404'],
        ['NOT_AVAILABLE', '', 'INVALID_JSON'],
        ['AVAILABLE', 'Big #1000', undefined],
      ]);
    }));
});

describe('retries', () => {
  it('retries 5xx with backoff until DONE or maxAttempts, never a 404', () =>
    withService({ refresh: { backoffBaseMs: 100, backoffMaxMs: 400, maxAttempts: 3 } }, async (t) => {
      const taskId = await enqueue(t, tt, ['1', '2', '3']);
      t.services.startBackground();
      // The default metadata.failureRetrySec (300 s) is for the serving path: a task retries on its own backoff.
      expect(await waitForEnd(t, taskId, 15_000)).toBe('DONE');
      const r = await resultOf(t, taskId);
      expect(r).toEqual({ status: 'DONE', tokens: { '1': true, '2': false, '3': false }, failureReasons: { '2': 'HTTP_500', '3': 'HTTP_404' } });
      expect([hits.get('/once-500')?.length, hits.get('/always-500')?.length, hits.get('/gone')?.length]).toEqual([2, 3, 1]);
      // Exponential: 100 ms, then 200 ms between the attempts (plus polling).
      const [a, b, c] = hits.get('/always-500')!;
      expect(b - a).toBeGreaterThanOrEqual(90);
      expect(c - b).toBeGreaterThanOrEqual(190);
      const items = await t.services.tasks.items(taskId);
      expect(items.map((i) => [i.item, i.status, i.attempts])).toEqual([
        ['1', 'DONE', 2],
        ['2', 'FAILED', 3],
        ['3', 'FAILED', 1],
      ]);
      expect(await names(t, tt, ['1'])).toEqual(['recovered']);
    }));

  it('waits as long as a 429 Retry-After asks before trying again', () =>
    withService({ metadata: { failureRetrySec: 0 }, refresh: { backoffBaseMs: 100, maxAttempts: 3 } }, async (t) => {
      const taskId = await enqueue(t, tt, ['4']);
      t.services.startBackground();
      expect(await waitForEnd(t, taskId, 15_000)).toBe('DONE');
      const [first, second] = hits.get('/once-429')!;
      expect(hits.get('/once-429')).toHaveLength(2);
      expect(second - first).toBeGreaterThanOrEqual(1_900);
      expect(await names(t, tt, ['4'])).toEqual(['after the wait']);
    }));

  it('a task whose only token keeps failing ends FAILED, and the last good metadata is still served', () =>
    withService({ refresh: { backoffBaseMs: 50, maxAttempts: 2 } }, async (t) => {
      origin.setDocument('/m/150', { name: 'good v1', description: 'kept' });
      origin.setDocument('/m/151', { name: 'good v1 (151)' });
      const before = await getTokenMetadata(t, misc, ['150', '151']);
      expect(before.map((x) => [x.status, x.name])).toEqual([
        ['AVAILABLE', 'good v1'],
        ['AVAILABLE', 'good v1 (151)'],
      ]);

      origin.removeDocument('/m/150');
      origin.setDocument('/m/151', { error: 'down' }, { status: 503 });
      const gone = await enqueue(t, misc, ['150']);
      const down = await enqueue(t, misc, ['151']);
      t.services.startBackground();
      expect(await waitForEnd(t, gone)).toBe('FAILED');
      expect(await waitForEnd(t, down)).toBe('FAILED');
      expect(await resultOf(t, gone)).toEqual({ status: 'FAILED', tokens: { '150': false }, failureReasons: { '150': 'HTTP_404' } });
      expect(await resultOf(t, down)).toEqual({ status: 'FAILED', tokens: { '151': false }, failureReasons: { '151': 'HTTP_503' } });
      expect(origin.requestCount('/m/151')).toBe(3); // the first read, then maxAttempts (2) tries

      const after = await getTokenMetadata(t, misc, ['150', '151']);
      expect(after).toEqual(before);
    }));
});

describe('CancelRefreshJob', () => {
  it('ends the task FAILED; its remaining items are never fetched', () =>
    withService({ refresh: { claimBatch: 10 } }, async (t) => {
      const ids = range(1, 60);
      const taskId = await enqueue(t, misc, ids);
      // One worker cycle by hand: exactly one claim of 10 items.
      expect(await t.services.worker.tick()).toBe(10);
      const fetched = () => ids.filter((id) => origin.requestCount(`/m/${id}`) > 0);
      expect(fetched()).toHaveLength(10);

      expect((await call(t, 'CancelRefreshJob', { taskId })).body).toEqual({ ok: true });
      expect(await statusOf(t, taskId)).toBe('FAILED');
      // Already ended: a second cancel says so.
      expect((await call(t, 'CancelRefreshJob', { taskId })).body).toEqual({ ok: false });

      // Nothing is left to claim, even for a worker that runs for a while.
      expect(await t.services.worker.tick()).toBe(0);
      t.services.startBackground();
      await new Promise((r) => setTimeout(r, 500));
      expect(fetched()).toHaveLength(10);

      const r = await resultOf(t, taskId);
      expect(r.status).toBe('FAILED');
      const done = Object.entries(r.tokens)
        .filter(([, ok]) => ok)
        .map(([id]) => id)
        .sort();
      expect(done).toEqual(fetched().sort());
      expect(Object.keys(r.failureReasons)).toHaveLength(50);
      expect(new Set(Object.values(r.failureReasons))).toEqual(new Set(['CANCELLED']));
      const task = (await call(t, 'GetTask', { taskId })).body.task;
      expect(task.result).toMatchObject({ cancelled: true, error: 'cancelled' });
      expect(task.result.finishedAt).not.toBeNull();
    }));
});

describe('task visibility', () => {
  it("another project's key gets NotFound for the task, exactly as for a task that does not exist", () =>
    withService({}, async (t) => {
      const taskId = await enqueue(t, misc, ['161', '162']);
      const other = await t.services.projects.create('other-project');
      const { key } = await t.services.accessKeys.create(other.id, 'other');
      const them = { app: t.app, accessKey: key };

      for (const method of ['GetTokenRefreshStatus', 'GetTaskStatus', 'GetTask', 'GetTokenRefreshResult', 'CancelRefreshJob']) {
        const theirs = await call(them, method, { taskId });
        const missing = await call(them, method, { taskId: taskId + 1000 });
        expect([method, theirs.status, theirs.body.error, theirs.body.code]).toEqual([method, 400, 'NotFound', 3000]);
        expect(JSON.stringify(theirs.body).replaceAll(String(taskId), 'ID')).toEqual(JSON.stringify(missing.body).replaceAll(String(taskId + 1000), 'ID'));
        expect(JSON.stringify(theirs.body)).not.toMatch(/161|162|QUEUED/);
      }
      // Their cancel did nothing; the owner still sees it live.
      expect(await statusOf(t, taskId)).toBe('QUEUED');
      expect((await call(t, 'GetTaskStatus', { taskID: taskId })).body).toEqual({ status: 'QUEUED' });

      // A task the chain watcher queued belongs to no project: no key sees it.
      const client = t.services.chains.get(chain.anvil.chainId)!;
      const { taskId: watcherTask } = await t.services.refresh.enqueueTokens(null, client, misc, ['163'], { source: 'watcher' });
      expect((await call(t, 'GetTask', { taskId: watcherTask })).body.error).toBe('NotFound');

      // Without a key: Unauthorized, before anything is looked up.
      const anon = await call({ app: t.app, accessKey: '' }, 'GetTokenRefreshStatus', { taskId });
      expect(anon.body.error).toBe('Unauthorized');
    }));
});

describe('dedupe, cool-off and quota', () => {
  it('tokens already queued return the same task; a new token makes a new task; joined work is fetched once', () =>
    withService({}, async (t) => {
      const first = await enqueue(t, misc, ['101', '102', '103']);
      expect(await enqueue(t, misc, ['103', '102', '101'])).toBe(first);
      expect(await enqueue(t, misc, ['102'])).toBe(first);
      expect(await enqueue(t, misc, ['0x65', '102'])).toBe(first); // 0x65 = 101
      const viaOldName = await call(t, 'RefreshTokenMetadata', { chainID: String(chain.anvil.chainId), contractAddress: misc.toUpperCase().replace('0X', '0x'), tokenIDs: ['101'] });
      expect(viaOldName.body).toEqual({ taskID: first, taskId: first });
      const viaHandle = await call(t, 'RefreshContractTokens', { chainHandle: 'anvil', contractAddress: misc, tokenIDs: ['103'] });
      expect(viaHandle.body).toEqual({ taskID: first });

      const second = await enqueue(t, misc, ['103', '104']);
      expect(second).not.toBe(first);

      t.services.startBackground();
      expect(await waitForEnd(t, first)).toBe('DONE');
      expect(await waitForEnd(t, second)).toBe('DONE');
      expect((await resultOf(t, second)).tokens).toEqual({ '103': true, '104': true });
      expect(countsFor(origin, ['/m/101', '/m/102', '/m/103', '/m/104'])).toEqual([1, 1, 1, 1]);
    }));

  it('within the cool-off the earlier task is returned and nothing is fetched; after it, a new task', () =>
    withService({ refresh: { coolOffSec: 3 } }, async (t) => {
      t.services.startBackground();
      const first = await enqueue(t, misc, ['111', '112']);
      expect(await waitForEnd(t, first)).toBe('DONE');
      expect(countsFor(origin, ['/m/111', '/m/112'])).toEqual([1, 1]);

      expect(await enqueue(t, misc, ['112', '111'])).toBe(first);
      expect(await statusOf(t, first)).toBe('DONE');
      // Only the tokens outside the cool-off are queued.
      const partial = await enqueue(t, misc, ['111', '113']);
      expect(partial).not.toBe(first);
      expect(await waitForEnd(t, partial)).toBe('DONE');
      expect((await resultOf(t, partial)).tokens).toEqual({ '113': true });
      await new Promise((r) => setTimeout(r, 300));
      expect(countsFor(origin, ['/m/111', '/m/112', '/m/113'])).toEqual([1, 1, 1]);

      await new Promise((r) => setTimeout(r, 3_000));
      const later = await enqueue(t, misc, ['111', '112']);
      expect(later).not.toBe(first);
      expect(later).not.toBe(partial);
      expect(await waitForEnd(t, later)).toBe('DONE');
      expect(countsFor(origin, ['/m/111', '/m/112'])).toEqual([2, 2]);
    }));

  it('more queued tokens than maxQueuedPerProject is RateLimited 2005; the room comes back as work finishes', () =>
    withService({ refresh: { maxQueuedPerProject: 10 } }, async (t) => {
      await enqueue(t, misc, range(121, 128)); // 8 queued
      const over = await call(t, 'EnqueueTokensForRefresh', { chainID: 'anvil', contractAddress: misc, tokenIDs: range(129, 131) });
      expect([over.status, over.body.error, over.body.code]).toEqual([429, 'RateLimited', 2005]);
      expect(over.body.cause).toMatch(/8 tokens queued; at most 10/);
      // Exactly at the limit is fine; the refused request queued nothing.
      const fits = await enqueue(t, misc, ['129', '130']);
      expect(await t.services.tasks.queuedCount(t.project.id)).toBe(10);
      const another = await call(t, 'RefreshTokenMetadata', { chainID: 'anvil', contractAddress: misc, tokenIDs: ['131'] });
      expect(another.body.code).toBe(2005);
      // A full queue takes no refreshAll either.
      const all = await call(t, 'RefreshAllContractTokens', { chainID: 'anvil', contractAddress: misc });
      expect([all.status, all.body.code]).toEqual([429, 2005]);

      // Another project has its own room.
      const other = await t.services.projects.create('quota-other');
      const { key } = await t.services.accessKeys.create(other.id, 'other');
      expect((await call({ app: t.app, accessKey: key }, 'EnqueueTokensForRefresh', { chainID: 'anvil', contractAddress: misc, tokenIDs: range(132, 135) })).status).toBe(200);

      t.services.startBackground();
      expect(await waitForEnd(t, fits)).toBe('DONE');
      await eventually(
        () => t.services.tasks.queuedCount(t.project.id),
        (n) => expect(n).toBe(0),
      );
      expect((await call(t, 'EnqueueTokensForRefresh', { chainID: 'anvil', contractAddress: misc, tokenIDs: range(131, 140) })).status).toBe(200);
    }));
});
