/**
 * Token search over one 100 000-token collection with 8 traits each (skewed values, as real
 * collections have: a few common values and a long tail), on PGlite and PostgreSQL in one run.
 * Measures the index build through the token store's save (what every resolution does), then
 * SearchTokenMetadata with 1, 2 and 4 property filters, with text, and GetTokenMetadataPropertyFilters.
 * Usage: npx tsx bench/token-search.ts   (BENCH_TOKENS=100000 BENCH_BACKENDS=pglite,postgres)
 * BENCH_KEEP=1 keeps the databases (their location is logged); BENCH_EXPLAIN=<location> then prints
 * EXPLAIN (ANALYZE, BUFFERS) of every search on a kept database instead of measuring; BENCH_REUSE=<location>
 * measures a kept database again without building it. Each search is measured both ways a process answers
 * it: from the posting lists it holds in memory (postings), and in SQL (sql; a process without them).
 * BENCH_SAMPLES per search from posting lists (200; 40 at most in SQL).
 */
import type { TokenFilter } from '../src/metadata/search/filter.ts';
import { TokenFinder } from '../src/metadata/search/finder.ts';
import { PostingsCache } from '../src/metadata/search/postings-cache.ts';
import { postingsStore } from '../src/metadata/search/postings-store.ts';
import { searchStore } from '../src/metadata/search/search-store.ts';
import { tokenStore, type Resolution } from '../src/metadata/tokens/token-store.ts';
import { openDb, type Queryable } from '../src/store/db.ts';
import { migrate } from '../src/store/migrate.ts';
import type { Logger } from '../src/telemetry/logger.ts';
import { benchDb, log, summarize } from './support.ts';

const N = Number(process.env.BENCH_TOKENS ?? 100_000);
const backends = (process.env.BENCH_BACKENDS ?? 'pglite,postgres').split(',') as ('pglite' | 'postgres')[];
const CHAIN = 1;
const CONTRACT = '0x00000000000000000000000000000000000c011e';
const TRAITS: Record<string, string[]> = {
  Background: ['Blue', 'Red', 'Green', 'Purple', 'Gold', 'Black', 'White', 'Orange'],
  Body: ['Robot', 'Zombie', 'Alien', 'Human', 'Ape', 'Ghost'],
  Eyes: ['Laser', 'Sleepy', 'Angry', 'Wink', 'Closed', 'Hypno', '3D', 'Visor', 'Bored', 'Sad'],
  Hat: ['None', 'Cap', 'Crown', 'Beanie', 'Halo', 'Cowboy', 'Helmet', 'Bandana', 'Party', 'Top'],
  Mouth: ['Smile', 'Grin', 'Pipe', 'Gold Tooth', 'Bubblegum', 'Frown'],
  Clothes: ['Hoodie', 'Suit', 'Tee', 'Armor', 'Kimono', 'Vest', 'Jacket', 'None'],
};

function collection(n: number): Map<string, Resolution>[] {
  let seed = 7;
  const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
  // Zipf-like: value i is picked with weight 1/(i+1), so the first values are common, the last rare.
  const pick = (values: string[]) => {
    const weights = values.map((_, i) => 1 / (i + 1));
    let r = rnd() * weights.reduce((a, b) => a + b, 0);
    for (const [i, w] of weights.entries()) if ((r -= w) <= 0) return values[i]!;
    return values[values.length - 1]!;
  };
  const batches: Map<string, Resolution>[] = [];
  for (let start = 1; start <= n; start += 1000) {
    const batch = new Map<string, Resolution>();
    for (let id = start; id < Math.min(start + 1000, n + 1); id++) {
      const attributes = [
        ...Object.entries(TRAITS).map(([trait_type, values]) => ({ trait_type, value: pick(values) })),
        { trait_type: 'Level', value: 1 + Math.floor(rnd() * 100), display_type: 'number' },
        { trait_type: 'Power', value: Math.floor(rnd() ** 2 * 1000), display_type: 'number' },
      ];
      const metadata = { tokenId: String(id), name: `Bench Creature #${id}`, description: `A ${attributes[1]!.value} with ${attributes[2]!.value} eyes`, attributes };
      batch.set(String(id), { ok: true, tokenUri: `https://bench.example/${id}`, metadata, raw: metadata, trace: null, source: 'FETCHER_ON_CHAIN_TOKEN_URI' });
    }
    batches.push(batch);
  }
  return batches;
}

const prop = (name: string, values: Array<string | number> | null, min: number | null = null, max: number | null = null) => ({ name, values, min, max });
const searches: { label: string; filter: TokenFilter }[] = [
  { label: '1 property (common value)', filter: { text: null, properties: [prop('Background', ['Blue'])] } },
  { label: '1 property (rare value)', filter: { text: null, properties: [prop('Eyes', ['Bored'])] } },
  { label: '2 properties', filter: { text: null, properties: [prop('Body', ['Robot', 'Alien']), prop('Hat', ['Crown'])] } },
  { label: '4 properties with a range', filter: { text: null, properties: [prop('Body', ['Robot']), prop('Eyes', ['Laser', 'Angry']), prop('Mouth', ['Smile']), prop('Level', null, 50, 100)] } },
  { label: 'text', filter: { text: 'creature #4242', properties: [] } },
  { label: 'text with a typo', filter: { text: 'creeture', properties: [] } },
  { label: 'text + 2 properties', filter: { text: 'robot', properties: [prop('Body', ['Robot']), prop('Hat', ['Halo'])] } },
];

if (process.env.BENCH_EXPLAIN) {
  const db = await openDb(process.env.BENCH_EXPLAIN);
  let plan: string[] = [];
  // Every statement a search sends is explained, then run (a search may read the answer of its first
  // statement to write the next); the plans of all of them are printed.
  const explaining: Queryable = {
    exec: (sql) => db.exec(sql),
    query: async <T>(sql: string, params?: unknown[]) => {
      const r = await db.query<Record<string, string>>(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`, params);
      plan.push('--', ...r.rows.map((x) => x['QUERY PLAN']!));
      return db.query<T>(sql, params);
    },
  };
  const search = searchStore(explaining);
  for (const { label, filter } of searches) {
    plan = [];
    await search.byFilter(CHAIN, CONTRACT, filter, { page: 0, pageSize: 100 }, false);
    console.log(`\n=== ${label}\n${plan.join('\n')}`);
  }
  plan = [];
  await search.propertyStats(CHAIN, CONTRACT, [], 1000, 500);
  console.log(`\n=== property filters\n${plan.join('\n')}`);
  await db.close();
  process.exit(0);
}

const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 200);
const silent = { info: () => {}, warn: () => {} } as unknown as Logger;

/** Runs `fn` SAMPLES times after a warm-up and summarises the durations. */
async function measure(fn: () => Promise<number>, n = SAMPLES): Promise<ReturnType<typeof summarize> & { firstPage: number }> {
  for (let i = 0; i < 5; i++) await fn();
  const samples: number[] = [];
  let hits = 0;
  for (let i = 0; i < n; i++) {
    const s = performance.now();
    hits = await fn();
    samples.push(performance.now() - s);
  }
  return { ...summarize(samples), firstPage: hits };
}

const out: Record<string, unknown> = { tokens: N, traitsPerToken: 8, samples: SAMPLES };
for (const backend of backends) {
  // BENCH_REUSE=<location> measures a database kept by BENCH_KEEP (migrated first) instead of building one.
  const reuse = process.env.BENCH_REUSE;
  const { db, drop, location } = reuse ? { db: await openDb(reuse), drop: async () => {}, location: reuse } : await benchDb(backend);
  try {
    if (reuse) await migrate(db);
    const tokens = tokenStore(db);
    const search = searchStore(db);
    let buildSec: number | null = null;
    if (!reuse) {
      const batches = collection(N);
      log(`${backend}: saving ${N} tokens in ${batches.length} batches (indexing their traits)…`);
      const t0 = performance.now();
      let done = 0;
      for (const batch of batches) {
        await tokens.save(CHAIN, CONTRACT, batch, new Date());
        done += batch.size;
        if (done % 20_000 === 0) log(`${backend}: ${done}/${N}`);
      }
      buildSec = (performance.now() - t0) / 1000;
      // At rest, as a serving database is once vacuumed (contract-search.ts says why).
      await db.exec('VACUUM (ANALYZE) token_metadata');
      await db.exec('VACUUM (ANALYZE) token_properties');
    }
    // The posting lists as a serving process holds them: loaded by the first search, then kept at the database's version.
    const cache = new PostingsCache({ store: postingsStore(db), log: silent, budgetBytes: 256 * 1024 * 1024 });
    const finder = new TokenFinder(search, cache);
    const t1 = performance.now();
    await finder.find(CHAIN, CONTRACT, searches[0]!.filter, { page: 0, pageSize: 100 }, false);
    while (!(await cache.view(CHAIN, CONTRACT))) await new Promise((r) => setTimeout(r, 50));
    const loadMs = Math.round(performance.now() - t1);
    log(`${backend}: posting lists loaded in ${loadMs} ms (${JSON.stringify(cache.stats())})`);
    const perSearch: Record<string, unknown> = {};
    const all: Record<'sql' | 'postings', number[]> = { sql: [], postings: [] };
    for (const { label, filter } of searches) {
      const row: Record<string, unknown> = {};
      for (const path of ['postings', 'sql'] as const) {
        const run = async () =>
          (path === 'sql' ? await search.byFilter(CHAIN, CONTRACT, filter, { page: 0, pageSize: 100 }, false) : await finder.find(CHAIN, CONTRACT, filter, { page: 0, pageSize: 100 }, false)).rows
            .length;
        // SQL, the comparison, is sampled less: on PGlite a search with text takes up to a second there.
        const m = await measure(run, path === 'sql' ? Math.min(SAMPLES, 40) : SAMPLES);
        row[path] = m;
        all[path].push(m.p99Ms);
      }
      perSearch[label] = row;
      log(`${backend}: ${label} ${JSON.stringify(row)}`);
    }
    const filters = await measure(async () => (await search.propertyStats(CHAIN, CONTRACT, [], 1000, 500)).length);
    out[backend] = {
      indexBuildSeconds: buildSec === null ? null : Math.round(buildSec * 10) / 10,
      indexBuildTokensPerSecond: buildSec === null ? null : Math.round(N / buildSec),
      postingsLoadMs: loadMs,
      postingsHeld: cache.stats(),
      searches: perSearch,
      worstP99Ms: { postings: Math.max(...all.postings), sql: Math.max(...all.sql) },
      propertyFilters: filters,
    };
  } finally {
    if (process.env.BENCH_KEEP) log(`${backend}: kept ${location} (BENCH_KEEP)`);
    else await drop();
  }
}
console.log(JSON.stringify(out, null, 2));
