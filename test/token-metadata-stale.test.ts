// Stale metadata: served at once as REFRESHING while it is re-read, then AVAILABLE with the new document.

import type { Address } from 'viem';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startOriginServer, type OriginServer } from '../src/devchain/index.ts';
import { startTestService, type TestService } from './support/service.ts';
import { eventually, getTokenMetadata, startTokenChain, type TokenChain } from './support/token-chain.ts';

let chain: TokenChain;
let origin: OriginServer;
let t: TestService;
let tt: Address;

beforeAll(async () => {
  [chain, origin] = await Promise.all([startTokenChain(), startOriginServer()]);
  [tt] = await chain.deploy([{ contract: 'TestTokenURI' }]);
  await chain.send([{ address: tt, contract: 'TestTokenURI', functionName: 'setTokenURI', args: [1n, `${origin.url}/stale/1`] }]);
  origin.setDocument('/stale/1', { name: 'old' });
  t = await startTestService({ chains: [chain.chainConfig], metadata: { staleAfterSec: 1, hotCacheTtlMs: 0 } });
});
afterAll(async () => {
  await t?.close();
  await Promise.all([origin?.stop(), chain?.stop()]);
});

it('serves stale metadata at once as REFRESHING, re-reads it in the background, then serves the new document', async () => {
  const [first] = await getTokenMetadata(t, tt, ['1']);
  expect(first).toMatchObject({ name: 'old', status: 'AVAILABLE', queuedAt: null });

  origin.setDocument('/stale/1', { name: 'new' }, { delayMs: 300 });
  await new Promise((r) => setTimeout(r, 1_100));
  const [stale] = await getTokenMetadata(t, tt, ['1']);
  // The old document, not a wait for the slow origin.
  expect(stale).toMatchObject({ name: 'old', status: 'REFRESHING', queuedAt: expect.any(String) });

  // Fetched once more for that staleness, not once per read that saw it stale. Counted before the read
  // that first serves the new document: with staleAfterSec 1, a later read on a busy machine may find the
  // new document stale in its turn and rightly fetch it again.
  let fetchedBefore = -1;
  await eventually(
    async () => {
      const before = origin.requestCount('/stale/1');
      const answer = await getTokenMetadata(t, tt, ['1']);
      fetchedBefore = before;
      return answer;
    },
    ([tok]) => expect(tok).toMatchObject({ name: 'new' }),
  );
  expect(fetchedBefore).toBe(2);
  await eventually(
    () => getTokenMetadata(t, tt, ['1']),
    ([tok]) => expect(tok).toMatchObject({ name: 'new', status: 'AVAILABLE' }),
  );
});
