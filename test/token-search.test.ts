// Token search end to end: a generated collection of 300 tokens (6 traits, skewed values, both the
// `attributes` and the `properties` conventions) on a real anvil, served by a real local origin and
// saved through the real resolution path (first read, refreshAll enumeration started by a search,
// refresh, watcher). Every trait filter's result set is checked against a plain in-memory filter of
// the same documents; paging, text ranking, property filters (facets), the deprecated names, the
// official @0xsequence/metadata client and hostile input are checked too.

import { mulberry32 } from './support/random.ts';
import { SequenceMetadata } from '@0xsequence/metadata';
import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startOriginServer, type OriginServer } from '../src/devchain/index.ts';
import type { Services } from '../src/services.ts';
import { openDb, type Db } from '../src/store/db.ts';
import { loadMigrations, migrate } from '../src/store/migrate.ts';
import { TEST_DB, TEST_PG_URL, pgUrlFor } from './support/env.ts';
import { DEPLOYER, call, erc721WithTokens } from './support/refresh.ts';
import { eventually } from './support/token-chain.ts';
import { startTestService, type TestService } from './support/service.ts';
import { getTokenMetadata, startTokenChain, type TokenChain } from './support/token-chain.ts';

// ---------------------------------------------------------------- the generated collection

const rand = mulberry32(4242);
/** A value drawn with the given weights: realistic skew (a few common values, a long tail of rare ones). */
function weighted<T>(items: Array<[T, number]>): T {
  const total = items.reduce((n, [, w]) => n + w, 0);
  let r = rand() * total;
  for (const [v, w] of items) if ((r -= w) < 0) return v;
  return items[items.length - 1]![0];
}

const N = 300;
const SPECIES: Array<[string, number]> = [
  ['Dragon', 30],
  ['Phoenix', 20],
  ['Griffin', 20],
  ['Kraken', 15],
  ['Unicorn', 10],
  ['Basilisk', 5],
];
const BACKGROUNDS: Array<[string, number]> = [
  ['Blue', 40],
  ['Green', 25],
  ['Red', 15],
  ['Purple', 10],
  ['Gold', 7],
  ['Cosmic', 3],
];
const EYES: Array<[string, number]> = [
  ['Normal', 50],
  ['Sleepy', 20],
  ['Laser', 10],
  ['Closed', 10],
  ['Diamond', 3],
];
const ACCESSORIES = ['Hat', 'Scarf', 'Crown', 'Monocle', 'Earring'];
const PLACES = ['northern mountains', 'deep sea', 'desert', 'frozen tundra', 'sky islands'];
const ADJECTIVES = ['fierce', 'gentle', 'ancient', 'young', 'mysterious'];

type Doc = Record<string, unknown>;
const docs = new Map<string, Doc>();
for (let i = 1; i <= N; i++) {
  const id = String(i);
  const species = weighted(SPECIES);
  let background = weighted(BACKGROUNDS);
  // Real collections are not consistent about case.
  if (rand() < 0.1) background = background.toLowerCase();
  const level = 1 + Math.floor(rand() ** 2 * 100);
  const power = 10 + Math.floor(rand() * 90);
  const eyes = rand() < 0.1 ? undefined : weighted(EYES);
  const accessories = ACCESSORIES.filter(() => rand() < 0.25);
  const description = `A ${ADJECTIVES[i % ADJECTIVES.length]} ${species.toLowerCase()} from the ${PLACES[i % PLACES.length]}.`;
  if (i % 5 === 0) {
    // The ERC1155 convention: an object map, one level nested.
    docs.set(id, {
      name: `${species} #${id}`,
      description,
      image: `https://img.example/${id}.png`,
      properties: { Species: species, Background: background, Level: level, Power: power, ...(eyes ? { Eyes: eyes } : {}), Accessories: accessories, stats: { speed: 1 + (i % 7) } },
    });
  } else {
    const attributes: Doc[] = [
      { trait_type: 'Species', value: species },
      { trait_type: 'Background', value: background },
      { trait_type: 'Level', value: level },
      // A numeric string that display_type says is a number.
      { trait_type: 'Power', value: String(power), display_type: 'number' },
      { trait_type: 'Accessories', value: accessories },
    ];
    if (eyes) attributes.push({ trait_type: 'Eyes', value: eyes });
    docs.set(id, { name: `${species} #${id}`, description, image: `https://img.example/${id}.png`, attributes });
  }
}
// Tokens whose document the origin does not have: never resolved, never indexed.
const MISSING = new Set(['299', '300']);

// ---------------------------------------------------------------- the plain in-memory filter

type Pair = { name: string; text: string; num: number | null };
const NUMERIC_DISPLAY = new Set(['number', 'boost_number', 'boost_percentage', 'date']);

function scalarPairs(name: string, v: unknown, numericHint: boolean, out: Pair[]) {
  if (Array.isArray(v)) {
    for (const e of v) if (!Array.isArray(e)) scalarPairs(name, e, false, out);
    return;
  }
  if (typeof v === 'number') out.push({ name, text: String(v), num: v });
  else if (typeof v === 'boolean') out.push({ name, text: String(v), num: null });
  else if (typeof v === 'string' && v.trim() !== '') {
    out.push({ name, text: v.trim(), num: numericHint && /^-?\d+(\.\d+)?$/.test(v.trim()) ? Number(v.trim()) : null });
  }
}

function pairsOf(doc: Doc): Pair[] {
  const out: Pair[] = [];
  if (Array.isArray(doc.attributes)) {
    for (const a of doc.attributes as Doc[]) {
      if (a && typeof a === 'object' && typeof a.trait_type === 'string') {
        scalarPairs(a.trait_type, a.value, NUMERIC_DISPLAY.has(String(a.display_type ?? '').toLowerCase()), out);
      }
    }
  }
  if (doc.properties && typeof doc.properties === 'object' && !Array.isArray(doc.properties)) {
    for (const [k, v] of Object.entries(doc.properties as Doc)) {
      if (v && typeof v === 'object' && !Array.isArray(v)) for (const [k2, v2] of Object.entries(v as Doc)) scalarPairs(`${k}.${k2}`, v2, false, out);
      else scalarPairs(k, v, false, out);
    }
  }
  return out;
}

type PF = { name: string; values?: Array<string | number | boolean>; min?: number; max?: number; type?: string };
function matches(doc: Doc, props: PF[]): boolean {
  const pairs = pairsOf(doc);
  return props.every((f) =>
    pairs.some((p) => {
      if (p.name.toLowerCase() !== f.name.toLowerCase()) return false;
      if (f.values && !f.values.some((v) => String(v).toLowerCase() === p.text.toLowerCase() || (typeof v === 'number' && p.num === v))) return false;
      if (f.min !== undefined && (p.num === null || p.num < f.min)) return false;
      if (f.max !== undefined && (p.num === null || p.num > f.max)) return false;
      return true;
    }),
  );
}
const byTokenOrder = (a: string, b: string) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
function expected(props: PF[], among: Iterable<string> = docs.keys()): string[] {
  return [...among].filter((id) => !MISSING.has(id) && matches(docs.get(id)!, props)).sort(byTokenOrder);
}

// ---------------------------------------------------------------- the service

let chain: TokenChain;
let origin: OriginServer;
let t: TestService;
let nft: Address;

async function drain(s: Services) {
  while ((await s.worker.tick()) > 0);
}
async function ok(method: string, body: unknown) {
  const res = await call(t, method, body);
  if (res.status !== 200) throw new Error(`${method} answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body;
}
async function allIds(filter: unknown, pageSize = 1000): Promise<string[]> {
  const out: string[] = [];
  for (let page = 0; ; page++) {
    const body = await ok('SearchTokenMetadataTokenIDs', { chainID: 'anvil', contractAddress: nft, filter, page: { page, pageSize } });
    out.push(...body.tokenIDs);
    if (!body.page.more) return out;
  }
}

beforeAll(async () => {
  [chain, origin] = await Promise.all([startTokenChain(), startOriginServer()]);
  for (const [id, doc] of docs) if (!MISSING.has(id)) origin.setDocument(`/s/${id}`, doc);
  [nft] = await chain.deploy([{ contract: 'TestEnumerableERC721', args: [`${origin.url}/s/`] }]);
  const ids = [...docs.keys()];
  for (let i = 0; i < ids.length; i += 150) {
    await chain.send(ids.slice(i, i + 150).map((id) => ({ address: nft, contract: 'TestEnumerableERC721', functionName: 'mint', args: [DEPLOYER, BigInt(id)] })));
  }
  t = await startTestService({
    chains: [{ ...chain.chainConfig, watch: false }],
    // Hundreds of searches of up to 1 000 results from one address: far past one client's share of
    // reads (metadata.readShares, test/metadata-read-shares.test.ts), which is not what this file tests.
    metadata: { hotCacheTtlMs: 0, fetchTimeoutMs: 3_000, inlineWaitMs: 20_000, readShares: { enabled: false } },
    refresh: { pollMs: 50, coolOffSec: 0 },
  });
}, 180_000);

afterAll(async () => {
  await t?.close();
  await Promise.all([chain?.stop(), origin?.stop()]);
});

describe('indexing through the resolution path', () => {
  it('first reads are indexed; a search of a never-enumerated contract answers what is indexed and starts a refreshAll; once it ran, every token is found', async () => {
    const firstRead = Array.from({ length: 40 }, (_, i) => String(i + 1));
    await getTokenMetadata(t, nft, firstRead);
    const filter = { properties: [{ name: 'Species', type: 'STRING', values: ['Dragon'] }] };
    const before = await ok('SearchTokenMetadataTokenIDs', { chainID: 'anvil', contractAddress: nft, filter, page: { pageSize: 1000 } });
    expect(before.tokenIDs).toEqual(expected(filter.properties, firstRead));
    expect(before.indexComplete).toBe(false);
    expect(typeof before.taskID).toBe('number');
    // A second search joins the same task.
    const again = await ok('SearchTokenMetadata', { chainID: 'anvil', contractAddress: nft, filter });
    expect(again.taskID).toBe(before.taskID);
    expect((await ok('GetTaskStatus', { taskId: before.taskID })).status).toBe('QUEUED');

    await drain(t.services);
    expect((await ok('GetTaskStatus', { taskId: before.taskID })).status).toBe('DONE');
    const after = await ok('SearchTokenMetadataTokenIDs', { chainID: 'anvil', contractAddress: nft, filter, page: { pageSize: 1000 } });
    expect(after.tokenIDs).toEqual(expected(filter.properties));
    expect(after.indexComplete).toBe(true);
    expect(after.taskID).toBeUndefined();
  }, 120_000);
});

describe('enumeration on search', () => {
  it('an ERC20 is not enumerated; a project held to other networks searches only those', async () => {
    const [erc20] = await chain.deploy([{ contract: 'DevERC20', args: ['Search Test', 'SRCH'] }]);
    await ok('GetContractInfo', { chainID: 'anvil', contractAddress: erc20 });
    const taskCount = async () => Number((await t.services.db.query<{ n: string }>('SELECT count(*) AS n FROM tasks')).rows[0]!.n);
    const before = await taskCount();
    const body = await ok('SearchTokenMetadata', { chainID: 'anvil', contractAddress: erc20, filter: {} });
    expect(body).toMatchObject({ tokenMetadata: [], indexComplete: false });
    expect(body.taskID).toBeUndefined();
    expect(await taskCount()).toBe(before);

    const other = await t.services.projects.create('search-polygon-only');
    await t.services.db.query('UPDATE projects SET allowed_chain_ids = $1 WHERE id = $2', [[137], other.id]);
    const { key } = await t.services.accessKeys.create(other.id, 'k');
    const api = { app: t.app, accessKey: key };
    expect((await call(api, 'SearchTokenMetadataByQuery', { q: 'dragon' })).body.tokenMetadata).toEqual([]);
    expect((await call(api, 'SearchTokenMetadataByQuery', { q: 'dragon', chainID: 'anvil' })).body.error).toBe('PermissionDenied');
    expect((await call(t, 'SearchTokenMetadataByQuery', { q: 'dragon' })).body.tokenMetadata.length).toBeGreaterThan(0);
  });
});

describe('trait filters against a plain in-memory filter', () => {
  const cases: Array<[string, PF[]]> = [
    ['no properties: every resolved token', []],
    ['one value', [{ name: 'Background', values: ['Gold'] }]],
    ['case-insensitive names and values', [{ name: 'background', values: ['BLUE'] }]],
    ['OR within a property', [{ name: 'Species', values: ['Kraken', 'Unicorn', 'Basilisk'] }]],
    [
      'AND across properties',
      [
        { name: 'Species', values: ['Dragon'] },
        { name: 'Background', values: ['Blue', 'Green'] },
      ],
    ],
    ['INT range on numbers', [{ name: 'Level', type: 'INT', min: 20, max: 40 }]],
    ['INT min only', [{ name: 'Level', type: 'INT', min: 90 }]],
    ['INT range on numeric strings (display_type number) and numbers (properties)', [{ name: 'Power', type: 'INT', min: 50, max: 60 }]],
    ['INT value as a number matches a numeric string', [{ name: 'Power', values: [55] }]],
    ['array elements', [{ name: 'Accessories', type: 'ARRAY', values: ['Crown'] }]],
    [
      'array AND array',
      [
        { name: 'Accessories', values: ['Crown'] },
        { name: 'accessories', values: ['hat'] },
      ],
    ],
    ['property present, any value', [{ name: 'Eyes' }]],
    ['nested properties, one level', [{ name: 'stats.speed', min: 3, max: 4 }]],
    [
      'rare AND range AND array',
      [
        { name: 'Eyes', values: ['Laser', 'Diamond'] },
        { name: 'Level', min: 5 },
        { name: 'Accessories', values: ['Scarf', 'Monocle'] },
      ],
    ],
    ['no match', [{ name: 'Background', values: ['Nope'] }]],
    ['unknown property', [{ name: 'Wings', values: ['Yes'] }]],
  ];
  for (const [what, props] of cases) {
    it(what, async () => {
      const want = expected(props);
      const got = await allIds({ properties: props });
      expect(got).toEqual(want);
      if (props.length) expect(want.length).toBeLessThan(N - MISSING.size);
    });
  }

  it('paging is stable: small pages put together give the same list, with no duplicates, and more=false on the last', async () => {
    const props: PF[] = [{ name: 'Background', values: ['Blue', 'Green'] }];
    const whole = await allIds({ properties: props });
    const paged = await allIds({ properties: props }, 7);
    expect(paged).toEqual(whole);
    expect(new Set(paged).size).toBe(paged.length);
    const last = await ok('SearchTokenMetadataTokenIDs', { chainID: 'anvil', contractAddress: nft, filter: { properties: props }, page: { page: 1000, pageSize: 7 } });
    expect(last.tokenIDs).toEqual([]);
    expect(last.page).toEqual({ page: 1001, pageSize: 7, more: false });
  });

  it('pages by cursor: each answer carries the next page after its last token, and the pages put together are the whole list', async () => {
    const props: PF[] = [{ name: 'Background', values: ['Blue', 'Green'] }];
    const whole = await allIds({ properties: props });
    for (const filter of [{ properties: props }, {}]) {
      const all = filter.properties ? whole : await allIds({});
      const out: string[] = [];
      let page: Record<string, unknown> = { pageSize: 7 };
      for (;;) {
        const body = await ok('SearchTokenMetadataTokenIDs', { chainID: 'anvil', contractAddress: nft, filter, page });
        out.push(...body.tokenIDs);
        if (body.tokenIDs.length) expect(body.page).toMatchObject({ column: 'tokenId', after: body.tokenIDs.at(-1), pageSize: 7 });
        if (!body.page.more) break;
        // The answer's page passed back as it is, as clients do: the cursor wins over the page number.
        page = body.page;
      }
      expect(out).toEqual(all);
    }
    // SearchTokenMetadata pages the same way.
    const first = await ok('SearchTokenMetadata', { chainID: 'anvil', contractAddress: nft, filter: { properties: props }, page: { pageSize: 5 } });
    const next = await ok('SearchTokenMetadata', { chainID: 'anvil', contractAddress: nft, filter: { properties: props }, page: first.page });
    expect(next.tokenMetadata.map((x: { tokenId: string }) => x.tokenId)).toEqual(whole.slice(5, 10));
  });

  it('gives each token its real status: a stale one is REFRESHING (and re-read), as GetTokenMetadata says', async () => {
    const props: PF[] = [{ name: 'Species', values: ['Basilisk'] }];
    const ids = expected(props);
    const staleId = ids[0];
    await t.services.db.query(`UPDATE token_metadata SET last_fetched = now() - interval '30 days' WHERE chain_id = $1 AND contract_address = $2 AND token_id = $3`, [
      chain.chainConfig.chainId,
      nft.toLowerCase(),
      staleId,
    ]);
    const body = await ok('SearchTokenMetadata', { chainID: 'anvil', contractAddress: nft, filter: { properties: props }, page: { pageSize: 1000 } });
    const statuses = Object.fromEntries(body.tokenMetadata.map((x: { tokenId: string; status: string }) => [x.tokenId, x.status]));
    expect(statuses[staleId]).toBe('REFRESHING');
    expect(ids.filter((id) => id !== staleId).every((id) => statuses[id] === 'AVAILABLE')).toBe(true);
    const byQuery = await ok('SearchTokenMetadataByQuery', { q: String(docs.get(staleId)!.name), contractAddress: nft, page: { pageSize: 1000 } });
    expect(byQuery.tokenMetadata.find((x: { tokenId: string }) => x.tokenId === staleId).status).toBe('REFRESHING');
    // The search started the re-read: the token is fresh again, and AVAILABLE.
    await eventually(
      () => ok('SearchTokenMetadata', { chainID: 'anvil', contractAddress: nft, filter: { properties: props }, page: { pageSize: 1000 } }),
      (again) => expect(again.tokenMetadata.find((x: { tokenId: string }) => x.tokenId === staleId).status).toBe('AVAILABLE'),
    );
  });

  it('SearchTokenMetadata gives the same tokens as full TokenMetadata documents', async () => {
    const props: PF[] = [{ name: 'Species', values: ['Basilisk'] }];
    const body = await ok('SearchTokenMetadata', { chainID: 'anvil', contractAddress: nft, filter: { properties: props }, page: { pageSize: 1000 } });
    expect(body.tokenMetadata.map((x: { tokenId: string }) => x.tokenId)).toEqual(expected(props));
    const first = body.tokenMetadata[0];
    expect(first).toMatchObject({ chainId: chain.chainConfig.chainId, contractAddress: nft.toLowerCase(), status: 'AVAILABLE', name: docs.get(first.tokenId)!.name });
    expect(body.page).toEqual({ page: 1, pageSize: 1000, more: false, column: 'tokenId', after: expected(props).at(-1) });
  });
});

describe('text', () => {
  it('matches name and description, ranked: name matches before description matches; combines with properties', async () => {
    const ids = await allIds({ text: 'kraken' });
    const byName = expected([]).filter((id) => String(docs.get(id)!.name).toLowerCase().includes('kraken'));
    // Within a tier, closer names rank first; the name tier as a whole comes before the description tier.
    expect(ids.slice(0, byName.length).sort(byTokenOrder)).toEqual(byName);
    const both = await allIds({ text: 'Kraken', properties: [{ name: 'Background', values: ['Blue'] }] });
    expect(both.sort(byTokenOrder)).toEqual(byName.filter((id) => matches(docs.get(id)!, [{ name: 'Background', values: ['Blue'] }])));
    // Description words: every "frozen tundra" token, and nothing else.
    const tundra = await allIds({ text: 'frozen tundra' });
    expect([...tundra].sort(byTokenOrder)).toEqual(expected([]).filter((id) => String(docs.get(id)!.description).includes('frozen tundra')));
  });

  it('pages by rank cursor: the pages put together are the whole ranked list, in tier then token order (substring tiers as an in-memory filter gives them)', async () => {
    /** The substring tiers, as the in-memory documents give them: exact name, prefix, name substring, description substring. */
    const tierOf = (id: string, q: string) => {
      const name = String(docs.get(id)!.name).toLowerCase();
      const description = String(docs.get(id)!.description ?? '').toLowerCase();
      return name === q ? 0 : name.startsWith(q) ? 1 : name.includes(q) ? 2 : description.includes(q) ? 3 : null;
    };
    const cases: Array<{ text: string; properties?: PF[] }> = [
      { text: 'kraken' },
      { text: 'Dragon #1' },
      { text: 'frozen tundra' },
      { text: 'krakn' },
      { text: 'gentle', properties: [{ name: 'Background', values: ['Blue', 'Green'] }] },
    ];
    for (const filter of cases) {
      const q = filter.text.toLowerCase();
      const whole = await allIds(filter);
      // The substring matches come first, by tier and then token id, exactly as the in-memory filter has them.
      const substring = expected(filter.properties ?? [])
        .filter((id) => tierOf(id, q) !== null)
        .sort((a, b) => tierOf(a, q)! - tierOf(b, q)! || byTokenOrder(a, b));
      expect(whole.slice(0, substring.length), filter.text).toEqual(substring);
      // Whatever follows is a typo match, and still has the properties.
      for (const id of whole.slice(substring.length)) {
        expect(tierOf(id, q)).toBeNull();
        expect(matches(docs.get(id)!, filter.properties ?? [])).toBe(true);
      }
      if (filter.text === 'krakn') expect(whole.length).toBeGreaterThan(0);
      // By cursor, 3 at a time, passing each answer's page back as it is (as the official client does).
      const out: string[] = [];
      let page: Record<string, unknown> = { pageSize: 3 };
      for (let i = 0; i < 200; i++) {
        const body = await ok('SearchTokenMetadataTokenIDs', { chainID: 'anvil', contractAddress: nft, filter, page });
        out.push(...body.tokenIDs);
        if (body.tokenIDs.length) expect(body.page).toMatchObject({ column: 'rank', after: expect.stringMatching(new RegExp(`^[0-4]:[0-9.e-]+:${body.tokenIDs.at(-1)}$`)) });
        if (!body.page.more) break;
        page = body.page;
      }
      expect(out, filter.text).toEqual(whole);
      expect(new Set(out).size).toBe(out.length);
    }
    // SearchTokenMetadata pages the same way, and by page number gives the same pages.
    const first = await ok('SearchTokenMetadata', { chainID: 'anvil', contractAddress: nft, filter: { text: 'kraken' }, page: { pageSize: 4 } });
    const next = await ok('SearchTokenMetadata', { chainID: 'anvil', contractAddress: nft, filter: { text: 'kraken' }, page: first.page });
    const byNumber = await ok('SearchTokenMetadata', { chainID: 'anvil', contractAddress: nft, filter: { text: 'kraken' }, page: { page: 1, pageSize: 4 } });
    expect(next.tokenMetadata.map((x: { tokenId: string }) => x.tokenId)).toEqual(byNumber.tokenMetadata.map((x: { tokenId: string }) => x.tokenId));
    expect(next.tokenMetadata).toHaveLength(4);
  });

  it('is typo-tolerant (pg_trgm): "Krakn" and "Phoenx" find the Krakens and the Phoenixes first', async () => {
    for (const [typo, word] of [
      ['Krakn', 'Kraken'],
      ['Phoenx', 'Phoenix'],
    ]) {
      const body = await ok('SearchTokenMetadata', { chainID: 'anvil', contractAddress: nft, filter: { text: typo }, page: { pageSize: 5 } });
      expect(body.tokenMetadata.length).toBe(5);
      for (const x of body.tokenMetadata) expect(x.name).toContain(word);
    }
  });

  it('a misspelt text of several words finds the tokens having a word near each of them, and only those (word index)', async () => {
    const words = (d: Doc) => `${d.name} ${d.description}`.toLowerCase().split(/[^a-z0-9]+/);
    const ids = await allIds({ text: 'Krakn tundra' });
    const want = expected([]).filter((id) => words(docs.get(id)!).includes('kraken') && words(docs.get(id)!).includes('tundra'));
    expect(want.length).toBeGreaterThan(0);
    expect([...ids].sort(byTokenOrder)).toEqual(want);
    // A word no token has anything near: nothing, though the other word is everywhere.
    expect(await allIds({ text: 'Dragon Zzyzxq' })).toEqual([]);
  });

  it('an exact name ranks first; LIKE wildcards in the text are literal', async () => {
    const body = await ok('SearchTokenMetadataByQuery', { q: 'Dragon #1', chainID: 'anvil' });
    const exact = expected([]).find((id) => docs.get(id)!.name === 'Dragon #1');
    if (exact) expect(body.tokenMetadata[0].name).toBe('Dragon #1');
    expect(await allIds({ text: '%' })).toEqual([]);
    expect(await allIds({ text: '_' })).toEqual([]);
  });

  it('SearchTokenMetadataByQuery searches across chains or one contract, pages stably; SearchTokens is the same', async () => {
    const a = await ok('SearchTokenMetadataByQuery', { q: 'unicorn', page: { pageSize: 1000 } });
    const unicorns = expected([]).filter((id) => String(docs.get(id)!.name).startsWith('Unicorn'));
    expect(
      a.tokenMetadata
        .slice(0, unicorns.length)
        .map((x: { tokenId: string }) => x.tokenId)
        .sort(byTokenOrder),
    ).toEqual(unicorns);
    expect(a.nextPage).toEqual({ page: 1, pageSize: 1000, more: false });
    const pages: string[] = [];
    for (let page = 0; ; page++) {
      const b = await ok('SearchTokenMetadataByQuery', { q: 'unicorn', contractAddress: nft, page: { page, pageSize: 4 } });
      pages.push(...b.tokenMetadata.map((x: { tokenId: string }) => x.tokenId));
      if (!b.nextPage.more) break;
    }
    expect(pages).toEqual(a.tokenMetadata.map((x: { tokenId: string }) => x.tokenId));
    const legacy = await ok('SearchTokens', { q: 'unicorn', chainID: 'anvil', page: { pageSize: 1000 } });
    expect(legacy.tokenMetadata).toEqual(a.tokenMetadata);
    // A chain with no tokens indexed answers nothing.
    expect((await ok('SearchTokenMetadataByQuery', { q: 'unicorn', chainID: 'polygon' })).tokenMetadata).toEqual([]);
  });
});

describe('property filters', () => {
  it('each property with its type, min/max for numbers and its values with token counts', async () => {
    const body = await ok('GetTokenMetadataPropertyFilters', { chainID: 'anvil', contractAddress: nft, excludeProperties: [] });
    const byName = new Map<string, any>(body.filters.map((f: { name: string }) => [f.name, f]));
    expect([...byName.keys()].sort()).toEqual(['Accessories', 'Background', 'Eyes', 'Level', 'Power', 'Species', 'stats.speed']);
    const all = expected([]);
    const count = (props: PF[]) => all.filter((id) => matches(docs.get(id)!, props)).length;
    expect(byName.get('Species').type).toBe('STRING');
    expect(byName.get('Accessories').type).toBe('ARRAY');
    expect(byName.get('Level')).toMatchObject({ type: 'INT' });
    const levels = all.flatMap((id) =>
      pairsOf(docs.get(id)!)
        .filter((p) => p.name === 'Level')
        .map((p) => p.num!),
    );
    expect(byName.get('Level').min).toBe(Math.min(...levels));
    expect(byName.get('Level').max).toBe(Math.max(...levels));
    expect(byName.get('Power').type).toBe('INT');
    // Values, most common first, each with how many tokens have it (case variants are one value).
    const species = byName.get('Species');
    for (const { value, count: n } of species.valueCounts) expect(n).toBe(count([{ name: 'Species', values: [value] }]));
    expect(species.values).toEqual(species.valueCounts.map((v: { value: unknown }) => v.value));
    expect(species.values[0]).toBe('Dragon');
    const bg = byName.get('Background');
    expect(bg.values.map((v: string) => v.toLowerCase()).sort()).toEqual(['blue', 'cosmic', 'gold', 'green', 'purple', 'red']);
    for (const { value, count: n } of bg.valueCounts) expect(n).toBe(count([{ name: 'Background', values: [value] }]));
    expect(byName.get('Eyes').tokens).toBe(count([{ name: 'Eyes' }]));
  });

  it('honours excludeProperties (any case) and excludePropertyValues; TokenCollectionFilters is the old name', async () => {
    const body = await ok('GetTokenMetadataPropertyFilters', { chainID: 'anvil', contractAddress: nft, excludeProperties: ['level', 'Power'], excludePropertyValues: true });
    const names = body.filters.map((f: { name: string }) => f.name).sort();
    expect(names).toEqual(['Accessories', 'Background', 'Eyes', 'Species', 'stats.speed']);
    for (const f of body.filters) expect(f.values).toBeUndefined();
    const legacy = await ok('TokenCollectionFilters', { chainID: 'anvil', contractAddress: nft });
    expect(legacy.filters.length).toBe(7);
    expect(legacy.filters.find((f: { name: string }) => f.name === 'Species').values.length).toBe(6);
  });
});

describe('the index follows document changes', () => {
  it("a refresh replaces a token's pairs; a failed refresh keeps the last good ones", async () => {
    const id = '7';
    const old = docs.get(id)!;
    const changed = {
      name: 'Changed #7',
      description: 'x',
      attributes: [
        { trait_type: 'Species', value: 'Chimera' },
        { trait_type: 'Level', value: 1000 },
      ],
    };
    origin.setDocument(`/s/${id}`, changed);
    await ok('RefreshTokenMetadata', { chainID: 'anvil', contractAddress: nft, tokenIDs: [id] });
    await drain(t.services);
    expect(await allIds({ properties: [{ name: 'Species', values: ['chimera'] }] })).toEqual([id]);
    expect(await allIds({ properties: [{ name: 'Level', min: 1000 }] })).toEqual([id]);
    // Its old traits are gone, and so are its old words; a misspelling finds its new name.
    expect(await allIds({ properties: [{ name: 'Background' }] })).not.toContain(id);
    expect(await allIds({ text: 'Chanjed' })).toEqual([id]);
    expect(await allIds({ text: (old.name as string).split(' ')[0]!.slice(0, -1) + 'x' })).not.toContain(id);

    origin.removeDocument(`/s/${id}`);
    await ok('RefreshTokenMetadata', { chainID: 'anvil', contractAddress: nft, tokenIDs: [id] });
    await drain(t.services);
    expect(await allIds({ properties: [{ name: 'Species', values: ['chimera'] }] })).toEqual([id]);

    origin.setDocument(`/s/${id}`, old);
    await ok('RefreshTokenMetadata', { chainID: 'anvil', contractAddress: nft, tokenIDs: [id] });
    await drain(t.services);
    expect(await allIds({ properties: [{ name: 'Species', values: ['chimera'] }] })).toEqual([]);
    expect(await allIds({ properties: [{ name: 'Species', values: [(old.name as string).split(' ')[0]!] }] })).toContain(id);
    expect(await allIds({ text: 'Chanjed' })).toEqual([]);
  }, 60_000);

  it('a watcher update (ERC-4906 MetadataUpdate) re-indexes the token', async () => {
    const w = await startTestService({
      chains: [{ ...chain.chainConfig, watch: true }],
      metadata: { hotCacheTtlMs: 0, fetchTimeoutMs: 3_000, inlineWaitMs: 20_000 },
      watcher: { confirmations: 0, pollMs: 100 },
      refresh: { pollMs: 50, coolOffSec: 0 },
    });
    try {
      origin.setDocument('/w/1', { name: 'W1', attributes: [{ trait_type: 'Mood', value: 'Calm' }] });
      const watched = await erc721WithTokens(chain, origin, '/w/', ['1']);
      await getTokenMetadata(w, watched, ['1']);
      const ids = async (value: string) =>
        (await call(w, 'SearchTokenMetadataTokenIDs', { chainID: 'anvil', contractAddress: watched, filter: { properties: [{ name: 'Mood', values: [value] }] } })).body.tokenIDs;
      expect(await ids('calm')).toEqual(['1']);
      const [watcher] = w.services.watchers;
      await watcher!.poll();
      origin.setDocument('/w/1', { name: 'W1', attributes: [{ trait_type: 'Mood', value: 'Angry' }] });
      await chain.send([{ address: watched, contract: 'DevERC721', functionName: 'emitMetadataUpdate', args: [1n] }]);
      await watcher!.poll();
      await drain(w.services);
      expect(await ids('angry')).toEqual(['1']);
      expect(await ids('calm')).toEqual([]);
    } finally {
      await w.close();
    }
  }, 60_000);
});

describe('hostile input', () => {
  const search = (body: Record<string, unknown>) => call(t, 'SearchTokenMetadataTokenIDs', { chainID: 'anvil', contractAddress: nft, ...body });
  const refused = async (body: Record<string, unknown>, pattern: RegExp, method = 'SearchTokenMetadataTokenIDs') => {
    const res = method === 'SearchTokenMetadataTokenIDs' ? await search(body) : await call(t, method, body);
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body.error).toBe('InvalidArgument');
    expect(res.body.cause).toMatch(pattern);
  };

  it('page size and depth are bounded: a size above 1000 is answered with 1000 (as Sequence does), depth past the cap is refused with the limit named', async () => {
    const big = await search({ page: { pageSize: 1001 } });
    expect([big.status, big.body.page.pageSize]).toEqual([200, 1000]);
    await refused({ page: { pageSize: 0 } }, /pageSize/);
    await refused({ page: { page: 200, pageSize: 1000 } }, /100000/);
    await refused({ page: { page: 200, pageSize: 5000 } }, /100000/);
    const byQuery = await call(t, 'SearchTokenMetadataByQuery', { q: 'xyz', page: { pageSize: 5000 } });
    expect([byQuery.status, byQuery.body.nextPage?.pageSize], JSON.stringify(byQuery.body)).toEqual([200, 1000]);
    expect((await search({ page: { pageSize: 1000 } })).status).toBe(200);
  });

  it('text shorter than 3 characters is refused across contracts (it could not use the index), accepted within one', async () => {
    await refused({ q: 'dr' }, /q: at least 3 characters unless contractAddress is given/, 'SearchTokenMetadataByQuery');
    await refused({ q: 'dr', chainID: 'anvil' }, /at least 3 characters/, 'SearchTokens');
    await refused({ filter: 'dr' }, /at least 3 characters unless excludeTokenMetadata/, 'SearchMetadata');
    expect((await call(t, 'SearchMetadata', { filter: 'dr', excludeTokenMetadata: true })).status).toBe(200);
    const within = await ok('SearchTokenMetadataByQuery', { q: 'dr', contractAddress: nft, page: { pageSize: 1000 } });
    expect(within.tokenMetadata.map((x: { tokenId: string }) => x.tokenId).sort(byTokenOrder)).toEqual(
      expected([]).filter((id) => /dr/i.test(String(docs.get(id)!.name)) || /dr/i.test(String(docs.get(id)!.description))),
    );
  });

  it('property counts, value counts and lengths are bounded', async () => {
    const many = Array.from({ length: 21 }, (_, i) => ({ name: `p${i}` }));
    await refused({ filter: { properties: many } }, /at most 20 properties/);
    await refused({ filter: { properties: [{ name: 'Species', values: Array.from({ length: 101 }, (_, i) => `v${i}`) }] } }, /at most 100 values/);
    await refused({ filter: { properties: [{ name: 'Species', values: ['x'.repeat(201)] }] } }, /at most 200 characters/);
    await refused({ filter: { properties: [{ name: 'n'.repeat(101) }] } }, /at most 100 characters/);
    await refused({ filter: { text: 't'.repeat(201) } }, /at most 200 characters/);
    await refused({ filter: { properties: [{ name: 'Level', min: 10, max: 5 }] } }, /min is greater than max/);
    await refused({ filter: { properties: [{ name: 'Level', type: 'STRING', min: 1 }] } }, /not to a STRING/);
    await refused({ filter: { properties: [{ name: 'Level', type: 'FLOAT' }] } }, /type/);
    await refused({ filter: { properties: [{ name: 'Level', values: [{ $gt: 1 }] }] } }, /values/);
  });

  it('unknown fields are refused, at every level; cursor paging only forwards, by the kind of cursor the search gives', async () => {
    await refused({ filter: { text: 'x', sort: 'name' } }, /Unrecognized key: "sort"/);
    await refused({ filter: { properties: [{ name: 'Level', op: 'gt' }] } }, /Unrecognized key: "op"/);
    await refused({ orderBy: 'x' }, /Unrecognized key: "orderBy"/);
    await refused({ page: { before: '10' } }, /cursor paging backwards/);
    await refused({ page: { after: 'abc' } }, /after: a token id/);
    await refused({ page: { column: 'name', after: '10' } }, /only "tokenId"/);
    // A search with text pages by rank, one without by token id: a cursor of the other kind is refused.
    await refused({ filter: { text: 'dragon' }, page: { after: '10' } }, /a search with text pages by rank/);
    await refused({ filter: { text: 'dragon' }, page: { column: 'rank', after: '10' } }, /after: a rank cursor/);
    await refused({ filter: { text: 'dragon' }, page: { column: 'rank', after: '5:0.5:10' } }, /after: a rank cursor/);
    await refused({ filter: { text: 'dragon' }, page: { column: 'rank', after: '4:2:10' } }, /after: a rank cursor/);
    await refused({ page: { column: 'rank', after: '1:0:10' } }, /a search with text pages by rank/);
    await refused({ q: 'dragon', contractAddress: nft, page: { after: '10' } }, /cursor paging applies to searches by filter/, 'SearchTokenMetadataByQuery');
    await refused({ q: 'x', extra: 1 }, /Unrecognized key/, 'SearchTokenMetadataByQuery');
    await refused({ chainID: 'anvil', contractAddress: nft, excludeProperties: [], includeAll: true }, /Unrecognized key/, 'GetTokenMetadataPropertyFilters');
    // null means absent (webrpc): accepted.
    expect((await search({ filter: { text: null, properties: null }, page: null })).status).toBe(200);
    // An echoed previous page ({page, pageSize, more}) is accepted.
    expect((await search({ page: { page: 1, pageSize: 10, more: true } })).status).toBe(200);
  });

  it('injection attempts are plain data', async () => {
    const evil = ["x' OR '1'='1", "'; DROP TABLE token_properties; --", '\\', "Dragon') OR true --"];
    for (const s of evil) {
      // Text is matched as text: only the string with a real word in it ("Dragon") finds anything, and only dragons.
      const found: string[] = (await search({ filter: { text: s } })).body.tokenIDs;
      for (const id of found) expect(docs.get(id)!.name).toMatch(/^Dragon/);
      if (!s.includes('Dragon')) expect(found).toEqual([]);
      expect((await search({ filter: { properties: [{ name: s, values: [s] }] } })).body.tokenIDs).toEqual([]);
      expect((await call(t, 'SearchTokenMetadataByQuery', { q: s, contractAddress: nft })).status).toBe(200);
      expect((await call(t, 'GetTokenMetadataPropertyFilters', { chainID: 'anvil', contractAddress: nft, excludeProperties: [s] })).status).toBe(200);
    }
    expect(await allIds({ properties: [{ name: 'Species', values: ['Basilisk'] }] })).toEqual(expected([{ name: 'Species', values: ['Basilisk'] }]));
  });

  it('a bad chain or address gets the usual errors', async () => {
    const res = await call(t, 'SearchTokenMetadata', { chainID: 'nowhere', contractAddress: nft, filter: {} });
    expect(res.body.error).toBe('ChainNotFound');
    const bad = await call(t, 'SearchTokenMetadata', { chainID: 'anvil', contractAddress: '0x12', filter: {} });
    expect(bad.body.error).toBe('InvalidArgument');
    const missing = await call(t, 'GetTokenMetadataPropertyFilters', { chainID: 'anvil' });
    expect(missing.body.error).toBe('RequiredArgument');
  });
});

describe('deprecated names', () => {
  it('SearchTokenIDs answers tokenIds; SearchMetadata answers tokens and contracts', async () => {
    const props: PF[] = [{ name: 'Background', values: ['Cosmic'] }];
    const ids = await ok('SearchTokenIDs', { chainID: 'anvil', contractAddress: nft, filter: { properties: props }, page: { pageSize: 1000 } });
    expect(ids.tokenIds).toEqual(expected(props));
    const m = await ok('SearchMetadata', { filter: 'griffin', chainID: 'anvil' });
    expect(m.tokenMetadata.length).toBeGreaterThan(0);
    for (const x of m.tokenMetadata.slice(0, 5)) expect(x.name).toContain('Griffin');
    expect(Array.isArray(m.contractInfo)).toBe(true);
    const only = await ok('SearchMetadata', { filter: 'griffin', excludeTokenMetadata: true });
    expect(only.tokenMetadata).toEqual([]);
    const erc20 = await ok('SearchMetadata', { filter: 'griffin', types: ['ERC20'] });
    expect(erc20.tokenMetadata).toEqual([]);
  });
});

describe('the official @0xsequence/metadata client', () => {
  it('calls each new method and gets the documented shapes', async () => {
    const address = await t.app.listen({ port: 0, host: '127.0.0.1' });
    const client = new SequenceMetadata(address, t.accessKey);
    const props: PF[] = [
      { name: 'Species', values: ['Griffin'] },
      { name: 'Level', min: 10, max: 80 },
    ];
    const want = expected(props);

    const s = await client.searchTokenMetadata({ chainID: 'anvil', contractAddress: nft, filter: { properties: props as never }, page: { pageSize: 5 } });
    expect(s.tokenMetadata.map((x) => x.tokenId)).toEqual(want.slice(0, 5));
    expect(s.page).toEqual({ page: 1, pageSize: 5, more: want.length > 5, column: 'tokenId', after: want.slice(0, 5).at(-1) });
    // The official client passes the answer's page back for the next one: the cursor pages on.
    const s2 = await client.searchTokenMetadata({ chainID: 'anvil', contractAddress: nft, filter: { properties: props as never }, page: s.page });
    expect(s2.tokenMetadata.map((x) => x.tokenId)).toEqual(want.slice(5, 10));
    expect(s.tokenMetadata[0]).toMatchObject({ tokenId: want[0], contractAddress: nft.toLowerCase(), status: 'AVAILABLE' });

    const ids = await client.searchTokenMetadataTokenIDs({ chainID: 'anvil', contractAddress: nft, filter: { properties: props as never }, page: { pageSize: 1000 } });
    expect(ids.tokenIDs).toEqual(want);
    expect(ids.page.more).toBe(false);

    const q = await client.searchTokenMetadataByQuery({ q: 'griffin', chainID: 'anvil', contractAddress: nft, page: { pageSize: 3 } });
    expect(q.tokenMetadata).toHaveLength(3);
    for (const x of q.tokenMetadata) expect(x.name).toContain('Griffin');
    expect(q.nextPage).toEqual({ page: 1, pageSize: 3, more: true });

    const f = await client.getTokenMetadataPropertyFilters({ chainID: 'anvil', contractAddress: nft, excludeProperties: ['Accessories'] });
    expect(f.filters.map((x) => x.name).sort()).toEqual(['Background', 'Eyes', 'Level', 'Power', 'Species', 'stats.speed']);
    const level = f.filters.find((x) => x.name === 'Level')!;
    expect(level.type).toBe('INT');
    expect(typeof level.min).toBe('number');
    expect(Array.isArray(level.values)).toBe(true);

    expect((await client.searchTokenMetadataTokenIDs({ chainID: 'anvil', contractAddress: nft, filter: {}, page: { pageSize: 5000 } })).page).toMatchObject({ pageSize: 1000 });
  });
});

describe('migration 0012', () => {
  /** An empty database of the run's backend (the test template is already migrated). */
  async function emptyDb(): Promise<{ db: Db; drop(): Promise<void> }> {
    if (TEST_DB === 'pglite') {
      const db = await openDb('memory://');
      return { db, drop: () => db.close() };
    }
    const name = `metarelay_t_${inject('runId')}_backfill_${process.pid}`;
    const admin = await openDb(TEST_PG_URL);
    await admin.query(`CREATE DATABASE ${name}`);
    const db = await openDb(pgUrlFor(name));
    return {
      db,
      async drop() {
        await db.close();
        await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await admin.close();
      },
    };
  }

  it('indexes the tokens already stored when it runs', async () => {
    const { db, drop } = await emptyDb();
    try {
      await migrate(
        db,
        loadMigrations().filter((m) => m.id < 12),
      );
      // Stored as the resolver stores them: the normalised fields with attributes and properties passed through.
      const stored = (d: Doc) => JSON.stringify({ name: d.name, description: d.description, image: d.image, attributes: d.attributes ?? null, properties: d.properties ?? null });
      await db.query(`INSERT INTO token_metadata (chain_id, contract_address, token_id, metadata) VALUES (1, '0xabc', '5', $1::jsonb), (1, '0xabc', '6', $2::jsonb), (1, '0xabc', '7', NULL)`, [
        stored(docs.get('5')!),
        stored(docs.get('6')!),
      ]);
      expect(await migrate(db)).toContain('0012_token_search');
      const rows = await db.query<{ token_id: string; name: string; value_text: string }>('SELECT token_id, name, value_text FROM token_properties');
      const key = (x: { token_id: string; name: string; value_text: string }) => `${x.token_id}:${x.name}=${x.value_text}`;
      const want = ['5', '6'].flatMap((id) => pairsOf(docs.get(id)!).map((p) => key({ token_id: id, name: p.name, value_text: p.text })));
      expect(rows.rows.map(key).sort()).toEqual([...new Set(want)].sort());
    } finally {
      await drop();
    }
  });
});
