import type { TokenSummary } from '../tokens/token-store.ts';
import type { TokenFilter } from './filter.ts';
import type { PostingsCache } from './postings-cache.ts';
import { searchPostings, type TypoReader } from './postings-search.ts';
import type { SearchPage, SearchStore } from './search-store.ts';

/**
 * Finds a page of one contract's tokens matching a filter: from the contract's posting lists when
 * this process holds them (or loads them now), else in SQL; the same answer either way.
 */
export class TokenFinder {
  constructor(
    private readonly store: SearchStore,
    private readonly postings: PostingsCache,
  ) {}

  async find(chainId: number, contract: string, filter: TokenFilter, page: SearchPage, idsOnly: boolean): Promise<{ rows: TokenSummary[] | string[]; more: boolean; cursor: string | null }> {
    const view = await this.postings.view(chainId, contract);
    if (!view) return this.store.byFilter(chainId, contract, filter, page, idsOnly);
    const r = await searchPostings(view, filter, page, this.typoReader(chainId, contract));
    return { rows: idsOnly ? r.ids : await this.postings.store.rows(chainId, contract, r.ids), more: r.more, cursor: r.cursor };
  }

  private typoReader(chainId: number, contract: string): TypoReader {
    return {
      nearestWords: (words) => this.store.nearestWords(chainId, contract, words),
      words: (words) => this.postings.store.words(chainId, contract, words),
      similarity: (q, candidates) => this.postings.store.similarity(q, candidates),
    };
  }
}
