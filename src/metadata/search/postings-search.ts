import { formatRankCursor, parseRankCursor } from './cursor.ts';
import type { TokenFilter } from './filter.ts';
import { byTokenOrder, type PostingsView, type TextMatches } from './postings.ts';
import { TYPO_CANDIDATES, typoWords, type SearchPage } from './search-store.ts';
import { typoMeasure } from './trigram.ts';

/** What the typo tier reads from the database: the contract's near words, their tokens, and pg_trgm's similarity. */
export interface TypoReader {
  nearestWords(words: string[]): Promise<Array<{ word: string; words: string[]; tokens: number }>>;
  words(words: string[]): Promise<Array<{ word: string; tokenId: string }>>;
  similarity(q: string, candidates: Array<{ id: string; name: string | null; description: string | null }>): Promise<Map<string, number>>;
}

export interface PostingsPage {
  /** The page's token ids, in answer order. */
  ids: string[];
  more: boolean;
  cursor: string | null;
}

/**
 * A search of one contract answered from its posting lists, with the same results, order and
 * cursors as the SQL search (search-store.ts byFilter): token order without text; with text, the
 * tiers exact name, name prefix, name substring, description substring (each in token order), then
 * the typo tier ranked by pg_trgm similarity. Only the ids are found here; rows are read after.
 */
export async function searchPostings(ix: PostingsView, f: TokenFilter, page: SearchPage, typos: TypoReader): Promise<PostingsPage> {
  const hits = ix.matching(f.properties);
  const ids = ix.ids;
  const n = ids.length;
  const rank = f.text !== null && page.after != null ? parseRankCursor(page.after) : null;
  const cursorAt = page.after != null && (f.text === null || rank !== null);
  const offset = cursorAt ? 0 : page.page * page.pageSize;
  const need = offset + page.pageSize + 1;
  const found: Array<{ ord: number; tier: number; sim: number }> = [];

  if (f.text === null) {
    for (let ord = page.after != null ? ix.after(page.after) : 0; ord < n && found.length < need; ord++) {
      if (!hits || hits[ord]) found.push({ ord, tier: 0, sim: 0 });
    }
  } else {
    const q = f.text.trim().toLowerCase();
    const m = ix.textMatches(q);
    const resume = rank ? ix.after(rank.tokenId) : 0;
    const tiers: number[][] = [[], [], [], []];
    let untiered = false;
    // Plain typed-array reads: this loop visits every token of the contract.
    for (let ord = 0; ord < n; ord++) {
      if (hits !== null && hits[ord] === 0) continue;
      let tier = m.name[ord]! - 1;
      if (tier < 0) {
        const d = m.descriptionOf[ord]!;
        if (d < 0 || m.descriptionHit[d] === 0) {
          untiered = true;
          continue;
        }
        tier = 3;
      }
      if (rank && (tier < rank.tier || (tier === rank.tier && ord < resume))) continue;
      if (tiers[tier]!.length < need) tiers[tier]!.push(ord);
    }
    for (const [tier, ords] of tiers.entries()) for (const ord of ords) if (found.length < need) found.push({ ord, tier, sim: 0 });
    // The typo tier is read only when the substring tiers leave room on the page.
    const words = typoWords(q);
    if (found.length < need && words.length && untiered) {
      for (const c of await typoTier(ix, q, words, hits, m, typos)) {
        if (found.length >= need) break;
        if (rank && rank.tier === 4 && !(c.sim < rank.sim || (c.sim === rank.sim && byTokenOrder(ids[c.ord]!, rank.tokenId) > 0))) continue;
        found.push({ ord: c.ord, tier: 4, sim: c.sim });
      }
    }
  }

  const rows = found.slice(offset);
  const more = rows.length > page.pageSize;
  const shown = rows.slice(0, page.pageSize);
  const last = shown.at(-1);
  const cursor = !last ? null : f.text === null ? ids[last.ord]! : formatRankCursor({ tier: last.tier, sim: last.sim, tokenId: ids[last.ord]! });
  return { ids: shown.map((r) => ids[r.ord]!), more, cursor };
}

/**
 * The typo tier: tokens with no substring match that have, for every word of the text, one of the
 * contract's words nearest to it; the first TYPO_CANDIDATES in token order, ranked by similarity
 * (highest first, then token order).
 */
async function typoTier(ix: PostingsView, q: string, words: string[], hits: Uint8Array | null, m: TextMatches, typos: TypoReader): Promise<Array<{ ord: number; sim: number }>> {
  const unknown = words.filter((w) => !ix.nearWords.has(w));
  if (unknown.length) for (const g of await typos.nearestWords(unknown)) ix.nearWords.set(g.word, g);
  const groups = words.map((w) => ix.nearWords.get(w)!);
  // Every word of the text must have a near word in the contract, or no token has them all.
  if (!groups.length || !groups.every((g) => g.words.length)) return [];
  const all = [...new Set(groups.flatMap((g) => g.words))];
  const { missing } = ix.wordPostings(all);
  if (missing.length) ix.holdWords(await typos.words(missing), missing);
  const { held } = ix.wordPostings(all);
  const marks = groups.map((g) => {
    const m = new Uint8Array(ix.ids.length);
    for (const w of g.words) for (const ord of held.get(w) ?? []) m[ord] = 1;
    return m;
  });
  const candidates: number[] = [];
  const [walk, ...also] = marks;
  for (let ord = 0; ord < m.name.length && candidates.length < TYPO_CANDIDATES; ord++) {
    if (walk![ord] === 0 || (hits !== null && hits[ord] === 0) || m.name[ord] !== 0) continue;
    const d = m.descriptionOf[ord]!;
    if (d >= 0 && m.descriptionHit[d] === 1) continue;
    if (also.every((x) => x[ord] === 1)) candidates.push(ord);
  }
  if (!candidates.length) return [];
  const ids = ix.ids;
  // Measured here when the text is ASCII (trigram.ts, exactly as pg_trgm), else by the database.
  const sims = new Map<string, number>();
  const measure = typoMeasure(q);
  const elsewhere: Array<{ id: string; name: string | null; description: string | null }> = [];
  for (const ord of candidates) {
    const c = { id: ids[ord]!, name: ix.names[ord] ?? null, description: ix.descriptions[ord] ?? null };
    const sim = measure(c.name, c.description);
    if (sim === null) elsewhere.push(c);
    else sims.set(c.id, sim);
  }
  if (elsewhere.length) for (const [id, sim] of await typos.similarity(q, elsewhere)) sims.set(id, sim);
  return candidates.map((ord) => ({ ord, sim: sims.get(ids[ord]!) ?? 0 })).sort((a, b) => b.sim - a.sim || a.ord - b.ord);
}
