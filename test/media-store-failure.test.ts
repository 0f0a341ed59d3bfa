// A blob store that refuses writes (here a real folder store whose originals folder is a file in the way:
// every write under it fails with ENOTDIR/EEXIST, as a full disk fails with ENOSPC) leaves a record:
// the field FAILED with STORE_FAILED and a due time. Once the folder takes writes again, the retry
// (media/store-retry.ts runs it in the background) fetches it again and the token gets its media: the
// bytes in the folder and a READY row pointing at them.

import { createHash } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFetcher, type Fetcher } from '../src/metadata/fetch/fetch.ts';
import { mediaStore } from '../src/media/media-store.ts';
import { MediaService } from '../src/media/service.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { folderBackend, solidPng, testMediaOptions, type BlobBackend } from './support/media.ts';
import { startRawServer, type RawServer } from './support/token-chain.ts';

let origin: RawServer;
let testDb: TestDb;
let fetcher: Fetcher;
let backend: BlobBackend;
let png: Buffer;

beforeAll(async () => {
  png = await solidPng(90, 60, '#aa22cc');
  origin = await startRawServer((_req, res) => res.writeHead(200, { 'content-type': 'image/png' }).end(png));
  testDb = await createTestDb();
  fetcher = createFetcher({ allowPrivateNetworks: false, allowedPrivateHosts: [`127.0.0.1:${origin.port}`], ipfsGateways: ['https://ipfs.io/ipfs/'] });
  backend = folderBackend();
}, 60_000);

afterAll(async () => {
  fetcher?.close();
  await Promise.all([origin?.stop(), testDb?.drop(), backend?.stop()]);
});

const CONTRACT = '0x00000000000000000000000000000000000000cc';

async function row() {
  const r = await testDb.db.query<{ status: string; failure_reason: string | null; sha256: string | null; retry_after: Date | null }>(
    'SELECT status, failure_reason, sha256, retry_after FROM media_assets WHERE chain_id = 7 AND contract = $1 AND token_id = $2',
    [CONTRACT, '1'],
  );
  return r.rows[0];
}

describe('a blob store that refuses writes', () => {
  it('records the field STORE_FAILED, and once the store takes writes again the retry stores its media', async () => {
    // storeRetrySec 1: due a second later (the retry below waits for that, not for a fixed time).
    const media = new MediaService({ store: mediaStore(testDb.db), blobs: backend.store, fetcher, log: createLogger('silent'), options: testMediaOptions({ storeRetrySec: 1 }) });
    const originals = join(backend.dir!, 'o');
    writeFileSync(originals, 'in the way');
    media.onTokensResolved(7, CONTRACT, [{ tokenId: '1', urls: { image: `${origin.url}/t/1.png` } }], 'eager');
    await media.idle();

    const failed = await row();
    expect(failed?.status).toBe('FAILED');
    expect(failed?.failure_reason).toBe('STORE_FAILED');
    expect(failed?.sha256).toBeNull();
    expect(failed?.retry_after).not.toBeNull();

    // The store takes writes again; the retry, once due, fetches and stores.
    rmSync(originals);
    while ((await media.retryStoreFailures()) === 0) await new Promise((r) => setTimeout(r, 100));
    await media.idle();
    const ready = await row();
    expect(ready?.status).toBe('READY');
    const sha = createHash('sha256').update(png).digest('hex');
    expect(ready?.sha256).toBe(sha);
    expect(readFileSync(join(originals, sha)).equals(png)).toBe(true);
    // Nothing more is due.
    expect(await media.retryStoreFailures()).toBe(0);
    await media.close();
  });
});
