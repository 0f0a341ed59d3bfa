// One bad document in a batch fails alone: a document nested 5 000 levels deep (it used to overflow
// the stack when the save batch was serialised, failing every token of the batch) and one the
// database refuses (a \u0000 in a string, which jsonb cannot hold). Through the API, a real origin,
// a real chain and the run's database.

import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_DOCUMENT_DEPTH } from '../src/metadata/tokens/document.ts';
import { enqueue, erc721WithTokens, resultOf, waitForEnd } from './support/refresh.ts';
import { startTestService, type TestService } from './support/service.ts';
import { explain, getRest, getTokenMetadata, startRawServer, startTokenChain, type RawServer, type TokenChain } from './support/token-chain.ts';

const DEEP = 5_000;
const deepDocument = `{"name":"deep","x":${'['.repeat(DEEP)}1${']'.repeat(DEEP)}}`;

let chain: TokenChain;
let origin: RawServer;
let nft: Address;

beforeAll(async () => {
  chain = await startTokenChain();
  origin = await startRawServer((_req, res, url) => {
    const body: Record<string, string> = {
      '/t/1': deepDocument,
      '/t/2': JSON.stringify({ name: 'normal', attributes: [{ trait_type: 'kind', value: 'plain' }] }),
      '/t/3': deepDocument,
      '/t/4': '{"name":"nul \\u0000 inside"}',
    };
    const text = body[url.pathname];
    if (text === undefined) res.writeHead(404).end();
    else res.writeHead(200, { 'content-type': 'application/json' }).end(text);
  });
  nft = await erc721WithTokens(chain, origin, '/t/', ['1', '2', '3', '4']);
}, 180_000);

afterAll(async () => {
  await Promise.all([chain?.stop(), origin?.stop()]);
});

async function withService(fn: (t: TestService) => Promise<void>) {
  const t = await startTestService({
    chains: [{ ...chain.chainConfig, watch: false }],
    metadata: { hotCacheTtlMs: 0, inlineWaitMs: 10_000 },
    refresh: { pollMs: 50, coolOffSec: 0 },
  });
  try {
    await fn(t);
  } finally {
    await t.close();
  }
}

const rowsOf = async (t: TestService) =>
  (
    await t.testDb.db.query<{ token_id: string; name: string | null; failure_reason: string | null; fetched: boolean }>(
      `SELECT token_id, metadata->>'name' AS name, failure_reason, last_fetched IS NOT NULL AS fetched
       FROM token_metadata WHERE contract_address = $1 ORDER BY token_id`,
      [nft],
    )
  ).rows;

describe('a document nested 5 000 levels deep', () => {
  it('fails alone with TOO_DEEP: the normal token of its batch is served and stored, explain answers 200', () =>
    withService(async (t) => {
      const [deep, normal] = await getTokenMetadata(t, nft, ['1', '2']);
      expect([normal.status, normal.name]).toEqual(['AVAILABLE', 'normal']);
      expect([deep.status, deep.failureReason]).toEqual(['NOT_AVAILABLE', 'TOO_DEEP']);
      expect(deep.failureMessage).toContain(`deeper than ${MAX_DOCUMENT_DEPTH} levels`);

      expect(await rowsOf(t)).toEqual([
        { token_id: '1', name: null, failure_reason: 'TOO_DEEP', fetched: false },
        { token_id: '2', name: 'normal', failure_reason: null, fetched: true },
      ]);

      // The failure is stored like any other: asking again does not fetch again.
      const fetched = () => [origin.requestCount('/t/1'), origin.requestCount('/t/2')];
      const before = fetched();
      await getTokenMetadata(t, nft, ['1', '2']);
      expect(fetched()).toEqual(before);

      const e = await explain(t, nft, 1);
      expect([e.status, e.failureReason]).toEqual(['NOT_AVAILABLE', 'TOO_DEEP']);
      expect(e.trace.attempts.map((a) => [a.status, a.error])).toEqual([[200, 'TOO_DEEP']]);
    }));

  it('explain resolves a deep token never seen before and reports TOO_DEEP with 200', () =>
    withService(async (t) => {
      const res = await getRest(t, `/tokens/anvil/${nft}/3/explain`);
      expect(res.status).toBe(200);
      expect([res.body.status, res.body.failureReason]).toEqual(['NOT_AVAILABLE', 'TOO_DEEP']);
    }));

  it('a refresh task over a deep and a normal token reports one FAILED and one OK', () =>
    withService(async (t) => {
      const taskId = await enqueue(t, nft, ['1', '2']);
      t.services.startBackground();
      await waitForEnd(t, taskId);
      const r = await resultOf(t, taskId);
      expect([r.tokens, r.failureReasons]).toEqual([{ '1': false, '2': true }, { '1': 'TOO_DEEP' }]);
      const items = await t.services.tasks.items(taskId);
      expect(items.map((i) => [i.item, i.status])).toEqual([
        ['1', 'FAILED'],
        ['2', 'DONE'],
      ]);
    }));
});

describe('a document the database refuses', () => {
  it('is recorded UNSTORABLE on its own; the rest of the batch is stored AVAILABLE', () =>
    withService(async (t) => {
      const [normal, nul] = await getTokenMetadata(t, nft, ['2', '4']);
      expect([normal.status, normal.name]).toEqual(['AVAILABLE', 'normal']);
      expect([nul.status, nul.failureReason]).toEqual(['NOT_AVAILABLE', 'UNSTORABLE']);
      expect(await rowsOf(t)).toEqual([
        { token_id: '2', name: 'normal', failure_reason: null, fetched: true },
        { token_id: '4', name: null, failure_reason: 'UNSTORABLE', fetched: false },
      ]);
    }));
});

describe('explain when resolution itself fails', () => {
  it('answers 200 with the failure (here: the chain cannot be read), not a 500, and stores nothing', async () => {
    const closed = await startRawServer((_req, res) => res.writeHead(503).end());
    await closed.stop(); // nothing listens on its port any more
    const t = await startTestService({ chains: [{ chainId: chain.chainConfig.chainId, name: 'anvil', rpcUrls: [closed.url], watch: false }] });
    try {
      const res = await getRest(t, `/tokens/anvil/${nft}/2/explain`);
      expect(res.status, res.text).toBe(200);
      expect([res.body.status, res.body.failureReason, res.body.fetchCount]).toEqual(['NOT_AVAILABLE', 'RESOLUTION_FAILED', 0]);
      expect(res.body.failureMessage).not.toBe('');
      expect(await rowsOf(t)).toEqual([]);
    } finally {
      await t.close();
    }
  });
});
