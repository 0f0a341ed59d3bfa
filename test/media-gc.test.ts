// Blob garbage collection racing an ingest of the same file: a blob that becomes referenced again
// while it is being collected must keep its row and its bytes. The two are interleaved for real: the
// blob store (a real folder store) holds the ingest at a chosen call while the collection runs.
import { utimesSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFetcher, type Fetcher } from '../src/metadata/fetch/fetch.ts';
import { originalKey, renditionKey, type BlobStore } from '../src/media/blob-store.ts';
import { MediaOrphanSweep } from '../src/media/orphan-sweep.ts';
import { mediaStore } from '../src/media/media-store.ts';
import { MediaService } from '../src/media/service.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { folderBackend, s3Backend, solidPng, testMediaOptions, type BlobBackend } from './support/media.ts';
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
    entries: (p) => inner.entries(p),
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
  const colours = new Map<string, Buffer>();
  for (const c of ['aa0000', '0000aa']) colours.set(c, await solidPng(30, 30, `#${c}`));
  // /colour/<rrggbb>.png: bytes of their own (a hash no other test file shares); anything else: png.
  origin = await startRawServer((req, res) => res.writeHead(200, { 'content-type': 'image/png' }).end(colours.get(/\/colour\/([0-9a-f]{6})/.exec(req.url ?? '')?.[1] ?? '') ?? png));
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
    options: testMediaOptions(),
  });
}

const CONTRACT = '0x00000000000000000000000000000000000000bb';
const blobRow = async (sha: string) => (await testDb.db.query('SELECT 1 FROM media_blobs WHERE sha256 = $1', [sha])).rows.length;

describe('blob collection racing an ingest of the same bytes', () => {
  it("collected between the ingest's first look and its commit: the bytes are put back and the blob row made again", async () => {
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

describe('orphans a crash left behind, swept', () => {
  const sha = (n: number) => n.toString(16).padStart(64, 'a');
  /** A key written two hours ago (the folder store's mtime). */
  const age = (b: BlobBackend, key: string) => {
    const t = new Date(Date.now() - 2 * 3600_000);
    utimesSync(join(b.dir!, ...key.split('/')), t, t);
  };

  it('folder store: collects unreferenced rows, old bytes with no row and their renditions; keeps what is referenced, young or claimed', async () => {
    const media = pipeline(backend.store);
    const store = mediaStore(testDb.db);
    // Referenced: an asset of chain 301, with a rendition.
    const kept = await media.ensure({ chainId: 301, contract: CONTRACT, tokenId: '1', field: 'image' }, `${origin.url}/a.png`);
    const keptSha = kept.blob!.sha256;
    expect((await media.rendition(kept.blob!, { width: 64, format: 'webp', still: false })).ok).toBe(true);
    // An unreferenced row: its asset went (as saveFailed/remove do) and the process stopped before collecting.
    const other = await solidPng(30, 30, '#aa0000');
    const lostRow = await media.ensure({ chainId: 302, contract: CONTRACT, tokenId: '1', field: 'image' }, `${origin.url}/colour/aa0000.png`);
    expect(lostRow.status).toBe('READY');
    const lostSha = lostRow.blob!.sha256;
    expect(lostSha).not.toBe(keptSha);
    await testDb.db.query('DELETE FROM media_assets WHERE chain_id = 302');
    // Bytes with no row at all (an ingest whose transaction never committed), old and young; an old rendition of a hash with no row.
    await backend.store.put(originalKey(sha(1)), other, 'image/png');
    await backend.store.put(originalKey(sha(2)), other, 'image/png');
    await backend.store.put(renditionKey(sha(3), 'w64.webp'), other, 'image/webp');
    for (const k of [originalKey(sha(1)), renditionKey(sha(3), 'w64.webp'), originalKey(keptSha), originalKey(lostSha)]) age(backend, k);
    for (const k of await backend.store.list(`r/${keptSha}/`)) age(backend, k);

    const r = await media.sweepOrphans(3_600);
    expect(r).toEqual({ rows: 1, originals: 1, renditions: 1 });
    expect(await blobRow(lostSha)).toBe(0);
    expect(await backend.store.size(originalKey(lostSha))).toBeUndefined();
    expect(await backend.store.size(originalKey(sha(1)))).toBeUndefined();
    expect(await backend.store.list(`r/${sha(3)}/`)).toEqual([]);
    // Kept: the referenced blob and its rendition, and the young bytes.
    expect(await blobRow(keptSha)).toBe(1);
    expect(await backend.store.size(originalKey(keptSha))).toBe(png.length);
    expect((await backend.store.list(`r/${keptSha}/`)).length).toBe(1);
    expect(await backend.store.size(originalKey(sha(2)))).toBe(other.length);
    // An ingest that committed its row after the sweep listed the bytes: the claim finds the row and drops nothing.
    expect(await store.dropUnclaimed(keptSha, () => backend.store.delete(originalKey(keptSha)))).toBe(false);
    expect(await backend.store.size(originalKey(keptSha))).toBe(png.length);
    expect(await blobRow(keptSha)).toBe(1);
    // Nothing left to do: a second sweep collects nothing.
    expect(await media.sweepOrphans(3_600)).toEqual({ rows: 0, originals: 0, renditions: 0 });
    await media.forgetChain(301);
    await backend.store.delete(originalKey(sha(2)));
  });

  it('runs in the background: the sweep loop collects an unreferenced row', async () => {
    const media = pipeline(backend.store);
    const a = await media.ensure({ chainId: 303, contract: CONTRACT, tokenId: '1', field: 'image' }, `${origin.url}/colour/0000aa.png`);
    const s = a.blob!.sha256;
    await testDb.db.query('DELETE FROM media_assets WHERE chain_id = 303');
    const sweep = new MediaOrphanSweep(media, { intervalSec: 0, graceSec: 3_600 }, createLogger('silent'));
    sweep.start();
    try {
      for (let i = 0; i < 100 && sweep.collected.rows === 0; i++) await new Promise((r) => setTimeout(r, 50));
    } finally {
      await sweep.stop();
    }
    expect(sweep.collected.rows).toBe(1);
    expect(await blobRow(s)).toBe(0);
    expect(await backend.store.size(originalKey(s))).toBeUndefined();
  });

  it('S3 store: bytes with no row and renditions of a hash with no row are listed with their dates and collected', async () => {
    const s3 = await s3Backend();
    try {
      const media = pipeline(s3.store);
      const kept = await media.ensure({ chainId: 304, contract: CONTRACT, tokenId: '1', field: 'image' }, `${origin.url}/d.png`);
      await s3.store.put(originalKey(sha(4)), png, 'image/png');
      await s3.store.put(renditionKey(sha(4), 'w64.webp'), png, 'image/webp');
      await s3.store.put(renditionKey(sha(5), 'w64.webp'), png, 'image/webp');
      const listed = await s3.store.entries('');
      expect(listed.every((e) => e.modifiedAt.getTime() > Date.now() - 600_000)).toBe(true);
      // S3 dates have a second's resolution: let a second pass, then sweep with no grace.
      await new Promise((r) => setTimeout(r, 1_100));
      const r = await media.sweepOrphans(0);
      // sha(4)'s original goes with its renditions in one delete; sha(5)'s rendition on its own.
      expect(r).toEqual({ rows: 0, originals: 1, renditions: 1 });
      expect(await s3.store.list('')).toEqual([originalKey(kept.blob!.sha256)]);
      expect(await blobRow(kept.blob!.sha256)).toBe(1);
      await media.forgetChain(304);
    } finally {
      await s3.stop();
    }
  });
});
