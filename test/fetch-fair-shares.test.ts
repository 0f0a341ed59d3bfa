// Fair shares of the fetch slots (issue 54, findings 1 to 3): an attacker's pattern runs while a second
// client does ordinary work, and the test judges the second client (its answers complete, its media
// cached) and the hosts (requests counted at the origin), never latency.

import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rpc, startTestService, scrape, type TestService } from './support/service.ts';
import { getRest, startRawServer, startTokenChain, type RawServer, type TokenChain, type WireToken } from './support/token-chain.ts';
import { solidPng } from './support/media.ts';

let chain: TokenChain;
/** Answers nothing until the test ends: a metadata host that holds every request it is given. */
let slow: RawServer;
const held = { open: 0, peak: 0, released: false };
/** Answers at once: an ordinary metadata host (documents) and image host. */
let fast: RawServer;
const release: (() => void)[] = [];
let png: Buffer;
let attack: Address; // uri(id) on the slow host
let reflect: Address; // uri(id) on the fast host, named by the attacker
let ordinary: Address; // uri(id) on the fast host, the victim's collection
let pictures: Address; // uri(id) on the fast host, documents with an image on the fast host
let earner: Address; // uri(id) on the earning host
let stale: Address; // uri(id) on the fast host, tokens made stale for the search prefetch
/** Answers its first 4 requests at once, then holds the rest until 6 are open together. */
let earning: RawServer;
const waiting: (() => void)[] = [];

const uri = (contract: Address, template: string) => ({ address: contract, contract: 'TestURI1155', functionName: 'setURI', args: [template] });
const ids = (from: number, n: number) => Array.from({ length: n }, (_, i) => String(from + i)).join(',');

async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

beforeAll(async () => {
  [chain, slow, fast, png] = await Promise.all([
    startTokenChain(),
    startRawServer((_req, res) => {
      // Once released, it refuses at once: what the attacker queued ends quickly.
      if (held.released) return res.writeHead(503).end();
      held.open++;
      held.peak = Math.max(held.peak, held.open);
      res.on('close', () => held.open--);
      release.push(() => res.destroy());
    }),
    startRawServer((_req, res, url) => {
      if (url.pathname.startsWith('/img/')) return res.writeHead(200, { 'content-type': 'image/png' }).end(png);
      // `{id}` is expanded as 64 hex digits (ERC-1155's spelling).
      const id = BigInt(`0x${url.pathname.split('/').pop()!.replace('.json', '')}`).toString();
      const doc = url.pathname.startsWith('/pic/') ? { name: `picture ${id}`, image: `${fast.url}/img/${id}.png` } : { name: `token ${id}` };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(doc));
    }),
    solidPng(40, 30),
  ]);
  let answered = 0;
  earning = await startRawServer((_req, res) => {
    const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"name":"earned"}');
    if (++answered <= 4) return answer();
    waiting.push(answer);
    if (waiting.length >= 6) for (const go of waiting.splice(0)) go();
  });
  [attack, reflect, ordinary, pictures, earner, stale] = await chain.deploy(Array.from({ length: 6 }, () => ({ contract: 'TestURI1155' })));
  await chain.send([
    uri(attack, `${slow.url}/{id}.json`),
    uri(reflect, `${fast.url}/reflect/{id}.json`),
    uri(ordinary, `${fast.url}/ordinary/{id}.json`),
    uri(pictures, `${fast.url}/pic/{id}.json`),
    uri(earner, `${earning.url}/{id}.json`),
    uri(stale, `${fast.url}/stale/{id}.json`),
  ]);
}, 120_000);

afterAll(async () => {
  await Promise.all([chain?.stop(), slow?.stop(), fast?.stop(), earning?.stop()]);
});

describe('metadata fetch slots', () => {
  let t: TestService;
  beforeAll(async () => {
    // The attacker's reads wait long enough to hold their slots; the hosts' rate is out of the way here.
    t = await startTestService({ chains: [chain.chainConfig], metadata: { inlineWaitMs: 15_000, fetchTimeoutMs: 120_000, keylessHostRatePerSec: 10_000, keylessHostBurst: 10_000 } });
  });
  afterAll(() => {
    held.released = true;
    for (const end of release.splice(0)) end();
    return t?.close();
  });

  it('a host that never answers holds its own share (4 slots), and a second client reads an ordinary token meanwhile', async () => {
    // The attacker: keyless reads of 100 unseen tokens each, from two addresses, all naming the slow host.
    const attacks = [getRest(t, `/tokens/anvil/${attack}/${ids(1, 100)}`), t.app.inject({ method: 'GET', url: `/tokens/anvil/${attack}/${ids(101, 100)}`, remoteAddress: '10.9.9.9' })];
    await until(() => held.open >= 4, 'the slow host to hold its share');

    // The second client, keyed and keyless: the fast host's documents resolve in the same answers.
    const keyed = await rpc(t.app, '/rpc/Metadata/GetTokenMetadata', { chainID: 'anvil', contractAddress: ordinary, tokenIDs: ['1', '2'] }, { 'x-access-key': t.accessKey });
    expect(keyed.status).toBe(200);
    expect((keyed.body.tokenMetadata as WireToken[]).map((x) => [x.status, x.name])).toEqual([
      ['AVAILABLE', 'token 1'],
      ['AVAILABLE', 'token 2'],
    ]);
    const keyless = await t.app.inject({ method: 'GET', url: `/tokens/anvil/${ordinary}/3`, remoteAddress: '10.1.2.3' });
    expect((JSON.parse(keyless.body) as WireToken[]).map((x) => [x.status, x.name])).toEqual([['AVAILABLE', 'token 3']]);

    // Ground truth at the slow host: never more than its share open, though 200 documents wait for it.
    expect(held.peak).toBe(4);
    expect(slow.requestCount()).toBe(4);
    expect((await scrape(t.app)).match(/metarelay_metadata_fetch_slots\{state="hostsAtLimit"\} (\d+)/)?.[1]).toBe('1');
    held.released = true;
    for (const end of release.splice(0)) end();
    await Promise.all(attacks);
  });
});

describe('a host that answers quickly', () => {
  it('earns slots beyond its first 4: the origin sees 6 requests open at once and answers them all', async () => {
    // A generous "quick", so the machine's load cannot make the first answers count as slow.
    const s = await startTestService({ chains: [chain.chainConfig], metadata: { inlineWaitMs: 60_000, fastHostMs: 60_000 } });
    try {
      const r = await rpc(s.app, '/rpc/Metadata/GetTokenMetadata', { chainID: 'anvil', contractAddress: earner, tokenIDs: ids(1, 10).split(',') }, { 'x-access-key': s.accessKey });
      expect((r.body.tokenMetadata as WireToken[]).map((x) => x.status)).toEqual(Array(10).fill('AVAILABLE'));
    } finally {
      await s.close();
    }
  });
});

describe('the reflector', () => {
  let t: TestService;
  beforeAll(async () => {
    // A slow refill, so the bucket is what the attacker's second read meets.
    t = await startTestService({ chains: [chain.chainConfig], metadata: { inlineWaitMs: 30_000, keylessFetchesPerSec: 0.01, keylessFetchBurst: 100 } });
  });
  afterAll(() => t?.close());

  it('charges a keyless address per unseen token fetched: 100 requests to the named host, then 429 with Retry-After; a keyed client and cached ids are not refused', async () => {
    const first = await t.app.inject({ method: 'GET', url: `/tokens/anvil/${reflect}/${ids(1, 100)}`, remoteAddress: '10.7.7.7' });
    expect(first.statusCode).toBe(200);
    expect((JSON.parse(first.body) as WireToken[]).every((x) => x.status === 'AVAILABLE')).toBe(true);
    expect(fast.requestCount()).toBeGreaterThanOrEqual(100);
    const sent = fast.requestCount();

    // Another 100 unseen ids from the same address: refused before a single request leaves.
    const second = await t.app.inject({ method: 'GET', url: `/tokens/anvil/${reflect}/${ids(101, 100)}`, remoteAddress: '10.7.7.7' });
    expect(second.statusCode).toBe(429);
    expect(Number(second.headers['retry-after'])).toBeGreaterThan(0);
    expect(second.body).toMatch(/keylessFetches/);
    expect(fast.requestCount()).toBe(sent);

    // Tokens already fetched cost nothing; a keyed client's unseen tokens are not the keyless share's.
    const again = await t.app.inject({ method: 'GET', url: `/tokens/anvil/${reflect}/${ids(1, 100)}`, remoteAddress: '10.7.7.7' });
    expect(again.statusCode).toBe(200);
    const keyed = await rpc(t.app, '/rpc/Metadata/GetTokenMetadata', { chainID: 'anvil', contractAddress: reflect, tokenIDs: ['150'] }, { 'x-access-key': t.accessKey });
    expect(keyed.status).toBe(200);
    expect((keyed.body.tokenMetadata as WireToken[])[0].status).toBe('AVAILABLE');
    expect((await scrape(t.app)).match(/metarelay_metadata_fetch_refused_total\{share="keylessFetches"\} (\d+)/)?.[1]).toBe('1');
  });

  it('sends one host at most its keyless rate, across keyless addresses: tokens beyond the burst wait for the host', async () => {
    const s = await startTestService({ chains: [chain.chainConfig], metadata: { inlineWaitMs: 30_000, keylessHostRatePerSec: 4, keylessHostBurst: 4 } });
    try {
      const arrivals: number[] = [];
      const before = fast.requestCount();
      const watch = setInterval(() => {
        for (let n = fast.requestCount(); arrivals.length < n - before; ) arrivals.push(Date.now());
      }, 5);
      // Keyless reads from two addresses: the host's rate is theirs together, not each address's.
      const [a, b] = await Promise.all(['10.5.5.1', '10.5.5.2'].map((ip, n) => s.app.inject({ method: 'GET', url: `/tokens/anvil/${ordinary}/${ids(500 + 6 * n, 6)}`, remoteAddress: ip })));
      clearInterval(watch);
      expect([...JSON.parse(a.body), ...JSON.parse(b.body)].every((x: WireToken) => x.status === 'AVAILABLE')).toBe(true);
      expect(fast.requestCount() - before).toBe(12);
      // A lower bound only (load makes it longer, never shorter): 8 tokens past the burst at 4 a second.
      expect(arrivals[11] - arrivals[0]).toBeGreaterThanOrEqual(1_700);
    } finally {
      await s.close();
    }
  });
});

describe('eager media', () => {
  let t: TestService;
  beforeAll(async () => {
    t = await startTestService({ chains: [chain.chainConfig], metadata: { inlineWaitMs: 30_000 }, media: { eager: true } });
  });
  afterAll(() => t?.close());

  it('queues a token’s media for a keyed read only: a keyless read fetches no image', async () => {
    const keyless = await t.app.inject({ method: 'GET', url: `/tokens/anvil/${pictures}/1,2`, remoteAddress: '10.3.3.3' });
    expect((JSON.parse(keyless.body) as WireToken[]).map((x) => x.status)).toEqual(['AVAILABLE', 'AVAILABLE']);
    await t.services.media!.idle();
    expect(fast.requestCount('/img/1.png') + fast.requestCount('/img/2.png')).toBe(0);

    const keyed = await rpc(t.app, '/rpc/Metadata/GetTokenMetadata', { chainID: 'anvil', contractAddress: pictures, tokenIDs: ['3'] }, { 'x-access-key': t.accessKey });
    expect(keyed.status).toBe(200);
    await t.services.media!.idle();
    expect(fast.requestCount('/img/3.png')).toBe(1);
    const [asset] = await t.testDb.db.query<{ status: string }>("SELECT status FROM media_assets WHERE token_id = '3'").then((r) => r.rows);
    expect(asset?.status).toBe('READY');
  });
});

describe("the caller's share beyond token reads", () => {
  let t: TestService;
  /** The origin's path of a token document (`{id}` is expanded as 64 hex digits). */
  const doc = (dir: string, id: number) => `/${dir}/${id.toString(16).padStart(64, '0')}.json`;
  const refusedKeyless = async () => Number((await scrape(t.app)).match(/metarelay_metadata_fetch_refused_total\{share="keylessFetches"\} (\d+)/)?.[1] ?? 0);
  beforeAll(async () => {
    // Keyless RPC allowed (the search is an RPC); a keyless address has 3 fetches and no refill to speak of.
    t = await startTestService({
      chains: [chain.chainConfig],
      auth: { rpc: 'optional' }, // No hot cache: the tokens made stale in the database are read stale at once.
      metadata: { inlineWaitMs: 30_000, keylessFetchesPerSec: 0.01, keylessFetchBurst: 3, hotCacheTtlMs: 0 },
    });
  });
  afterAll(() => t?.close());

  it('a keyless /media request pays for the media it fetches: once its share is spent the image is refused 429 and never fetched', async () => {
    const from = '10.4.4.4';
    const media = (id: number) => t.app.inject({ method: 'GET', url: `/media/anvil/${pictures}/${id}/image`, remoteAddress: from });
    // A token read (1 unseen token), then its image through /media (1 fetch): 1 of 3 left.
    expect((await t.app.inject({ method: 'GET', url: `/tokens/anvil/${pictures}/9`, remoteAddress: from })).statusCode).toBe(200);
    expect(fast.requestCount('/img/9.png')).toBe(0);
    const first = await media(9);
    expect(first.statusCode, first.body).toBe(302);
    expect(fast.requestCount('/img/9.png')).toBe(1);
    // Token 10 through /media: its document takes the last fetch, its image finds the share spent.
    const second = await media(10);
    expect(second.statusCode, second.body).toBe(429);
    expect(Number(second.headers['retry-after'])).toBeGreaterThan(0);
    expect(second.body).toMatch(/keylessFetches/);
    expect(fast.requestCount(doc('pic', 10))).toBe(1);
    expect(fast.requestCount('/img/10.png')).toBe(0);
    // A keyed caller's /media request is not the keyless share's.
    const keyed = await t.app.inject({ method: 'GET', url: `/media/anvil/${pictures}/10/image`, headers: { 'x-access-key': t.accessKey }, remoteAddress: from });
    expect(keyed.statusCode, keyed.body).toBe(302);
    expect(fast.requestCount('/img/10.png')).toBe(1);
  });

  it("a keyless search's re-read of stale tokens is charged to its share: past it the tokens are not fetched again; a keyed search re-reads them", async () => {
    const from = '10.4.4.5';
    const ids = [1, 2, 3];
    // Stored by a keyed read (not charged), then made stale.
    const read = await rpc(t.app, '/rpc/Metadata/GetTokenMetadata', { chainID: 'anvil', contractAddress: stale, tokenIDs: ids.map(String) }, { 'x-access-key': t.accessKey });
    expect((read.body.tokenMetadata as WireToken[]).map((x) => x.status)).toEqual(['AVAILABLE', 'AVAILABLE', 'AVAILABLE']);
    const age = () =>
      t.services.db.query(`UPDATE token_metadata SET last_fetched = now() - interval '30 days' WHERE chain_id = $1 AND contract_address = $2`, [chain.chainConfig.chainId, stale.toLowerCase()]);
    await age();
    const fetched = () => ids.reduce((n, id) => n + fast.requestCount(doc('stale', id)), 0);
    expect(fetched()).toBe(3);
    // The address spends 2 of its 3 on unseen tokens; the search's 3 stale tokens do not fit in the 1 left.
    expect((await t.app.inject({ method: 'GET', url: `/tokens/anvil/${stale}/11,12`, remoteAddress: from })).statusCode).toBe(200);
    const before = await refusedKeyless();
    const search = { q: 'token', contractAddress: stale, page: { pageSize: 10 } };
    const keyless = await t.app.inject({ method: 'POST', url: '/rpc/Metadata/SearchTokenMetadataByQuery', headers: { 'content-type': 'application/json' }, payload: search, remoteAddress: from });
    expect(keyless.statusCode, keyless.body).toBe(200);
    expect((keyless.json().tokenMetadata as WireToken[]).filter((x) => x.status === 'REFRESHING').map((x) => x.tokenId)).toEqual(['1', '2', '3']);
    // The prefetch is decided after the answer: once it has been refused, the origin has seen no re-read.
    for (const deadline = Date.now() + 30_000; (await refusedKeyless()) === before; ) {
      if (Date.now() > deadline) throw new Error('timed out waiting for the prefetch to be refused');
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(fetched()).toBe(3);

    // A keyed search re-reads them, in its key's share.
    const keyed = await rpc(t.app, '/rpc/Metadata/SearchTokenMetadataByQuery', search, { 'x-access-key': t.accessKey });
    expect(keyed.status).toBe(200);
    await until(() => fetched() === 6, 'the keyed search to re-read the 3 stale tokens');
  });
});
