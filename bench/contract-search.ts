/**
 * Contract search latency over 100 000 contracts, on PGlite and on PostgreSQL in one run.
 * Usage: npx tsx bench/contract-search.ts   (BENCH_CONTRACTS=100000 BENCH_BACKENDS=pglite,postgres)
 */
import { contractStore } from '../src/metadata/contracts/contract-store.ts';
import { importTokenList } from '../src/metadata/contracts/token-list.ts';
import { benchDb, log, summarize } from './support.ts';

const N = Number(process.env.BENCH_CONTRACTS ?? 100_000);
const backends = (process.env.BENCH_BACKENDS ?? 'pglite,postgres').split(',') as ('pglite' | 'postgres')[];
const syllables = [
  'ba',
  'ko',
  'ri',
  'zen',
  'lu',
  'mar',
  'tio',
  'pex',
  'do',
  'shi',
  'fra',
  'qua',
  'vo',
  'nel',
  'ard',
  'gro',
  'sy',
  'tum',
  'wex',
  'lio',
  'cha',
  'mo',
  'ru',
  'pi',
  'der',
  'fin',
  'sol',
  'ka',
  'nu',
  'ven',
];
const suffixes = ['', '', '', ' Token', ' Finance', ' Protocol', ' Coin', ' Network', ' DAO', ' Labs'];

function list(n: number) {
  let seed = 42;
  const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
  const chains = [1, 137, 42161, 10, 8453];
  const tokens = [];
  for (let i = 0; i < n; i++) {
    // Names made of random syllables spread over the trigram space the way real token names do.
    const word = () => Array.from({ length: 2 + Math.floor(rnd() * 2) }, () => syllables[Math.floor(rnd() * syllables.length)]).join('');
    const base = word();
    const name = `${base[0].toUpperCase()}${base.slice(1)}${suffixes[Math.floor(rnd() * suffixes.length)]}`;
    tokens.push({
      chainId: chains[i % chains.length],
      address: `0x${i.toString(16).padStart(40, '0')}`,
      name,
      symbol: base.slice(0, 3 + (i % 3)).toUpperCase(),
      decimals: 18,
    });
  }
  tokens.push({ chainId: 1, address: '0x1f9840a85d5af5bf1d1762f925bdaddc4201f984', name: 'Uniswap', symbol: 'UNI', decimals: 18 });
  tokens.push({ chainId: 1, address: '0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48', name: 'USD Coin', symbol: 'USDC', decimals: 6 });
  tokens.push({ chainId: 1, address: '0xc02aaa39b223fe8d0a0e5c4f27ead9083c756cc2', name: 'Wrapped Ether', symbol: 'WETH', decimals: 18 });
  tokens.push({ chainId: 137, address: '0xd6df932a45c0f255f85145f286ea0b292b21c90b', name: 'Aave Token', symbol: 'AAVE', decimals: 18 });
  return { name: 'bench', tokens };
}

const queries: { label: string; q: string; chainIds?: number[] }[] = [
  { label: 'exact symbol', q: 'USDC' },
  { label: 'name prefix', q: 'Uniswap' },
  { label: 'typo', q: 'Unswap' },
  { label: 'two words', q: 'wrapped ether' },
  { label: 'chain filter', q: 'aave', chainIds: [137] },
  { label: 'common prefix', q: 'ko' },
  { label: 'one letter', q: 'k' },
  { label: 'rare', q: 'zzqx' },
];

const out: Record<string, unknown> = { contracts: N };
for (const backend of backends) {
  const { db, drop } = await benchDb(backend);
  try {
    const store = contractStore(db);
    log(`${backend}: importing ${N} contracts…`);
    const t0 = performance.now();
    await importTokenList(store, list(N), { batchSize: 2000 });
    const importSec = (performance.now() - t0) / 1000;
    // Measured at rest, as a serving database is once vacuumed: otherwise the service's own maintenance
    // (or autovacuum) vacuums the 100 000 fresh rows, their trigram index too, while the searches run.
    await db.exec('VACUUM (ANALYZE) contracts');
    const perQuery: Record<string, unknown> = {};
    const all: number[] = [];
    for (const { label, q, chainIds } of queries) {
      const samples: number[] = [];
      for (let i = 0; i < 3; i++) await store.search({ q, chainIds: chainIds ?? null, types: null, page: 0, pageSize: 20 });
      for (let i = 0; i < 40; i++) {
        const s = performance.now();
        await store.search({ q, chainIds: chainIds ?? null, types: null, page: 0, pageSize: 20 });
        samples.push(performance.now() - s);
      }
      all.push(...samples);
      const first = (await store.search({ q, chainIds: chainIds ?? null, types: null, page: 0, pageSize: 3 })).rows.map((r) => r.name);
      perQuery[label] = { q, ...summarize(samples), top: first };
      log(`${backend}: ${label} ${JSON.stringify(perQuery[label])}`);
    }
    out[backend] = { importSeconds: Math.round(importSec * 10) / 10, importPerSecond: Math.round(N / importSec), overall: summarize(all), queries: perQuery };
  } finally {
    await drop();
  }
}
console.log(JSON.stringify(out, null, 2));
