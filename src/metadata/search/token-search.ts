import type { Address } from 'viem';
import type { ChainClient } from '../../chain/client.ts';
import type { Logger } from '../../telemetry/logger.ts';
import { RefreshLimitError, type RefreshService } from '../refresh/refresh.ts';
import type { TokenRecord, TokenSummary } from '../tokens/token-store.ts';
import { SEARCH_LIMITS, type TokenFilter } from './filter.ts';
import { TokenFinder } from './finder.ts';
import type { PostingsCache } from './postings-cache.ts';
import type { PropertyStat, SearchPage, SearchStore } from './search-store.ts';

export interface TokenSearchDeps {
  store: SearchStore;
  /** Posting lists held in memory (searched when held). */
  postings: PostingsCache;
  refresh: RefreshService;
  log: Logger;
  /** Called when a refresh task was queued, so a worker of this process picks it up at once. */
  onEnqueued?: () => void;
}

/** How complete the index of a contract is, as a search answer tells it. */
export interface IndexState {
  /** The contract's tokens were listed and read by a finished refreshAll. */
  complete: boolean;
  /** The caller's refresh task listing the contract, started or joined by this search. */
  taskId: number | null;
}

/**
 * Token search over what the service has resolved: trait filters and free text on one contract,
 * free text across chains, and the property filters (facets) of a contract. A contract never
 * enumerated answers what is indexed so far and gets a refreshAll in the background.
 */
export class TokenSearchService {
  private readonly finder: TokenFinder;

  constructor(private readonly d: TokenSearchDeps) {
    this.finder = new TokenFinder(d.store, d.postings);
  }

  /** `cursor` starts the next page (SearchPage.after): a token id, or a rank cursor when there is text. */
  async search(
    chain: ChainClient,
    contract: Address,
    filter: TokenFilter,
    page: SearchPage,
    projectId: number | null,
  ): Promise<{ tokens: TokenSummary[]; more: boolean; cursor: string | null; index: IndexState }> {
    const [r, index] = await Promise.all([this.finder.find(chain.chainId, contract, filter, page, false), this.ensureEnumerated(chain, contract, projectId)]);
    return { tokens: r.rows as TokenSummary[], more: r.more, cursor: r.cursor, index };
  }

  async searchIds(
    chain: ChainClient,
    contract: Address,
    filter: TokenFilter,
    page: SearchPage,
    projectId: number | null,
  ): Promise<{ tokenIds: string[]; more: boolean; cursor: string | null; index: IndexState }> {
    const [r, index] = await Promise.all([this.finder.find(chain.chainId, contract, filter, page, true), this.ensureEnumerated(chain, contract, projectId)]);
    return { tokenIds: r.rows as string[], more: r.more, cursor: r.cursor, index };
  }

  byQuery(q: string, chainIds: number[] | null, contract: Address | null, page: SearchPage): Promise<{ rows: TokenRecord[]; more: boolean }> {
    return this.d.store.byQuery(q, chainIds, contract, page);
  }

  async propertyFilters(chain: ChainClient, contract: Address, exclude: string[], projectId: number | null): Promise<{ stats: PropertyStat[]; index: IndexState }> {
    const [stats, index] = await Promise.all([
      this.d.store.propertyStats(chain.chainId, contract, exclude, SEARCH_LIMITS.filterValues, SEARCH_LIMITS.filterProperties),
      this.ensureEnumerated(chain, contract, projectId),
    ]);
    return { stats, index };
  }

  /** Starts (or joins) a refreshAll of a contract whose tokens were never listed; ERC20s have none to list. */
  private async ensureEnumerated(chain: ChainClient, contract: Address, projectId: number | null): Promise<IndexState> {
    const st = await this.d.store.enumeration(chain.chainId, contract, projectId);
    if (st.done) return { complete: true, taskId: null };
    if (st.ownTask !== null || st.running || st.contractType === 'ERC20') return { complete: false, taskId: st.ownTask };
    try {
      const r = await this.d.refresh.enqueueAllTokens(projectId, chain, contract, { source: 'search' });
      this.d.onEnqueued?.();
      return { complete: false, taskId: r.taskId };
    } catch (err) {
      // A project whose refresh quota is full still gets its answer, only without a new task.
      if (!(err instanceof RefreshLimitError)) throw err;
      this.d.log.info({ chain: chain.name, contract, projectId }, `token search: enumeration not started: ${err.message}`);
      return { complete: false, taskId: null };
    }
  }
}
