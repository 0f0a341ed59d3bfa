// Blob garbage collection racing an ingest of the same file: a blob that becomes referenced again
// while it is being collected must keep its row and its bytes. The two are interleaved for real: the
// blob store (a real folder store) holds the ingest at a chosen call while the collection runs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFetcher, type Fetcher } from '../src/metadata/fetch/fetch.ts';
import { originalKey, type BlobStore } from '../src/media/blob-store.ts';
import { mediaStore } from '../src/media/media-store.ts';
import { MediaService } from '../src/media/service.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { folderBackend, solidPng, type BlobBackend } from './support/media.ts';
import { startRawServer, type RawServer } from './support/token-chain.ts';

let origin: RawServer;
let testDb: TestDb;
let fetcher: Fetcher;
let backend: BlobBackend;
let png: Buffer;

/** The folder store, with a gate: the n-th `size` of a key waits until released. */
function gated(inner: BlobStore) {
  let armed: { key: string; nth: number; seen: number; reached: () => void; open: Promise<void> } | undefined;
  const store: BlobStore = {
    ...inner,
    kind: inner.kind,
    put: (k, b, t) => inner.put(k, b, t),
    get: (k) => inner.get(k),
    getRange: (k, a, b) => inner.getRange(k, a, b),
    stream: (k, r) => inner.stream(k, r),
    delete: (k) => inner.delete(k),
    list: (p) => inner.list(p),
    close: () => inner.close(),
    async size(k) {
      if (armed && armed.key === k && ++armed.seen === armed.nth) {
        const a = armed;
        armed = undefined;
        a.reached();
        await a.open;
      }
      return inner.size(k);
    },
  };
  return {
    store,
    /** Holds the nth size() of `key`; resolves `reached` when the ingest is there. */
    hold(key: string, nth: number) {
      let release!: () => void;
      let reached!: () => void;
      const atGate = new Promise<void>((r) => (reached = r));
      armed = { key, nth, seen: 0, reached, open: new Promise<void>((r) => (release = r)) };
      return { atGate, release };
    },
  };
}

beforeAll(async () => {
  png = await solidPng(120, 80, '#22aa44');
  origin = await startRawServer((_req, res) => res.writeHead(200, { 'content-type': 'image/png' }).end(png));
  testDb = await createTestDb();
  fetcher = createFetcher({ allowPrivateNetworks: false, allowedPrivateHosts: [`127.0.0.1:${origin.port}`], ipfsGateways: ['https://ipfs.io/ipfs/'] });
  backend = folderBackend();
}, 60_000);

afterAll(async () => {
  fetcher?.close();
  await Promise.all([origin?.stop(), testDb?.drop(), backend?.stop()]);
});

function pipeline(blobs: BlobStore) {
  return new MediaService({
    store: mediaStore(testDb.db),
    blobs,
    fetcher,
    log: createLogger('silent'),
    options: { maxBytes: 10_000_000, fetchTimeoutMs: 10_000, concurrency: 2, maxQueued: 100, failureRetrySec: 3600, eager: true, maxInputPixels: 100_000_000, maxFrames: 100 },
  });
}

const CONTRACT = '0x00000000000000000000000000000000000000bb';
const blobRow = async (sha: string) => (await testDb.db.query('SELECT 1 FROM media_blobs WHERE sha256 = $1', [sha])).rows.length;

describe('blob collection racing an ingest of the same bytes', () => {
  it('collected between the ingest\'s first look and its commit: the bytes are put back and the blob row made again', async () => {
    const g = gated(backend.store);
    const media = pipeline(g.store);
    const a = await media.ensure({ chainId: 101, contract: CONTRACT, tokenId: '1', field: 'image' }, `${origin.url}/a.png`);
    expect(a.status).toBe('READY');
    const sha = a.blob!.sha256;
    // The second token's ingest stops at its first look at the stored bytes…
    const gate = g.hold(originalKey(sha), 1);
    const b = media.ensure({ chainId: 102, contract: CONTRACT, tokenId: '1', field: 'image' }, `${origin.url}/a.png`);
    await gate.atGate;
    // …while the only token referencing the blob goes, and the blob with it (row and bytes).
    await media.forgetChain(101);
    expect(await blobRow(sha)).toBe(0);
    expect(await backend.store.size(originalKey(sha))).toBeUndefined();
    gate.release();
    const got = await b;
    expect(got.status).toBe('READY');
    expect(got.blob?.sha256).toBe(sha);
    expect(await blobRow(sha)).toBe(1);
    expect(await backend.store.size(originalKey(sha))).toBe(png.length);
    const r = await media.rendition(got.blob!, { width: 64, format: 'webp', still: false });
    expect(r.ok).toBe(true);
    await media.forgetChain(102);
  });

  it('collected while the ingest holds the blob row (becoming referenced again): the collection keeps it', async () => {
    const g = gated(backend.store);
    const media = pipeline(g.store);
    const a = await media.ensure({ chainId: 201, contract: CONTRACT, tokenId: '1', field: 'image' }, `${origin.url}/a.png`);
    const sha = a.blob!.sha256;
    // The second look is the one under the blob row's lock, inside the transaction that adds the reference.
    const gate = g.hold(originalKey(sha), 2);
    const b = media.ensure({ chainId: 202, contract: CONTRACT, tokenId: '1', field: 'image' }, `${origin.url}/a.png`);
    await gate.atGate;
    const collecting = media.forgetChain(201);
    // Let the collection start and reach the lock it must wait on, then let the ingest commit.
    await new Promise((r) => setTimeout(r, 200));
    gate.release();
    const [got] = await Promise.all([b, collecting]);
    expect(got.status).toBe('READY');
    expect(await blobRow(sha)).toBe(1);
    expect(await backend.store.size(originalKey(sha))).toBe(png.length);
    const assets = await testDb.db.query('SELECT chain_id FROM media_assets WHERE sha256 = $1', [sha]);
    expect(assets.rows.map((x) => Number(x.chain_id))).toEqual([202]);
    // Once nothing references it, it is collected for real.
    await media.forgetChain(202);
    expect(await blobRow(sha)).toBe(0);
    expect(await backend.store.size(originalKey(sha))).toBeUndefined();
  });
});
