// Media end to end: tokens on a real anvil whose documents point at media on a local origin;
// the API's `assets`, the /media routes, their headers, ranges, failures and refresh re-checks.
// Judged by the bytes served and the blob store's contents.

import { createHash } from 'node:crypto';
import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import sharp from 'sharp';
import { originalKey } from '../src/media/blob-store.ts';
import { startTestService, type TestService } from './support/service.ts';
import { getRest, getTokenMetadata, secondProcess, startRawServer, startTokenChain, type RawServer, type TokenChain } from './support/token-chain.ts';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fakeMp4, solidPng } from './support/media.ts';

let chain: TokenChain;
let origin: RawServer;
let t: TestService;
let tt: Address;
const files = new Map<string, [string, Buffer]>();
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20" onload="alert(1)"><rect width="40" height="20" fill="#ff0000"/></svg>';

type Asset = { id: number; url: string; metadataField: string; mimeType: string; filesize?: number; width?: number; height?: number; filename: string; name: string; updatedAt: string };

beforeAll(async () => {
  [chain, origin] = await Promise.all([
    startTokenChain(),
    startRawServer((_req, res, url) => {
      const f = files.get(url.pathname);
      if (!f) return res.writeHead(404).end();
      res.writeHead(200, { 'content-type': f[0] }).end(f[1]);
    }),
  ]);
  const doc = (o: object) => ['application/json', Buffer.from(JSON.stringify(o))] as [string, Buffer];
  files.set('/img/1.png', ['image/png', await solidPng(600, 400)]);
  files.set('/clip.mp4', ['video/mp4', fakeMp4(50_000)]);
  files.set('/img/bad.png', ['image/png', Buffer.from('<html><script>alert(1)</script></html>')]);
  files.set('/img/4.png', ['image/png', await solidPng(100, 100, '#00ff00')]);
  files.set('/t/1', doc({ name: 'one', image: `${origin.url}/img/1.png`, animation_url: `${origin.url}/clip.mp4` }));
  files.set('/t/2', doc({ name: 'two', image: `${origin.url}/img/bad.png` }));
  files.set('/t/3', doc({ name: 'three', image_data: SVG }));
  files.set('/t/4', doc({ name: 'four', image: `${origin.url}/img/4.png` }));
  files.set('/t/5', doc({ name: 'five', image: `${origin.url}/img/1.png` }));
  [tt] = await chain.deploy([{ contract: 'TestTokenURI' }]);
  await chain.send(['1', '2', '3', '4', '5'].map((id) => ({ address: tt, contract: 'TestTokenURI', functionName: 'setTokenURI', args: [BigInt(id), `${origin.url}/t/${id}`] })));
  t = await startTestService({ chains: [chain.chainConfig], metadata: { inlineWaitMs: 30_000, hotCacheTtlMs: 0 } });
}, 60_000);

afterAll(async () => {
  await t?.close();
  await Promise.all([chain?.stop(), origin?.stop()]);
});

const media = () => t.services.media!;
const get = (url: string, headers: Record<string, string> = {}) => t.app.inject({ method: 'GET', url, headers });

describe('assets of TokenMetadata', () => {
  it('fills one entry per stored media field after the token resolves (eager), with both filename and name', async () => {
    await getTokenMetadata(t, tt, ['1', '2', '3', '4']);
    await media().idle();
    const [one, two, three] = await getTokenMetadata(t, tt, ['1', '2', '3']);
    const assets = (one as unknown as { assets: Asset[] }).assets;
    const png = files.get('/img/1.png')![1];
    const mp4 = files.get('/clip.mp4')![1];
    expect(assets.map((a) => a.metadataField)).toEqual(['animation_url', 'image']);
    expect(assets[1]).toMatchObject({
      url: `${media().publicUrl}/media/b/${sha(png)}/original`,
      mimeType: 'image/png',
      filesize: png.length,
      width: 600,
      height: 400,
      filename: '1.png',
      name: '1.png',
    });
    expect(assets[0]).toMatchObject({ url: `${media().publicUrl}/media/b/${sha(mp4)}/original`, mimeType: 'video/mp4', filesize: mp4.length });
    expect(assets[0].width).toBeUndefined();
    // The HTML "image" is no asset; the SVG is offered rasterised only.
    expect((two as { assets?: unknown }).assets).toBeUndefined();
    expect((three as unknown as { assets: Asset[] }).assets).toEqual([expect.objectContaining({ metadataField: 'image_data', mimeType: 'image/webp', width: 1024, height: 512 })]);
    expect((three as unknown as { assets: Asset[] }).assets[0].url).toMatch(/\/1024\.webp$/);
    // The REST form carries them too.
    const rest = await getRest(t, `/tokens/anvil/${tt}/1`);
    expect(rest.body[0].assets).toHaveLength(2);
  });
});

describe('/media routes', () => {
  it('redirects a token field to its rendition, picked by width and Accept, and serves it immutable with sandboxing headers', async () => {
    const png = files.get('/img/1.png')![1];
    const r = await get(`/media/anvil/${tt}/1/image?w=200`, { accept: 'image/png,image/*;q=0.8' });
    expect(r.statusCode).toBe(302);
    expect(r.headers.location).toBe(`/media/b/${sha(png)}/256.png`);
    expect(r.headers.vary).toBe('Accept');
    const img = await get(r.headers.location as string);
    expect(img.statusCode).toBe(200);
    expect(img.headers['content-type']).toBe('image/png');
    expect(img.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(img.headers['x-content-type-options']).toBe('nosniff');
    expect(img.headers['content-security-policy']).toBe("default-src 'none'; style-src 'unsafe-inline'; sandbox");
    const meta = await sharp(img.rawPayload).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['png', 256, 171]);
    const again = await get(r.headers.location as string, { 'if-none-match': img.headers.etag as string });
    expect(again.statusCode).toBe(304);
    expect(again.rawPayload.length).toBe(0);
    // A browser that takes WebP gets WebP; no width means the original.
    expect((await get(`/media/anvil/${tt}/1/image?w=64`, { accept: 'image/avif,image/webp,*/*' })).headers.location).toBe(`/media/b/${sha(png)}/64.webp`);
    const original = await get(`/media/b/${sha(png)}/original`);
    expect(original.headers['content-type']).toBe('image/png');
    expect(original.rawPayload).toEqual(png);
  });

  it('fetches lazily a token nobody asked about, and answers a failed asset with 404 and its reason, never an image', async () => {
    const lazy = await get(`/media/anvil/${tt}/5/image?w=512`);
    expect(lazy.statusCode).toBe(302);
    const bad = await get(`/media/anvil/${tt}/2/image`);
    expect(bad.statusCode).toBe(404);
    expect(bad.headers['content-type']).toMatch(/^application\/json/);
    expect(bad.json()).toMatchObject({ reason: 'UNSUPPORTED_TYPE', status: 404 });
    expect((await get(`/media/anvil/${tt}/2/animation_url`)).json()).toMatchObject({ reason: 'NO_MEDIA' });
  });

  it('never serves SVG as SVG: the field redirects to a raster, the original is refused', async () => {
    const r = await get(`/media/anvil/${tt}/3/image_data`);
    expect(r.statusCode).toBe(302);
    expect(r.headers.location).toMatch(/^\/media\/b\/[0-9a-f]{64}\/1024\.webp$/);
    const img = await get(r.headers.location as string);
    expect(img.headers['content-type']).toBe('image/webp');
    expect((await sharp(img.rawPayload).metadata()).width).toBe(1024);
    const refused = await get((r.headers.location as string).replace('1024.webp', 'original'));
    expect(refused.statusCode).toBe(404);
    expect(refused.json().reason).toBe('SVG_NOT_SERVED');
    expect(refused.rawPayload.toString()).not.toContain('<svg');
  });

  it('serves video with byte ranges', async () => {
    const mp4 = files.get('/clip.mp4')![1];
    const url = `/media/b/${sha(mp4)}/original`;
    const part = await get(url, { range: 'bytes=100-199' });
    expect(part.statusCode).toBe(206);
    expect(part.headers['content-range']).toBe(`bytes 100-199/${mp4.length}`);
    expect(part.headers['content-type']).toBe('video/mp4');
    expect(part.rawPayload).toEqual(mp4.subarray(100, 200));
    const tail = await get(url, { range: 'bytes=-10' });
    expect(tail.rawPayload).toEqual(mp4.subarray(mp4.length - 10));
    expect((await get(url, { range: `bytes=${mp4.length}-` })).statusCode).toBe(416);
    expect((await get(url.replace('original', '256.webp'))).json().reason).toBe('NOT_AN_IMAGE');
  });

  it('answers hostile and malformed requests with clear client errors', async () => {
    const png = files.get('/img/1.png')![1];
    for (const [url, status, reason] of [
      ['/media/b/../../etc/passwd/original', 404, undefined],
      ['/media/b/ZZZ/original', 404, 'INVALID_ARGUMENT'],
      [`/media/b/${'0'.repeat(64)}/original`, 404, 'UNKNOWN_BLOB'],
      [`/media/b/${sha(png)}/100000.webp`, 404, 'UNKNOWN_RENDITION'],
      [`/media/b/${sha(png)}/..%2F..%2Fo`, 404, 'UNKNOWN_RENDITION'],
    ] as const) {
      const r = await get(url);
      expect(r.statusCode, url).toBe(status);
      if (reason) expect(r.json().reason, url).toBe(reason);
    }
    expect((await get(`/media/anvil/${tt}/1/thumbnail`)).statusCode).toBe(400);
    expect((await get(`/media/anvil/${tt}/1/image?w=abc`)).statusCode).toBe(400);
    expect((await get(`/media/anvil/${tt}/1/image?w=0`)).statusCode).toBe(400);
    expect((await get(`/media/anvil/0x1234/1/image`)).statusCode).toBe(400);
    expect((await get(`/media/nochain/${tt}/1/image`)).statusCode).toBeLessThan(500);
  });
});

describe('refresh', () => {
  it('re-checks cached media: changed bytes at the same URL make a new blob and the old one is collected', async () => {
    const before = (await media().asset({ chainId: chain.chainConfig.chainId, contract: tt.toLowerCase(), tokenId: '4', field: 'image' }))!;
    expect(before.status).toBe('READY');
    const oldSha = before.blob!.sha256;
    // Served (and so held in the process's hot cache) before the change.
    expect((await get(`/media/b/${oldSha}/64.webp`)).statusCode).toBe(200);
    files.set('/img/4.png', ['image/png', await solidPng(100, 100, '#0000ff')]);
    await t.services.tokens.refresh(t.services.chains.get(chain.chainConfig.chainId)!, tt.toLowerCase() as Address, ['4']);
    await media().idle();
    const after = (await media().asset(before.key))!;
    expect(after.blob!.sha256).toBe(sha(files.get('/img/4.png')![1]));
    expect(await media().blobs.get(originalKey(oldSha))).toBeUndefined();
    const { rows } = await t.services.db.query('SELECT 1 FROM media_blobs WHERE sha256 = $1', [oldSha]);
    expect(rows).toHaveLength(0);
    expect(await media().blobs.list(`r/${oldSha}/`)).toEqual([]);
    // Nothing of the collected blob is served any more, from the store or from memory.
    const gone = await get(`/media/b/${oldSha}/64.webp`);
    expect(gone.statusCode).toBe(404);
    expect(gone.json().reason).toBe('UNKNOWN_BLOB');
  });
});

describe('config', () => {
  it('media.rewriteImage puts the cached URL in image; media.enabled false has no routes and no assets', async () => {
    const rewriting = await secondProcess(t, { chains: [chain.chainConfig], media: { rewriteImage: true, eager: false, store: { type: 'folder', path: mkdtempSync(join(tmpdir(), 'mr-media-')) } } });
    const off = await secondProcess(t, { chains: [chain.chainConfig], media: { enabled: false } });
    try {
      const [one] = await getTokenMetadata({ app: rewriting.app, accessKey: t.accessKey }, tt, ['1']);
      expect(one.image).toBe(`${rewriting.services.media!.publicUrl}/media/b/${sha(files.get('/img/1.png')![1])}/original`);
      // The field's route serves the stored asset; it does not fetch its own URL.
      const r = await rewriting.app.inject({ method: 'GET', url: `/media/anvil/${tt}/1/image` });
      expect(r.headers.location).toBe(`/media/b/${sha(files.get('/img/1.png')![1])}/original`);
      // The origin's URL is still in the raw document.
      expect((await getRest({ app: rewriting.app }, `/tokens/anvil/${tt}/1/explain`)).body.raw.image).toBe(`${origin.url}/img/1.png`);
      const [plain] = await getTokenMetadata({ app: off.app, accessKey: t.accessKey }, tt, ['1']);
      expect(plain.image).toBe(`${origin.url}/img/1.png`);
      expect((plain as { assets?: unknown }).assets).toBeUndefined();
      expect((await off.app.inject({ method: 'GET', url: `/media/anvil/${tt}/1/image` })).statusCode).toBe(404);
    } finally {
      await Promise.all([rewriting.close(), off.close()]);
    }
  });
});
