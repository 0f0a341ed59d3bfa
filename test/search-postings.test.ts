// Token search from posting lists held in memory (src/metadata/search/postings*.ts) against the
// search in SQL, on a real database of the run's backend: for many filters, page sizes and both kinds
// of paging, every page (ids, more, cursor) must be the same both ways. Then the lists must follow
// the database: changes saved by this or another process, changes older than those kept (a reload),
// a forgotten chain, a memory budget too small, a large contract loading in the background.
// test/token-search.test.ts checks the same searches end to end against a plain in-memory filter.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenFinder } from '../src/metadata/search/finder.ts';
import type { TokenFilter } from '../src/metadata/search/filter.ts';
import { KEPT_CHANGES } from '../src/metadata/search/property-index.ts';
import { PostingsCache } from '../src/metadata/search/postings-cache.ts';
import { byTokenOrder } from '../src/metadata/search/postings.ts';
import { postingsStore } from '../src/metadata/search/postings-store.ts';
import { searchStore } from '../src/metadata/search/search-store.ts';
import { tokenStore, type Resolution, type TokenSummary } from '../src/metadata/tokens/token-store.ts';
import type { Logger } from '../src/telemetry/logger.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { mulberry32 } from './support/random.ts';

const CHAIN = 1;
const CONTRACT = '0x00000000000000000000000000000000000c0de1';
const silent = { info: () => {}, warn: () => {}, error: () => {}, debug: () => {} } as unknown as Logger;

const rand = mulberry32(77);
const pick = <T>(xs: T[]) => xs[Math.floor(rand() ** 1.6 * xs.length)]!;
const SPECIES = ['Dragon', 'Phoenix', 'Griffin', 'Kraken', 'Unicorn', 'Basilisk'];
const PLACES = ['northern mountains', 'deep sea', 'desert', 'frozen tundra'];
/** Ids of every length up to 78 digits: token order is by length, then text. */
function idAt(i: number): string {
  if (i % 50 === 49) return `${i}${'0'.repeat(20 + (i % 7))}`;
  return String(i * 3 + (i % 3));
}

function doc(i: number, version = 0): Record<string, unknown> {
  const species = pick(SPECIES);
  const name = i % 37 === 0 ? null : i % 23 === 0 ? `Drache Ünïcode ${i}` : `${species} #${i}${version ? ' v' + version : ''}`;
  const big = i % 11 === 0 ? ['9007199254740993', '9007199254740992', '-12345678901234567890.5'][i % 3]! : String(Math.floor(rand() * 100));
  const attributes = [
    { trait_type: i % 9 === 0 ? 'SPECIES' : 'Species', value: i % 13 === 0 ? species.toUpperCase() : species },
    { trait_type: 'Level', value: 1 + Math.floor(rand() * 50) },
    { trait_type: 'Weight', value: rand() < 0.5 ? '3.50' : String((rand() * 10).toFixed(2)), display_type: 'number' },
    { trait_type: 'Supply', value: big, display_type: 'number' },
    { trait_type: 'Tags', value: ['Hat', 'Scarf', 'Crown'].filter(() => rand() < 0.4) },
  ];
  if (version) attributes.push({ trait_type: 'Edition', value: `v${version}` });
  return { ...(name === null ? {} : { name }), description: `A ${species.toLowerCase()} from the ${PLACES[i % PLACES.length]}.`, attributes };
}

const ok = (metadata: Record<string, unknown>): Resolution => ({ ok: true, tokenUri: null, metadata, raw: metadata, trace: null, source: 'FETCHER_ON_CHAIN_TOKEN_URI' });

const prop = (name: string, values: Array<string | number | boolean> | null, min: number | null = null, max: number | null = null) => ({ name, values, min, max });
const FILTERS: Array<{ what: string; filter: TokenFilter }> = [
  { what: 'no filter', filter: { text: null, properties: [] } },
  { what: 'one value, any case of name and value', filter: { text: null, properties: [prop('species', ['dragon'])] } },
  { what: 'values ORed', filter: { text: null, properties: [prop('Species', ['Kraken', 'Unicorn', 'Nope'])] } },
  { what: 'properties ANDed, array values', filter: { text: null, properties: [prop('Species', ['Dragon', 'Phoenix']), prop('Tags', ['Crown'])] } },
  { what: 'a number equal to its text ("3.50" = 3.5)', filter: { text: null, properties: [prop('Weight', [3.5])] } },
  { what: 'a range', filter: { text: null, properties: [prop('Level', null, 10, 30)] } },
  { what: 'a range past 2^53, exactly', filter: { text: null, properties: [prop('Supply', null, null, 9007199254740992)] } },
  // biome-ignore lint/correctness/noPrecisionLoss: the bound is the float a JSON client would send
  { what: 'a negative decimal bound', filter: { text: null, properties: [prop('Supply', null, -12345678901234567890, 50)] } },
  { what: 'a property only', filter: { text: null, properties: [prop('Edition', null)] } },
  { what: 'a property nobody has', filter: { text: null, properties: [prop('Nope', ['x'])] } },
  { what: 'text: a name', filter: { text: 'Dragon #3', properties: [] } },
  { what: 'text: a word of names and descriptions', filter: { text: 'dragon', properties: [] } },
  { what: 'text: descriptions only', filter: { text: 'tundra', properties: [] } },
  { what: 'text: a typo', filter: { text: 'Phonix', properties: [] } },
  { what: 'text: typos of two words', filter: { text: 'krakn dep', properties: [] } },
  { what: 'text: outside ASCII', filter: { text: 'ünïcode', properties: [] } },
  { what: 'text: a typo outside ASCII', filter: { text: 'drachë', properties: [] } },
  { what: 'text: one character', filter: { text: 'x', properties: [] } },
  { what: 'text with properties', filter: { text: 'the', properties: [prop('Species', ['Griffin', 'Basilisk']), prop('Level', null, 5, null)] } },
];

// The SQL search with text takes about a second a page on PGlite: the deeper comparisons use these.
const PROPERTY_FILTERS = FILTERS.filter((f) => f.filter.text === null);
const SOME_TEXT = FILTERS.filter((f) => ['text: a word of names and descriptions', 'text: a typo', 'text with properties'].includes(f.what));

let t: TestDb;
let sqlOnly: TokenFinder;
const search = () => searchStore(t.db);

/** A finder holding posting lists in its own cache: one serving process. */
function process_(opts: { budgetBytes?: number; inlineLoadTokens?: number } = {}) {
  const cache = new PostingsCache({ store: postingsStore(t.db), log: silent, budgetBytes: opts.budgetBytes ?? 64 * 1024 * 1024, inlineLoadTokens: opts.inlineLoadTokens });
  return { cache, finder: new TokenFinder(search(), cache) };
}

type Page = { ids: string[]; more: boolean; cursor: string | null };
const idsOf = (rows: TokenSummary[] | string[]) => rows.map((r) => (typeof r === 'string' ? r : r.tokenId));

/** Every page of a search, by cursor or by page number. */
async function allPages(f: TokenFinder, filter: TokenFilter, pageSize: number, byCursor: boolean, idsOnly: boolean): Promise<Page[]> {
  const pages: Page[] = [];
  let after: string | null = null;
  for (let page = 0; page < 200; page++) {
    const r = await f.find(CHAIN, CONTRACT, filter, byCursor ? { page: 0, pageSize, after } : { page, pageSize }, idsOnly);
    pages.push({ ids: idsOf(r.rows), more: r.more, cursor: r.cursor });
    if (!r.more) return pages;
    after = r.cursor;
  }
  throw new Error('more than 200 pages');
}

/** Page size, paging by cursor (else by page number), ids only (else whole rows). */
type Paging = readonly [number, boolean, boolean];
const EVERY_PAGING: Paging[] = [
  [1000, false, false],
  [37, true, true],
  [100, false, true],
];
const ONE_PAGE: Paging[] = [[1000, false, true]];

async function expectSameAsSql(f: TokenFinder, filters = FILTERS, pagings = EVERY_PAGING): Promise<void> {
  for (const { what, filter } of filters) {
    for (const [pageSize, byCursor, idsOnly] of pagings) {
      const want = await allPages(sqlOnly, filter, pageSize, byCursor, idsOnly);
      const got = await allPages(f, filter, pageSize, byCursor, idsOnly);
      expect(got, `${what}, pages of ${pageSize} by ${byCursor ? 'cursor' : 'number'}`).toEqual(want);
    }
  }
}

async function save(ids: number[], version: number): Promise<void> {
  await tokenStore(t.db).save(CHAIN, CONTRACT, new Map(ids.map((i) => [idAt(i), ok(doc(i, version))])), new Date());
}

beforeAll(async () => {
  t = await createTestDb();
  for (let start = 1; start <= 400; start += 100)
    await save(
      Array.from({ length: 100 }, (_, k) => start + k),
      0,
    );
  // Planner statistics, as autovacuum would have gathered them on PostgreSQL (PGlite runs no
  // autovacuum): without them the SQL search with text takes seconds a page on PGlite.
  await t.db.query('ANALYZE');
  sqlOnly = new TokenFinder(search(), new PostingsCache({ store: postingsStore(t.db), log: silent, budgetBytes: 0 }));
}, 120_000);

afterAll(async () => {
  await t?.drop();
});

describe('posting lists give the answers SQL gives', () => {
  it('for every filter, page size and kind of paging: the same pages, flags and cursors', async () => {
    const p = process_();
    await expectSameAsSql(p.finder, [...PROPERTY_FILTERS, ...SOME_TEXT.slice(1)]);
    await expectSameAsSql(p.finder, FILTERS, ONE_PAGE);
    // The answers above came from the lists, not from a fall-back to SQL.
    expect(p.cache.stats()).toMatchObject({ contracts: 1, tokens: 400 });
    // Filters hit something: the comparison is not between two empty lists.
    // Supply at most 2^53 exactly: token 22's 9007199254740992 is in, token 33's 9007199254740993 is not.
    const some = await p.finder.find(CHAIN, CONTRACT, FILTERS[6]!.filter, { page: 0, pageSize: 1000 }, true);
    expect(some.rows).toContain(idAt(22));
    expect(some.rows).not.toContain(idAt(33));
  });
});

describe('posting lists follow the database', () => {
  it('a change saved by this process or another is in the next answer of both (only the changed tokens are read again)', async () => {
    const a = process_();
    const b = process_();
    await expectSameAsSql(a.finder, FILTERS.slice(0, 2), ONE_PAGE);
    await expectSameAsSql(b.finder, FILTERS.slice(0, 2), ONE_PAGE);
    // Changed documents, and new tokens between and after the old ones.
    await save([5, 17, 100, 401, 402, 449], 2);
    const edition = { text: null, properties: [prop('Edition', ['V2'])] };
    for (const p of [a, b]) {
      const r = await p.finder.find(CHAIN, CONTRACT, edition, { page: 0, pageSize: 100 }, true);
      expect(r.rows).toEqual([5, 17, 100, 401, 402, 449].map(idAt).sort(byTokenOrder));
    }
    await expectSameAsSql(a.finder, [...PROPERTY_FILTERS, ...SOME_TEXT], ONE_PAGE);
    await expectSameAsSql(b.finder, SOME_TEXT, ONE_PAGE);
  });

  it('a holder older than the changes kept reloads the contract', async () => {
    const a = process_();
    await expectSameAsSql(a.finder, FILTERS.slice(0, 2), ONE_PAGE);
    const held = (await postingsStore(t.db).version(CHAIN, CONTRACT))!.version;
    for (let k = 0; k < KEPT_CHANGES + 4; k++) await save([1 + (k % 400)], 3);
    const v = (await postingsStore(t.db).version(CHAIN, CONTRACT))!;
    expect(v.floor).toBeGreaterThan(held);
    const kept = await t.db.query<{ n: string }>('SELECT count(*) AS n FROM token_index_changes WHERE chain_id = $1 AND contract_address = $2', [CHAIN, CONTRACT]);
    expect(Number(kept.rows[0]!.n)).toBeLessThanOrEqual(KEPT_CHANGES + 1);
    await expectSameAsSql(a.finder, [...PROPERTY_FILTERS, SOME_TEXT[1]!], ONE_PAGE);
    expect((await a.finder.find(CHAIN, CONTRACT, { text: null, properties: [prop('Edition', ['v3'])] }, { page: 0, pageSize: 1000 }, true)).rows).toHaveLength(KEPT_CHANGES + 4);
  }, 120_000);

  it('a contract over the memory budget is searched in SQL; a large one is, until it has loaded in the background', async () => {
    const small = process_({ budgetBytes: 10_000 });
    await expectSameAsSql(small.finder, FILTERS.slice(0, 3), ONE_PAGE);
    expect(small.cache.stats().contracts).toBe(0);
    const bg = process_({ inlineLoadTokens: 10 });
    expect(await bg.cache.view(CHAIN, CONTRACT)).toBeNull();
    let view = null;
    for (let i = 0; i < 100 && !view; i++) {
      await new Promise((r) => setTimeout(r, 50));
      view = await bg.cache.view(CHAIN, CONTRACT);
    }
    const stored = await t.db.query<{ n: string }>('SELECT count(*) AS n FROM token_metadata WHERE chain_id = $1 AND contract_address = $2 AND metadata IS NOT NULL', [CHAIN, CONTRACT]);
    expect(view?.ids.length).toBe(Number(stored.rows[0]!.n));
    await expectSameAsSql(bg.finder, FILTERS.slice(0, 3), ONE_PAGE);
  });

  it('a forgotten chain is dropped: nothing is answered from what was held', async () => {
    const a = process_();
    expect((await a.finder.find(CHAIN, CONTRACT, FILTERS[0]!.filter, { page: 0, pageSize: 10 }, true)).rows).toHaveLength(10);
    await tokenStore(t.db).forgetChain(CHAIN);
    expect((await a.finder.find(CHAIN, CONTRACT, FILTERS[0]!.filter, { page: 0, pageSize: 10 }, true)).rows).toEqual([]);
    expect(a.cache.stats().contracts).toBe(0);
    // Indexed again from scratch: versions never repeat, so the old holder cannot mistake the new ones for its own.
    await save([1, 2, 3], 4);
    expect((await a.finder.find(CHAIN, CONTRACT, FILTERS[0]!.filter, { page: 0, pageSize: 10 }, true)).rows).toEqual([1, 2, 3].map(idAt));
  });
});
