/**
 * pg_trgm's `similarity` and `word_similarity` for ASCII text, computed in the process so a search
 * answered from posting lists ranks its typo tier without a round trip, and ranks it exactly as the
 * SQL search does: the same words (runs of letters and digits), padding (two spaces before a word,
 * one after), trigram sets, the extent search of word_similarity, and float4 arithmetic; the value
 * is then given as PostgreSQL prints a float4 (shortest exact text), which is what the SQL search's
 * cursors hold. Outside ASCII the database's locale decides what a letter is and how it lowers, so
 * such text is measured by the database (postings-store.ts similarity). test/trigram.test.ts checks
 * both functions against PostgreSQL on thousands of strings.
 */

const ASCII = /^[\x00-\x7f]*$/;
export const isAscii = (s: string) => ASCII.test(s);

/** Letters and digits are 1-36 and the padding space 0, so a trigram is a number below 37^3. */
const SYMBOLS = 37;
const CODES = SYMBOLS ** 3;
const SYMBOL = new Int8Array(128).fill(-1);
SYMBOL[32] = 0;
for (let c = 48; c <= 57; c++) SYMBOL[c] = c - 47;
for (let c = 97; c <= 122; c++) SYMBOL[c] = c - 86;
for (let c = 65; c <= 90; c++) SYMBOL[c] = c - 54;

/** Scratch space reused by every measure (one thread): trigrams of the current text, and marks per trigram code. */
let buf = new Int32Array(256);
/** wordSimilarity's per-text arrays (trg2indexes and lastpos), reused: a typo tier measures 1 000 texts a search. */
let trg2 = new Int32Array(256);
let lastpos = new Int32Array(256);
const mark = new Int32Array(CODES);
const slot = new Int32Array(CODES);
let generation = 0;

/**
 * The trigrams of an ASCII text in order, duplicates kept (generate_trgm_only), into `buf`; returns
 * how many. Words are runs of letters and digits, lower-cased, padded with two spaces before and
 * one after.
 */
function trigrams(text: string): number {
  if (buf.length < 2 * text.length + 4) buf = new Int32Array(2 * text.length + 4);
  let n = 0;
  let a = 0;
  let b = 0;
  let inWord = false;
  for (let i = 0; i <= text.length; i++) {
    const c = i < text.length ? SYMBOL[text.charCodeAt(i)]! : -1;
    if (c > 0) {
      buf[n++] = (a * SYMBOLS + b) * SYMBOLS + c;
      a = b;
      b = c;
      inWord = true;
    } else if (inWord) {
      buf[n++] = (a * SYMBOLS + b) * SYMBOLS;
      a = 0;
      b = 0;
      inWord = false;
    }
  }
  return n;
}

/** A fresh generation of marks: mark[code] === generation means "seen in this measure". */
function nextGeneration(): number {
  if (++generation === 0x7fffffff) {
    mark.fill(0);
    generation = 1;
  }
  return generation;
}

/** CALCSML: count / (len1 + len2 - count) in float4 (a quotient of doubles rounded to float is the float quotient). */
const calc = (count: number, len1: number, len2: number) => Math.fround(count / (len1 + len2 - count));

/** One text measured against many: its trigrams are made once. */
export class TrigramQuery {
  /** q's distinct trigram codes, numbered 0.. (found[j] in calc_word_similarity). */
  private readonly index = new Map<number, number>();
  private readonly has = new Uint8Array(CODES);

  constructor(q: string) {
    const n = trigrams(q);
    for (let i = 0; i < n; i++) {
      if (!this.index.has(buf[i]!)) this.index.set(buf[i]!, this.index.size);
      this.has[buf[i]!] = 1;
    }
  }

  /** similarity(text, q): shared distinct trigrams over all distinct trigrams. */
  similarity(text: string): number {
    const n = trigrams(text);
    const g = nextGeneration();
    let distinct = 0;
    let count = 0;
    for (let i = 0; i < n; i++) {
      const t = buf[i]!;
      if (mark[t] === g) continue;
      mark[t] = g;
      distinct++;
      count += this.has[t]!;
    }
    if (this.index.size === 0 || distinct === 0) return 0;
    return calc(count, distinct, this.index.size);
  }

  /**
   * word_similarity(q, text): the greatest similarity between q's trigrams and those of a
   * contiguous extent of the text's trigrams (calc_word_similarity and iterate_word_similarity in
   * plain mode: any trigram may bound the extent).
   */
  wordSimilarity(text: string): number {
    const ulen1 = this.index.size;
    const len2 = trigrams(text);
    // Trigrams q does not have are numbered from ulen1 on: found[j] is j < ulen1.
    const g = nextGeneration();
    let next = ulen1;
    if (trg2.length < len2) trg2 = new Int32Array(2 * len2);
    for (let i = 0; i < len2; i++) {
      const t = buf[i]!;
      const j = this.index.get(t);
      if (j !== undefined) trg2[i] = j;
      else {
        if (mark[t] !== g) {
          mark[t] = g;
          slot[t] = next++;
        }
        trg2[i] = slot[t]!;
      }
    }
    if (lastpos.length < next) lastpos = new Int32Array(2 * next);
    lastpos.fill(-1, 0, next);
    let ulen2 = 0;
    let count = 0;
    let lower = -1;
    let max = 0;
    for (let i = 0; i < len2; i++) {
      const j = trg2[i]!;
      const found = j < ulen1;
      if (lower >= 0 || found) {
        if (lastpos[j]! < 0) {
          ulen2++;
          if (found) count++;
        }
        lastpos[j] = i;
      }
      if (!found) continue;
      const upper = i;
      if (lower === -1) {
        lower = i;
        ulen2 = 1;
      }
      let cur = calc(count, ulen1, ulen2);
      // Try each later lower bound of the extent for a greater similarity.
      let tmpCount = count;
      let tmpUlen2 = ulen2;
      const prevLower = lower;
      for (let tmpLower = lower; tmpLower <= upper; tmpLower++) {
        const s = calc(tmpCount, ulen1, tmpUlen2);
        if (s > cur) {
          cur = s;
          ulen2 = tmpUlen2;
          lower = tmpLower;
          count = tmpCount;
        }
        const tj = trg2[tmpLower]!;
        if (lastpos[tj] === tmpLower) {
          tmpUlen2--;
          if (tj < ulen1) tmpCount--;
        }
      }
      if (cur > max) max = cur;
      for (let tmpLower = prevLower; tmpLower < lower; tmpLower++) {
        const tj = trg2[tmpLower]!;
        if (lastpos[tj] === tmpLower) lastpos[tj] = -1;
      }
    }
    return max;
  }
}

/** similarity(a, b). */
export const similarity = (a: string, b: string) => new TrigramQuery(b).similarity(a);
/** word_similarity(q, text). */
export const wordSimilarity = (q: string, text: string) => new TrigramQuery(q).wordSimilarity(text);

/**
 * A float4 as a client reads it from PostgreSQL: its shortest decimal text that reads back as the
 * same float4, as a double (0.1f is read as 0.1, not as 0.100000001490116).
 */
export function asPgFloat4(f: number): number {
  let d = printed.get(f);
  if (d !== undefined) return d;
  d = f;
  if (f !== 0 && Number.isFinite(f)) {
    for (let p = 1; p <= 9; p++) {
      const x = Number(f.toPrecision(p));
      if (Math.fround(x) === f) {
        d = x;
        break;
      }
    }
  }
  // Measures are ratios of small counts: few distinct values, kept (bounded all the same).
  if (printed.size < 100_000) printed.set(f, d);
  return d;
}
const printed = new Map<number, number>();

/**
 * Texts measured in the process: ASCII, and short enough that word_similarity's extent search (up
 * to quadratic in the text's trigrams) cannot hold the event loop; a longer description (a stranger's
 * collection may have megabytes of them) is measured by the database, as before.
 */
export const MEASURED_CHARS = 4_000;
const local = (s: string) => s.length <= MEASURED_CHARS && isAscii(s);

/**
 * The typo tier's measure of tokens against one text (search-store.ts textTiers' `sim`); null for a
 * token whose text is not measured here (outside ASCII, or longer than MEASURED_CHARS). A
 * description many tokens share is measured once.
 */
export function typoMeasure(q: string): (name: string | null, description: string | null) => number | null {
  if (!local(q)) return () => null;
  const query = new TrigramQuery(q);
  const byDescription = new Map<string, number | null>();
  return (name, description) => {
    const d = description ?? '';
    let ds = byDescription.get(d);
    if (ds === undefined) byDescription.set(d, (ds = local(d) ? query.wordSimilarity(d) : null));
    if (ds === null || (name !== null && !local(name))) return null;
    // greatest() leaves out NULLs: a token without a name is measured by its description only.
    return asPgFloat4(name === null ? ds : Math.max(query.similarity(name), query.wordSimilarity(name), ds));
  };
}
