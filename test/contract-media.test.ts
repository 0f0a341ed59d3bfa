// Contract media (issue #16): a contract's logoURI and extensions.ogImage go through the same
// SSRF-safe media pipeline as token media, are served from this origin with the same headers, and
// contract answers (and the console's directory) carry the cached URL as a metarelay extra. Hostile
// logos are test cases: an SVG with script, a logo on a private address, a logo over the byte cap.
import { createHash } from 'node:crypto';
import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import sharp from 'sharp';
import { originalKey } from '../src/media/blob-store.ts';
import { consoleClient, bearer } from './console/support.ts';
import { startTestService, type TestService, asOperator } from './support/service.ts';
import { startRawServer, startTokenChain, type RawServer, type TokenChain } from './support/token-chain.ts';
import { solidPng } from './support/media.ts';
import { randomBytes } from 'node:crypto';

const ADMIN = 'contract-media-admin-token-0123456789';
const CAP = 300_000;
let chain: TokenChain;
let origin: RawServer;
let t: TestService;
const files = new Map<string, [string, Buffer]>();
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const HOSTILE_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40" onload="alert(1)"><script>alert(2)</script>' +
  '<image href="http://127.0.0.1:1/tracker.png" width="4" height="4"/><rect width="40" height="40" fill="#0000ff"/></svg>';

beforeAll(async () => {
  [chain, origin] = await Promise.all([
    startTokenChain(),
    startRawServer((_req, res, url) => {
      const f = files.get(url.pathname);
      if (!f) return res.writeHead(404).end();
      res.writeHead(200, { 'content-type': f[0] }).end(f[1]);
    }),
  ]);
  files.set('/logo.png', ['image/png', await solidPng(200, 200, '#aa3300')]);
  files.set('/og.png', ['image/png', await solidPng(600, 315, '#0033aa')]);
  files.set('/logo.svg', ['image/svg+xml', Buffer.from(HOSTILE_SVG)]);
  // Noise does not compress: well over the cap.
  files.set('/huge.png', [
    'image/png',
    await sharp({ create: { width: 800, height: 800, channels: 3, background: '#000', noise: { type: 'gaussian', mean: 128, sigma: 60 } } })
      .png()
      .toBuffer(),
  ]);
  // The SSRF guard is on: only the origin is allowed among private addresses.
  t = await startTestService({
    allowPrivateNetworks: false,
    chains: [chain.chainConfig],
    admin: { tokens: [ADMIN] },
    metadata: { inlineWaitMs: 30_000, allowedPrivateHosts: [`127.0.0.1:${origin.port}`] },
    media: { maxBytes: CAP },
  });
}, 60_000);

afterAll(async () => {
  await t?.close();
  await Promise.all([chain?.stop(), origin?.stop()]);
});

const media = () => t.services.media!;
const get = (url: string, headers: Record<string, string> = {}) => t.app.inject({ method: 'GET', url, headers: { 'x-access-key': t.accessKey, ...headers } });
const network = () => chain.chainConfig.name;

/** A contract whose ContractInfo names these media (an operator's override layer, as `metarelay contracts override` writes). */
async function contractWith(logoURI: string, ogImage?: string): Promise<Address> {
  const address = `0x${randomBytes(20).toString('hex')}` as Address;
  await t.services.contractStore.upsertLayers(chain.chainConfig.chainId, [{ address, override: { name: 'Logo Co', logoURI, ...(ogImage ? { extensions: { ogImage } } : {}) } }]);
  return address;
}

async function contractInfo(address: Address) {
  const r = await t.app.inject({
    method: 'POST',
    url: '/rpc/Metadata/GetContractInfo',
    headers: { 'content-type': 'application/json', 'x-access-key': t.accessKey },
    payload: { chainID: network(), contractAddress: address },
  });
  expect(r.statusCode, r.body).toBe(200);
  return r.json().contractInfo;
}

function expectMediaHeaders(h: Record<string, unknown>) {
  expect(h['x-content-type-options']).toBe('nosniff');
  expect(h['content-security-policy']).toBe("default-src 'none'; style-src 'unsafe-inline'; sandbox");
}

describe('contract logo and og:image', () => {
  it("are fetched after a contract answer, stored once, and carried as cachedMedia; the Sequence fields stay the source's", async () => {
    const logo = `${origin.url}/logo.png`;
    const og = `${origin.url}/og.png`;
    const address = await contractWith(logo, og);
    const first = await contractInfo(address);
    expect(first.logoURI).toBe(logo);
    await media().idle();
    const info = await contractInfo(address);
    expect(info.logoURI).toBe(logo);
    expect(info.extensions.ogImage).toBe(og);
    expect(info.cachedMedia).toEqual({
      logo: `${media().publicUrl}/media/b/${sha(files.get('/logo.png')![1])}/original`,
      ogImage: `${media().publicUrl}/media/b/${sha(files.get('/og.png')![1])}/original`,
    });
  });

  it('are queued only for a caller with an access key: a keyless read of the contract fetches no logo (issue 54)', async () => {
    files.set('/keyless-logo.png', ['image/png', await solidPng(120, 120, '#33aa00')]);
    const logo = `${origin.url}/keyless-logo.png`;
    const address = await contractWith(logo);
    const keyless = await t.app.inject({ method: 'GET', url: `/tokens/${network()}/${address}` });
    expect(keyless.statusCode, keyless.body).toBe(200);
    expect(keyless.json().logoURI).toBe(logo);
    await media().idle();
    expect(origin.requestCount('/keyless-logo.png')).toBe(0);
    // The next keyed read queues it (the keyless lookup left nothing remembered that would hide it).
    await contractInfo(address);
    await media().idle();
    expect(origin.requestCount('/keyless-logo.png')).toBe(1);
    expect((await contractInfo(address)).cachedMedia?.logo).toBe(`${media().publicUrl}/media/b/${sha(files.get('/keyless-logo.png')![1])}/original`);
  });

  it('are served by /media/<network>/<contract>/contract/<logo|og_image> with the media security headers, ?w= giving a rendition', async () => {
    const address = await contractWith(`${origin.url}/logo.png`, `${origin.url}/og.png`);
    const r = await get(`/media/${network()}/${address}/contract/logo`);
    expect(r.statusCode, r.body).toBe(302);
    expectMediaHeaders(r.headers);
    const png = files.get('/logo.png')![1];
    expect(r.headers.location).toBe(`/media/b/${sha(png)}/original`);
    const body = await get(String(r.headers.location));
    expect(body.statusCode).toBe(200);
    expectMediaHeaders(body.headers);
    expect(body.headers['content-type']).toBe('image/png');
    expect(body.rawPayload.equals(png)).toBe(true);
    const thumb = await get(`/media/${network()}/${address}/contract/logo?w=60`, { accept: 'image/webp' });
    expect(thumb.headers.location).toBe(`/media/b/${sha(png)}/64.webp`);
    const webp = await get(String(thumb.headers.location));
    expect(webp.headers['content-type']).toBe('image/webp');
    expect((await sharp(webp.rawPayload).metadata()).width).toBe(64);
    const ogr = await get(`/media/${network()}/${address}/contract/og_image`);
    expect(ogr.headers.location).toBe(`/media/b/${sha(files.get('/og.png')![1])}/original`);
    const none = await get(`/media/${network()}/${await contractWith(`${origin.url}/logo.png`)}/contract/og_image`);
    expect([none.statusCode, none.json().reason]).toEqual([404, 'NO_MEDIA']);
    const bad = await get(`/media/${network()}/${address}/contract/favicon`);
    expect(bad.statusCode).toBe(400);
  });

  it('an SVG logo with script is only ever served rasterised, with nothing of its script or external references stored', async () => {
    const address = await contractWith(`${origin.url}/logo.svg`);
    const r = await get(`/media/${network()}/${address}/contract/logo`, { accept: 'image/webp' });
    expect(r.statusCode, r.body).toBe(302);
    expect(r.headers.location).toMatch(/\/1024\.webp$/);
    const hash = String(r.headers.location).split('/')[3];
    const stored = (await media().blobs.get(originalKey(hash)))!.toString('utf8');
    expect(stored).not.toMatch(/script|onload|alert|127\.0\.0\.1:1/);
    const original = await get(`/media/b/${hash}/original`);
    expect([original.statusCode, original.json().reason]).toEqual([404, 'SVG_NOT_SERVED']);
    const raster = await get(String(r.headers.location));
    expect(raster.statusCode).toBe(200);
    expect(raster.headers['content-type']).toBe('image/webp');
    expectMediaHeaders(raster.headers);
  });

  it('a logo on a private or link-local address is refused (BLOCKED_ADDRESS), and one over the byte cap (TOO_LARGE): 404 with the reason, nothing stored', async () => {
    const before = (await t.testDb.db.query('SELECT count(*)::int AS n FROM media_blobs')).rows[0] as { n: number };
    for (const [url, reason] of [
      ['http://169.254.169.254/latest/meta-data/logo.png', 'BLOCKED_ADDRESS'],
      ['http://10.0.0.7/logo.png', 'BLOCKED_ADDRESS'],
      [`${origin.url}/huge.png`, 'TOO_LARGE'],
    ] as const) {
      const address = await contractWith(url);
      const r = await get(`/media/${network()}/${address}/contract/logo`);
      expect([r.statusCode, r.json().reason], url).toEqual([404, reason]);
      expectMediaHeaders(r.headers);
      expect((await contractInfo(address)).cachedMedia).toBeUndefined();
    }
    const after = (await t.testDb.db.query('SELECT count(*)::int AS n FROM media_blobs')).rows[0] as { n: number };
    expect(Number(after.n)).toBe(Number(before.n));
  });

  it("the console's directory lists the cached logo (same-origin, which the console page can load) beside the source's logoURI", async () => {
    const address = await contractWith(`${origin.url}/logo.png`);
    const call = consoleClient(t.app);
    expect((await call('AddToDirectory', { chainID: network(), contractAddress: address }, bearer(ADMIN))).status).toBe(200);
    await contractInfo(address);
    await media().idle();
    const list = await call('ListDirectory', { pageSize: 100 }, bearer(ADMIN));
    const entry = list.body.entries.find((e: { address: string }) => e.address === address);
    expect(entry.logoURI).toBe(`${origin.url}/logo.png`);
    expect(entry.cachedMedia.logo).toBe(`${media().publicUrl}/media/b/${sha(files.get('/logo.png')![1])}/original`);
  });

  it('media metrics count fetches by outcome, renditions, bytes stored, queue depth and serving', async () => {
    const r = await t.app.inject({ method: 'GET', url: '/metrics', headers: asOperator });
    const text = r.body;
    expect(text).toMatch(/metarelay_media_fetches_total\{outcome="ok"\} [1-9]/);
    expect(text).toMatch(/metarelay_media_fetches_total\{outcome="BLOCKED_ADDRESS"\} 2/);
    expect(text).toMatch(/metarelay_media_fetches_total\{outcome="TOO_LARGE"\} 1/);
    expect(text).toMatch(/metarelay_media_renditions_total\{format="webp"\} [1-9]/);
    expect(text).toMatch(/metarelay_media_stored_bytes_total\{kind="original"\} [1-9]/);
    expect(text).toMatch(/metarelay_media_stored_bytes_total\{kind="rendition"\} [1-9]/);
    expect(text).toMatch(/metarelay_media_queue_depth 0/);
    expect(text).toMatch(/metarelay_media_served_total\{source="rendered"\} [1-9]/);
    // A second ask of the same rendition is served from memory.
    const png = files.get('/logo.png')![1];
    await get(`/media/b/${sha(png)}/64.webp`);
    const again = (await t.app.inject({ method: 'GET', url: '/metrics', headers: asOperator })).body;
    expect(again).toMatch(/metarelay_media_served_total\{source="memory"\} [1-9]/);
  });
});
