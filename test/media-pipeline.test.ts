// The media pipeline below HTTP: real origin servers, a real database, real blob stores (a folder
// and a local S3 server). Each bad file must end as a FAILED asset with its reason, with nothing
// stored: judged by the rows and the blob store's contents, not by what the service reports.

import { createHash } from 'node:crypto';
import type http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileTypeFromBuffer } from 'file-type';
import sharp from 'sharp';
import { createFetcher, type Fetcher } from '../src/metadata/fetch/fetch.ts';
import { mediaStore } from '../src/media/media-store.ts';
import { originalKey, renditionKey } from '../src/media/blob-store.ts';
import { MediaService } from '../src/media/service.ts';
import { createBlobStore } from '../src/media/index.ts';
import { s3BlobStore } from '../src/media/s3-store.ts';
import { parseConfig } from '../src/config/load.ts';
import { parseRendition } from '../src/media/renditions.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { startRawServer, type RawServer } from './support/token-chain.ts';
import { animatedGif, bombPng, fakeMp4, folderBackend, manyFrameGif, noisyPng, s3Backend, solidPng, testMediaOptions, type BlobBackend } from './support/media.ts';

const LIMITS = { maxInputPixels: 40_000_000, maxFrames: 500 };
const CAP = 1024 * 1024;

/** Files the origin serves: path -> [content type, bytes]. */
const files = new Map<string, [string, Buffer]>();
let origin: RawServer;
let privateTarget: RawServer;
let testDb: TestDb;
let fetcher: Fetcher;
const slow = { open: 0, peak: 0 };

function serve(_req: http.IncomingMessage, res: http.ServerResponse, url: URL) {
  if (url.pathname === '/drip') {
    // One byte every 200 ms, forever: only the deadline ends it.
    res.writeHead(200, { 'content-type': 'image/png' });
    const t = setInterval(() => res.write(Buffer.from([0x89])), 200);
    res.on('close', () => clearInterval(t));
    return;
  }
  if (url.pathname.startsWith('/slow/')) {
    // Answers after 150 ms, counting how many such requests are open at once.
    slow.open++;
    slow.peak = Math.max(slow.peak, slow.open);
    setTimeout(() => {
      slow.open--;
      res.writeHead(200, { 'content-type': 'image/png' }).end(files.get('/a.png')![1]);
    }, 150);
    return;
  }
  if (url.pathname === '/to-private') {
    res.writeHead(302, { location: `${privateTarget.url}/secret.png` });
    return res.end();
  }
  if (url.pathname === '/huge-chunked') {
    // No Content-Length: the cap has to be enforced while streaming.
    res.writeHead(200, { 'content-type': 'image/png' });
    const chunk = Buffer.alloc(64 * 1024, 7);
    let sent = 0;
    const pump = () => {
      while (sent < 4 * CAP) {
        sent += chunk.length;
        if (!res.write(chunk)) return res.once('drain', pump);
      }
      res.end();
    };
    return pump();
  }
  const f = files.get(url.pathname);
  if (!f) {
    res.writeHead(404);
    return res.end();
  }
  res.writeHead(200, { 'content-type': f[0], 'content-length': f[1].length });
  res.end(f[1]);
}

beforeAll(async () => {
  [origin, privateTarget, testDb] = await Promise.all([startRawServer(serve), startRawServer((_req, res) => res.end('private')), createTestDb()]);
  // The guard is on: only the origin is allowed, so a redirect elsewhere on loopback is refused.
  fetcher = createFetcher({ allowPrivateNetworks: false, allowedPrivateHosts: [`127.0.0.1:${origin.port}`], ipfsGateways: ['https://ipfs.io/ipfs/'] });
  const png = await solidPng(800, 600);
  files.set('/a.png', ['image/png', png]);
  files.set('/same-as-a.jpg', ['image/jpeg', png]); // the extension and type lie; the bytes decide
  files.set('/b.png', ['image/png', await solidPng(300, 200, '#ff0000')]);
  files.set('/anim.gif', ['image/gif', await animatedGif(3)]);
  files.set('/clip.mp4', ['video/mp4', fakeMp4(100_000)]);
  files.set('/bomb.png', ['image/png', await bombPng(60_000, 60_000)]);
  const noisy = await noisyPng(300, 300);
  files.set('/truncated.png', ['image/png', noisy.subarray(0, Math.floor(noisy.length / 2))]);
  files.set('/page.png', ['image/png', Buffer.from('<!doctype html><html><body><script>alert(1)</script></body></html>')]);
  files.set('/frames.gif', ['image/gif', manyFrameGif(10_000)]);
  files.set('/big.png', ['image/png', Buffer.concat([png, Buffer.alloc(CAP)])]);
  files.set('/laughs.svg', [
    'image/svg+xml',
    Buffer.from(
      `<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>` +
        `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><text>&c;</text></svg>`,
    ),
  ]);
  files.set('/hostile.svg', [
    'image/svg+xml',
    Buffer.from(
      `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="100" height="50" onload="alert(1)">` +
        `<script>alert(2)</script><a xlink:href="javascript:alert(3)"><rect width="100" height="50" fill="#00ff00" onclick="alert(4)"/></a>` +
        `<image href="${origin.url}/tracker.png" width="10" height="10"/><image xlink:href="file:///etc/passwd" width="10" height="10"/>` +
        `<style>@import url(${origin.url}/tracker.css);</style></svg>`,
    ),
  ]);
}, 60_000);

afterAll(async () => {
  fetcher?.close();
  await Promise.all([origin?.stop(), privateTarget?.stop(), testDb?.drop()]);
});

function pipeline(backend: BlobBackend, opts: Partial<{ fetchTimeoutMs: number }> = {}) {
  return new MediaService({
    store: mediaStore(testDb.db),
    blobs: backend.store,
    fetcher,
    log: createLogger('silent'),
    options: testMediaOptions({ ...LIMITS, maxBytes: CAP, fetchTimeoutMs: opts.fetchTimeoutMs ?? 10_000 }),
  });
}

let tokenSeq = 0;
const key = (field: 'image' | 'animation_url' = 'image') => ({ chainId: 31337, contract: '0x00000000000000000000000000000000000000aa', tokenId: String(++tokenSeq), field });

async function blobRows(): Promise<string[]> {
  const { rows } = await testDb.db.query<{ sha256: string }>('SELECT sha256 FROM media_blobs ORDER BY sha256');
  return rows.map((r) => r.sha256);
}

for (const makeBackend of [folderBackend, s3Backend]) {
  describe(`blob store: ${makeBackend.name.replace('Backend', '')}`, () => {
    let backend: BlobBackend;
    beforeAll(async () => {
      backend = await makeBackend();
      await testDb.db.query('DELETE FROM media_assets');
      await testDb.db.query('DELETE FROM media_blobs');
    });
    afterAll(() => backend?.stop());

    it('stores an original once by SHA-256 (type from the bytes), renders widths and formats, and collects the old blob when the URL changes', async () => {
      const media = pipeline(backend);
      const png = files.get('/a.png')![1];
      const sha = createHash('sha256').update(png).digest('hex');
      const k1 = key();
      const a = await media.ensure(k1, `${origin.url}/a.png`);
      expect(a).toMatchObject({ status: 'READY', blob: { sha256: sha, mimeType: 'image/png', width: 800, height: 600, filesize: png.length } });
      // Same bytes behind a lying .jpg URL: one blob, typed by its content.
      const k2 = key();
      expect((await media.ensure(k2, `${origin.url}/same-as-a.jpg`)).blob).toMatchObject({ sha256: sha, mimeType: 'image/png' });
      expect(await backend.store.get(originalKey(sha))).toEqual(png);
      expect(await blobRows()).toEqual([sha]);

      for (const [name, mime, width] of [
        ['64.webp', 'image/webp', 64],
        ['256.png', 'image/png', 256],
        ['512.jpg', 'image/jpeg', 512],
      ] as const) {
        const r = await media.rendition(a.blob!, parseRendition(name)!);
        if (!r.ok) throw new Error(r.message);
        expect((await fileTypeFromBuffer(r.bytes))?.mime).toBe(mime);
        expect(r.contentType).toBe(mime);
        const meta = await sharp(r.bytes).metadata();
        expect([meta.width, meta.height]).toEqual([width, Math.round((600 * width) / 800)]);
        // Cached: the blob store holds exactly these bytes under the rendition's key.
        expect(await backend.store.get(renditionKey(sha, name))).toEqual(r.bytes);
      }
      // Byte ranges (what video/audio serving uses).
      expect(await backend.store.getRange(originalKey(sha), 1, 3)).toEqual(png.subarray(1, 4));
      expect(await backend.store.size(originalKey(sha))).toBe(png.length);
      const streamed = async (range?: { start: number; end: number }) => Buffer.concat(await (await backend.store.stream(originalKey(sha), range))!.toArray());
      expect(await streamed({ start: 10, end: 99 })).toEqual(png.subarray(10, 100));
      expect(await streamed()).toEqual(png);
      expect(await backend.store.stream(originalKey('f'.repeat(64)))).toBeUndefined();

      // k1 moves to another image, k2 still holds the first: nothing is collected yet.
      const b = await media.ensure(k1, `${origin.url}/b.png`);
      expect(b.blob?.sha256).not.toBe(sha);
      expect((await blobRows()).sort()).toEqual([sha, b.blob!.sha256].sort());
      // The last reference goes: row, original and renditions are gone.
      await media.ensure(k2, `${origin.url}/b.png`);
      expect(await blobRows()).toEqual([b.blob!.sha256]);
      expect(await backend.store.list(`o/${sha}`)).toEqual([]);
      expect(await backend.store.list(`r/${sha}/`)).toEqual([]);
      expect(await backend.store.list('o/')).toEqual([`o/${b.blob!.sha256}`]);
    });

    it('keeps animation in WebP renditions, has a still one, and passes video through', async () => {
      const media = pipeline(backend);
      const gif = await media.ensure(key(), `${origin.url}/anim.gif`);
      expect(gif.blob).toMatchObject({ mimeType: 'image/gif', width: 40, height: 30, frames: 3 });
      const moving = await media.rendition(gif.blob!, parseRendition('256.webp')!);
      const still = await media.rendition(gif.blob!, parseRendition('256-still.webp')!);
      if (!moving.ok || !still.ok) throw new Error('render failed');
      expect((await sharp(moving.bytes, { animated: true }).metadata()).pages).toBe(3);
      expect((await sharp(still.bytes, { animated: true }).metadata()).pages ?? 1).toBe(1);

      const clip = await media.ensure(key('animation_url'), `${origin.url}/clip.mp4`);
      expect(clip.blob).toMatchObject({ mimeType: 'video/mp4', width: null });
      expect(await backend.store.get(originalKey(clip.blob!.sha256))).toEqual(files.get('/clip.mp4')![1]);
      expect(await media.rendition(clip.blob!, parseRendition('64.webp')!)).toMatchObject({ ok: false, reason: 'NOT_AN_IMAGE' });
    });
  });
}

describe('config', () => {
  it('builds the S3 store from the config with credentials from the environment, and refuses an S3 store without a bucket', async () => {
    const backend = await s3Backend();
    const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };
    process.env.AWS_ACCESS_KEY_ID = 'S3RVER';
    process.env.AWS_SECRET_ACCESS_KEY = 'S3RVER';
    try {
      const config = parseConfig({ media: { store: { type: 's3', bucket: 'metarelay-media', endpoint: backend.endpoint, forcePathStyle: true, prefix: 'cfg/' } } });
      const store = createBlobStore(config);
      expect(store.kind).toBe('s3');
      await store.put('o/' + 'a'.repeat(64), Buffer.from('hello'), 'text/plain');
      // Ground truth through the other client: the object sits under the configured prefix.
      expect(await backend.store.list('')).toEqual([]);
      expect(
        (
          await s3BlobStore({
            bucket: 'metarelay-media',
            region: 'us-east-1',
            endpoint: backend.endpoint,
            forcePathStyle: true,
            credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
            prefix: 'cfg/',
          }).get('o/' + 'a'.repeat(64))
        )?.toString(),
      ).toBe('hello');
      store.close();
    } finally {
      process.env.AWS_ACCESS_KEY_ID = saved.id;
      process.env.AWS_SECRET_ACCESS_KEY = saved.secret;
      if (saved.id === undefined) delete process.env.AWS_ACCESS_KEY_ID;
      if (saved.secret === undefined) delete process.env.AWS_SECRET_ACCESS_KEY;
      await backend.stop();
    }
    expect(() => parseConfig({ media: { store: { type: 's3' } } })).toThrow(/media\.store\.bucket/);
    expect(() => parseConfig({ media: { store: { type: 'ftp' } } })).toThrow(/media\.store/);
  });
});

describe('bad media (each a FAILED asset with its reason; nothing stored)', () => {
  let backend: BlobBackend;
  beforeAll(async () => {
    backend = folderBackend();
    await testDb.db.query('DELETE FROM media_assets');
    await testDb.db.query('DELETE FROM media_blobs');
  });
  afterAll(() => backend?.stop());

  const cases: Array<[string, string, RegExp?]> = [
    ['a decompression bomb (60 000 × 60 000 in a few bytes)', '/bomb.png', /TOO_MANY_PIXELS/],
    ['a truncated PNG', '/truncated.png', /UNDECODABLE/],
    ['HTML served as image/png', '/page.png', /UNSUPPORTED_TYPE/],
    ['a 10 000-frame GIF', '/frames.gif', /TOO_MANY_FRAMES/],
    ['an SVG with entity expansion ("billion laughs")', '/laughs.svg', /SVG_ENTITIES/],
    ['a file over the byte cap (Content-Length)', '/big.png', /TOO_LARGE/],
    ['a file over the byte cap (chunked, no length)', '/huge-chunked', /TOO_LARGE/],
    ['a redirect to a private address', '/to-private', /BLOCKED_ADDRESS/],
    ['a slow drip', '/drip', /TIMEOUT/],
  ];
  for (const [name, path, reason] of cases) {
    it(name, async () => {
      const media = pipeline(backend, { fetchTimeoutMs: 1_500 });
      const k = key();
      const a = await media.ensure(k, `${origin.url}${path}`);
      expect(a.status).toBe('FAILED');
      expect(a.failureReason).toMatch(reason!);
      expect(a.failureMessage).toBeTruthy();
      expect(a.retryAfter!.getTime()).toBeGreaterThan(Date.now());
      // Ground truth: no blob row, nothing in the store.
      expect(await blobRows()).toEqual([]);
      expect(await backend.store.list('')).toEqual([]);
      if (path === '/to-private') expect(privateTarget.requestCount()).toBe(0);
      // Failed and not yet due: asking again does not fetch again.
      const before = origin.requestCount(path);
      expect((await media.ensure(k, `${origin.url}${path}`)).failureReason).toBe(a.failureReason);
      expect(origin.requestCount(path)).toBe(before);
    });
  }

  it('an SVG with scripts, event handlers, javascript: links and external references renders, reaching nothing', async () => {
    const media = pipeline(backend);
    const a = await media.ensure(key(), `${origin.url}/hostile.svg`);
    expect(a).toMatchObject({ status: 'READY', blob: { mimeType: 'image/svg+xml', width: 100, height: 50 } });
    const stored = (await backend.store.get(originalKey(a.blob!.sha256)))!.toString('utf8');
    for (const bad of ['<script', 'onload', 'onclick', 'javascript:', 'tracker', 'file:', '@import']) expect(stored).not.toContain(bad);
    const r = await media.rendition(a.blob!, parseRendition('256.png')!);
    if (!r.ok) throw new Error(r.message);
    const { data, info } = await sharp(r.bytes).raw().toBuffer({ resolveWithObject: true });
    expect([info.width, info.height]).toEqual([256, 128]);
    // The rectangle is drawn (green), so the document really was rendered.
    expect([data[0], data[1], data[2]]).toEqual([0, 255, 0]);
    expect(origin.requestCount('/tracker.png') + origin.requestCount('/tracker.css')).toBe(0);
  });
});

describe('the eager queue', () => {
  it('fetches with its own concurrency and drops work past its bound (fetched lazily later)', async () => {
    const backend = folderBackend();
    try {
      const media = new MediaService({
        store: mediaStore(testDb.db),
        blobs: backend.store,
        fetcher,
        log: createLogger('silent'),
        options: testMediaOptions({ ...LIMITS, maxBytes: CAP, maxQueued: 6 }),
      });
      const keys = Array.from({ length: 10 }, () => key());
      const accepted = keys.map((k, i) => media.enqueue(k, `${origin.url}/slow/${i}`));
      expect(accepted).toEqual([true, true, true, true, true, true, false, false, false, false]);
      await media.idle();
      // Ground truth at the origin: never more than two media fetches open at once, six in all.
      expect(slow.peak).toBe(2);
      expect(Array.from({ length: 10 }, (_, i) => origin.requestCount(`/slow/${i}`))).toEqual([1, 1, 1, 1, 1, 1, 0, 0, 0, 0]);
      expect((await Promise.all(keys.map((k) => media.asset(k)))).map((a) => a?.status ?? null)).toEqual([...Array(6).fill('READY'), ...Array(4).fill(null)]);
    } finally {
      await backend.stop();
    }
  });
});

describe('per-host shares', () => {
  it('ten images that never finish hold their host’s share; another host’s image is cached meanwhile', async () => {
    // A host whose images send their first bytes and then nothing, for as long as the test lasts.
    const stalled = { open: 0, peak: 0 };
    const endless = await startRawServer((_req, res) => {
      stalled.open++;
      stalled.peak = Math.max(stalled.peak, stalled.open);
      res.on('close', () => stalled.open--);
      res.writeHead(200, { 'content-type': 'image/png' }).write(files.get('/a.png')![1].subarray(0, 64));
    });
    const backend = folderBackend();
    const media = new MediaService({
      store: mediaStore(testDb.db),
      blobs: backend.store,
      fetcher: createFetcher({ allowPrivateNetworks: true, ipfsGateways: [] }),
      log: createLogger('silent'),
      // The default share of a host (2 of 4); no stall deadline here, so only the share can help.
      options: testMediaOptions({ ...LIMITS, maxBytes: CAP, fetchTimeoutMs: 120_000, concurrency: 4 }),
    });
    try {
      for (let i = 0; i < 10; i++) media.enqueue(key(), `${endless.url}/never/${i}.png`);
      for (const deadline = Date.now() + 30_000; stalled.open < 2 && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 20));

      // The second host's image, asked while the stalling host holds what it may.
      const asset = await media.ensure(key(), `${origin.url}/b.png`);
      expect(asset.status).toBe('READY');
      // Ground truth at the stalling host: its share and no more, though ten of its files wait.
      expect(stalled.peak).toBe(2);
      expect(endless.requestCount()).toBe(2);
    } finally {
      await endless.stop();
      await media.idle();
      await backend.stop();
    }
  });
});
