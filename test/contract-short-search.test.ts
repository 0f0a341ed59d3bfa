// A search of one or two characters runs tier by tier, each cut at the page and its name-prefix tier
// read in rank order from an index (contract-store.ts shortSearch, migration 0056). It must rank as the
// plain definition does: one CASE for the tier over every match, one sort. That definition is the
// reference below, checked on generated contracts for every query of one and two letters the names
// start with, with and without filters, page by page.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contractStore, type ContractStore } from '../src/metadata/contracts/contract-store.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { mulberry32 } from './support/random.ts';

let t: TestDb;
let store: ContractStore;

const rand = mulberry32(30112026);
const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)]!;
const SYLLABLES = ['ko', 'ka', 'ba', 'wr', 'kö', 'k_', 'k%', 'zen', 'lu', 'o'];
const SUFFIXES = ['', '', ' Token', ' Ko', ' ka Coin', ' DAO'];
const QUERIES = ['k', 'ko', 'ka', 'kö', 'k_', 'k%', 'b', 'ba', 'wr', 'o', 'ok', 'z'];

/** The definition: every match, its tier by one CASE, one sort (the search before tiers were run apart). */
const REFERENCE = `WITH hits AS (
   SELECT chain_id, address, curated, name,
     CASE WHEN lower(symbol) = $1 THEN 0 WHEN lower(name) = $1 THEN 1 WHEN lower(name) LIKE $2 ESCAPE '\\' THEN 2
          WHEN search @@ plainto_tsquery('simple', $1) THEN 3 ELSE 4 END AS tier
   FROM contracts
   WHERE (name <> '' OR symbol <> '') AND ($3::bigint[] IS NULL OR chain_id = ANY($3::bigint[])) AND ($4::text[] IS NULL OR type = ANY($4::text[]))
     AND (lower(symbol) = $1 OR lower(name) LIKE $2 ESCAPE '\\' OR search @@ plainto_tsquery('simple', $1)))
 SELECT chain_id, address FROM hits ORDER BY tier, curated DESC, length(name), lower(name), chain_id, address LIMIT $5 OFFSET $6`;

beforeAll(async () => {
  t = await createTestDb();
  store = contractStore(t.db);
  const rows = Array.from({ length: 1500 }, (_, i) => {
    const base = Array.from({ length: 1 + Math.floor(rand() * 2) }, () => pick(SYLLABLES)).join('');
    const name = rand() < 0.03 ? '' : `${rand() < 0.5 ? base[0]!.toUpperCase() + base.slice(1) : base}${pick(SUFFIXES)}`;
    // Some symbols equal a query (the first tier), some names are a query exactly (the second).
    const symbol = rand() < 0.1 ? pick(QUERIES).toUpperCase() : base.slice(0, 3).toUpperCase();
    return { chainId: pick([1, 137]), address: `0x${i.toString(16).padStart(40, '0')}`, name, symbol, type: pick(['ERC20', 'ERC721']), curated: rand() < 0.3 };
  });
  await t.db.query(
    `INSERT INTO contracts (chain_id, address, name, symbol, type, curated)
     SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::boolean[])`,
    [rows.map((r) => r.chainId), rows.map((r) => r.address), rows.map((r) => r.name), rows.map((r) => r.symbol), rows.map((r) => r.type), rows.map((r) => r.curated)],
  );
  await t.db.exec('ANALYZE contracts');
});
afterAll(async () => {
  await t?.drop();
});

describe('SearchContracts with one or two characters', () => {
  it('ranks as one CASE over every match would, page by page, with and without filters', async () => {
    const filters: Array<{ chainIds: number[] | null; types: string[] | null }> = [
      { chainIds: null, types: null },
      { chainIds: [137], types: null },
      { chainIds: null, types: ['ERC721'] },
    ];
    let compared = 0;
    const tiersSeen = new Set<number>();
    for (const q of QUERIES) {
      for (const f of filters) {
        for (let page = 0; page < 4; page++) {
          const got = await store.search({ q, ...f, page, pageSize: 7 });
          const like = `${q.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
          const want = await t.db.query<{ chain_id: string; address: string }>(REFERENCE, [q.toLowerCase(), like, f.chainIds, f.types, 8, page * 7]);
          expect(
            got.rows.map((r) => `${r.chain_id}:${r.address}`),
            `${q} ${JSON.stringify(f)} page ${page}`,
          ).toEqual(want.rows.slice(0, 7).map((r) => `${r.chain_id}:${r.address}`));
          expect(got.more).toBe(want.rows.length > 7);
          compared += got.rows.length;
        }
        const tiers = await t.db.query<{ tier: number }>(`SELECT DISTINCT tier FROM (${REFERENCE.replace(/SELECT chain_id, address FROM hits.*$/s, 'SELECT tier FROM hits')}) x`, [
          q.toLowerCase(),
          `${q.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`,
          f.chainIds,
          f.types,
        ]);
        for (const r of tiers.rows) tiersSeen.add(Number(r.tier));
      }
    }
    // The data reached every tier of a short query, and the pages were not empty.
    expect([...tiersSeen].sort()).toEqual([0, 1, 2, 3]);
    expect(compared).toBeGreaterThan(500);
  });

  it('takes the name-prefix tier from its index in rank order, not from every match', async () => {
    // On 1 500 rows the planner may rightly prefer a sort; with sorting priced out, the index must give the order.
    const forced = await t.db.transaction(async (tx) => {
      await tx.query('SET LOCAL enable_sort = off');
      await tx.query('SET LOCAL enable_bitmapscan = off');
      const r = await tx.query<Record<string, string>>(
        `EXPLAIN SELECT address FROM contracts WHERE left(lower(name), 2) = 'ko' ORDER BY curated DESC, length(name), lower(name), chain_id, address LIMIT 8`,
      );
      return r.rows.map((x) => Object.values(x)[0]).join('\n');
    });
    expect(forced).toMatch(/Index Scan using contracts_name_head2_idx/);
    expect(forced).not.toMatch(/Sort/);
  });
});
