// The measures a search from posting lists computes in the process must be the database's own:
// pg_trgm's similarity and word_similarity (src/metadata/search/trigram.ts) and numeric comparison
// (decimal.ts), checked against the database of the run's backend on thousands of generated inputs.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compareDecimal, parseDecimal } from '../src/metadata/search/decimal.ts';
import { MEASURED_CHARS, asPgFloat4, similarity, typoMeasure, wordSimilarity } from '../src/metadata/search/trigram.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { mulberry32 } from './support/random.ts';

let t: TestDb;
beforeAll(async () => {
  t = await createTestDb();
});
afterAll(async () => {
  await t?.drop();
});

const rand = mulberry32(2024);
const ALPHABET = 'abcdeFGHij klmno-12#3.XYZ';
const text = (max: number) => Array.from({ length: Math.floor(rand() * max) }, () => ALPHABET[Math.floor(rand() * ALPHABET.length)]).join('');
/** Realistic pairs: a text and names or descriptions near it, misspelt, repeated or cut. */
const WORDS = ['creature', 'dragon', 'phoenix', 'bench', 'laser', 'eyes', 'robot', 'golden', 'crown'];
const phrase = () => Array.from({ length: 1 + Math.floor(rand() * 5) }, () => WORDS[Math.floor(rand() * WORDS.length)]).join(' ') + (rand() < 0.5 ? ` #${Math.floor(rand() * 5000)}` : '');
const misspell = (s: string) => (s.length < 3 ? s : s.slice(0, 1 + Math.floor(rand() * (s.length - 1))) + 'aeiou'[Math.floor(rand() * 5)] + s.slice(2 + Math.floor(rand() * (s.length - 2))));

describe('pg_trgm in the process', () => {
  it('similarity and word_similarity equal the database on 6 000 pairs (as a client reads a float4)', async () => {
    const pairs: Array<[string, string]> = [
      ['', ''],
      ['', 'abc'],
      ['abc', ''],
      ['a', 'a'],
      ['#', '###'],
      ['ab', 'ab ab ab'],
      ['creeture', 'Bench Creature #4242'],
    ];
    for (let i = 0; i < 3000; i++) pairs.push([text(12), text(40)]);
    for (let i = 0; i < 3000; i++) {
      const p = phrase();
      pairs.push([rand() < 0.5 ? misspell(p.split(' ')[0]!) : misspell(p), phrase() + (rand() < 0.3 ? ` ${p}` : '')]);
    }
    const r = await t.db.query<{ s: number; w: number }>('SELECT similarity(b, a) AS s, word_similarity(a, b) AS w FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS x(a, b, i) ORDER BY i', [
      pairs.map((p) => p[0]),
      pairs.map((p) => p[1]),
    ]);
    const wrong = pairs.flatMap(([a, b], i) => {
      const got = { s: asPgFloat4(similarity(b, a)), w: asPgFloat4(wordSimilarity(a, b)) };
      const want = { s: Number(r.rows[i]!.s), w: Number(r.rows[i]!.w) };
      return got.s === want.s && got.w === want.w ? [] : [{ a, b, got, want }];
    });
    expect(wrong).toEqual([]);
    // Not all zero: the comparison measured something.
    expect(r.rows.filter((x) => Number(x.w) > 0.5).length).toBeGreaterThan(500);
  });

  it("the typo tier's measure equals the SQL search's (greatest of three, a missing name left out), and declines text outside ASCII or too long", async () => {
    const rows: Array<{ q: string; name: string | null; description: string | null }> = [];
    for (let i = 0; i < 1500; i++) rows.push({ q: misspell(phrase()).toLowerCase(), name: rand() < 0.1 ? null : phrase().toLowerCase(), description: rand() < 0.1 ? null : phrase().toLowerCase() });
    const r = await t.db.query<{ sim: number }>(
      `SELECT greatest(similarity(x.name, x.q), word_similarity(x.q, x.name), word_similarity(x.q, coalesce(x.description, '')))::real AS sim
         FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS x(q, name, description, i) ORDER BY i`,
      [rows.map((x) => x.q), rows.map((x) => x.name), rows.map((x) => x.description)],
    );
    const wrong = rows.filter((x, i) => typoMeasure(x.q)(x.name, x.description) !== Number(r.rows[i]!.sim));
    expect(wrong).toEqual([]);
    expect(typoMeasure('drachë')('drache', null)).toBeNull();
    expect(typoMeasure('drache')('drachë #5', null)).toBeNull();
    expect(typoMeasure('drache')('drache', 'ünïcode')).toBeNull();
    // A description too long to measure without holding the event loop goes to the database.
    expect(typoMeasure('drache')('drache', 'dragon '.repeat(MEASURED_CHARS / 7 + 1))).toBeNull();
    expect(typoMeasure('drache')('drache', 'dragon '.repeat(MEASURED_CHARS / 7 - 1))).not.toBeNull();
  });
});

describe('decimal comparison', () => {
  it('orders as numeric does, past 2^53 and with exponents', async () => {
    const nums = [
      '0',
      '-0',
      '0.0',
      '3.5',
      '3.50',
      '-3.5',
      '9007199254740992',
      '9007199254740993',
      '-12345678901234567890.5',
      '1e+21',
      '1e21',
      '1.5e-7',
      '0.00000015',
      '100',
      '99.999',
      '-100',
      '123456789012345678901234567890',
      '1e-7',
    ];
    for (let i = 0; i < 200; i++) nums.push(`${rand() < 0.5 ? '-' : ''}${Math.floor(rand() * 1e6)}${rand() < 0.5 ? '.' + Math.floor(rand() * 1000) : ''}`);
    const pairs = nums.flatMap((a) => nums.filter(() => rand() < 0.2).map((b) => [a, b] as const));
    const r = await t.db.query<{ c: number }>(
      'SELECT CASE WHEN a::numeric < b::numeric THEN -1 WHEN a::numeric > b::numeric THEN 1 ELSE 0 END AS c FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS x(a, b, i) ORDER BY i',
      [pairs.map((p) => p[0]), pairs.map((p) => p[1])],
    );
    const wrong = pairs.filter(([a, b], i) => compareDecimal(parseDecimal(a)!, parseDecimal(b)!) !== Number(r.rows[i]!.c));
    expect(wrong).toEqual([]);
    expect(pairs.length).toBeGreaterThan(1000);
    expect(parseDecimal('abc')).toBeNull();
    expect(parseDecimal('1e99999')).toBeNull();
  });
});
