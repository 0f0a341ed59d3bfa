import type { Address } from 'viem';
import { z } from 'zod';
import { contractToWire } from '../../metadata/contracts/contract-view.ts';
import { parseRankCursor } from '../../metadata/search/cursor.ts';
import { SEARCH_LIMITS as L, type TokenFilter } from '../../metadata/search/filter.ts';
import type { IndexState } from '../../metadata/search/token-search.ts';
import type { PropertyStat } from '../../metadata/search/search-store.ts';
import type { TokenSummary } from '../../metadata/tokens/token-store.ts';
import { storedStatus, toWire } from '../../metadata/tokens/token-view.ts';
import type { Services } from '../../services.ts';
import { metadataErrorMap as E } from '../core/errors.ts';
import { method, type MethodDef, type RpcContext } from '../core/webrpc.ts';
import { AddressArg, ChainArg, chainFor, chainIdsFor, type ChainArgDeps, type ChainIdDeps } from '../core/args.ts';
import { nextPage, pageSizeUpTo } from '../core/page.ts';
import { fetchCallerOf, type TokenReadDeps } from './token-reads.ts';

/** What the token search methods use: the search index, the contract service and store, token reads, and the chain arguments' lookup. */
export type TokenSearchDeps = ChainArgDeps & ChainIdDeps & TokenReadDeps & Pick<Services, 'tokenSearch' | 'contracts' | 'contractStore'>;

const refuseBefore = z
  .unknown()
  .refine(() => false, 'cursor paging backwards (before) is not supported: page forwards with after, or use page numbers')
  .optional();

/**
 * The metadata Page: numbered from 0, or a cursor. `after` with `column: "tokenId"` (the default)
 * is the last token id of the previous page: the next page starts right after it, so a deep page
 * reads from the index instead of skipping `page × pageSize` rows. A search with text pages by
 * rank: `column: "rank"` and `after: "tier:similarity:tokenId"`, as the previous answer gave it.
 * Every answer of a search by filter carries the cursor of its next page. `more` is accepted (a
 * previous answer passed back) and ignored.
 */
const SearchPageArg = z
  .strictObject({
    page: z.number().int().min(0).optional(),
    pageSize: pageSizeUpTo(L.maxPageSize).optional(),
    more: z.boolean().optional(),
    column: z.enum(['tokenId', 'rank'], 'column: only "tokenId" (or "rank", with text) can be paged by cursor').optional(),
    before: refuseBefore,
    after: z
      .union([z.string(), z.number().int().min(0)])
      .transform((v) => String(v).trim())
      .optional(),
  })
  .optional()
  .transform((p) => ({ page: p?.page ?? 0, pageSize: p?.pageSize ?? L.defaultPageSize, after: p?.after ?? null, column: p?.column ?? 'tokenId' }))
  .refine((p) => p.column !== 'tokenId' || p.after === null || /^(0|[1-9]\d{0,77})$/.test(p.after), { message: 'after: a token id (decimal) from the previous page', path: ['after'] })
  .refine((p) => p.column !== 'rank' || p.after === null || parseRankCursor(p.after) !== null, { message: 'after: a rank cursor (tier:similarity:tokenId) from the previous page', path: ['after'] })
  .refine((p) => p.after !== null || p.page * p.pageSize <= L.maxOffset, `page × pageSize may not pass ${L.maxOffset}: narrow the filter, or page with after`);

const Scalar = z.union([z.string().max(L.maxValueLength, `values are at most ${L.maxValueLength} characters`), z.number().finite(), z.boolean()]);

const PropertyFilterArg = z
  .strictObject({
    name: z.string().trim().min(1, 'name must not be empty').max(L.maxNameLength, `name: at most ${L.maxNameLength} characters`),
    type: z.enum(['INT', 'STRING', 'ARRAY', 'GENERIC']).optional(),
    min: z.number().finite().optional(),
    max: z.number().finite().optional(),
    values: z.array(Scalar).max(L.maxValuesPerProperty, `at most ${L.maxValuesPerProperty} values per property`).optional(),
  })
  .refine((f) => f.min === undefined || f.max === undefined || f.min <= f.max, 'min is greater than max')
  .refine((f) => f.type !== 'STRING' || (f.min === undefined && f.max === undefined), 'min/max apply to numbers, not to a STRING property');

const FilterArg = z
  .strictObject({
    text: z.string().max(L.maxTextLength, `text: at most ${L.maxTextLength} characters`).optional(),
    properties: z.array(PropertyFilterArg).max(L.maxProperties, `at most ${L.maxProperties} properties per filter`).optional(),
  })
  .optional()
  .transform(
    (f): TokenFilter => ({
      text: f?.text?.trim() ? f.text.trim() : null,
      properties: (f?.properties ?? []).map((p) => ({ name: p.name, values: p.values ?? null, min: p.min ?? null, max: p.max ?? null })),
    }),
  );

const SearchByFilterArgs = z
  .strictObject({ chainID: ChainArg, contractAddress: AddressArg, filter: FilterArg, page: SearchPageArg })
  .refine((a) => a.page.after === null || (a.filter.text === null) === (a.page.column === 'tokenId'), {
    message: 'after: a search with text pages by rank (column "rank", the cursor its previous answer gave), one without by token id (column "tokenId")',
    path: ['page', 'after'],
  });

const Query = z.string().trim().min(1, 'q must not be empty').max(L.maxTextLength, `q: at most ${L.maxTextLength} characters`);
/** Across contracts, text shorter than a trigram could only be matched by reading every token. */
const MIN_OPEN_QUERY = 3;
const openQueryMessage = `q: at least ${MIN_OPEN_QUERY} characters unless contractAddress is given`;
const SearchByQueryArgs = z
  .strictObject({ q: Query, chainID: ChainArg.optional(), contractAddress: AddressArg.optional(), page: SearchPageArg })
  .refine((a) => a.page.after === null, { message: 'after: cursor paging applies to searches by filter (SearchTokenMetadata); across contracts, page by number', path: ['page', 'after'] })
  .refine((a) => a.contractAddress !== undefined || a.q.length >= MIN_OPEN_QUERY, { message: openQueryMessage, path: ['q'] });

const ExcludeList = z.array(z.string().max(L.maxNameLength)).max(L.maxExcludes, `at most ${L.maxExcludes} excludeProperties`);
const PropertyFiltersArgs = z.strictObject({
  chainID: ChainArg,
  contractAddress: AddressArg,
  excludeProperties: ExcludeList.optional(),
  excludePropertyValues: z.boolean().optional(),
});

const ContractTypes = z.enum(['UNKNOWN', 'ERC20', 'ERC721', 'ERC1155', 'ERC6909', 'MISC']);
const SearchMetadataArgs = z
  .strictObject({
    filter: Query,
    chainID: ChainArg.optional(),
    types: z.array(ContractTypes).max(10).optional(),
    excludeTokenMetadata: z.boolean().optional(),
  })
  .refine((a) => a.excludeTokenMetadata || a.filter.length >= MIN_OPEN_QUERY, {
    message: `filter: at least ${MIN_OPEN_QUERY} characters unless excludeTokenMetadata is set`,
    path: ['filter'],
  });

const projectOf = (ctx: RpcContext) => ctx.project?.id ?? null;
/** The next page of a search by filter, with the cursor that starts it after this page's last token (by rank with text). */
const nextPageAfter = (p: { page: number; pageSize: number }, more: boolean, text: boolean, cursor: string | null) => ({
  ...nextPage(p, more),
  ...(cursor !== null ? { column: text ? 'rank' : 'tokenId', after: cursor } : {}),
});

/** metarelay's extension fields: whether the contract's index is complete, and the task filling it. */
const indexFields = (i: IndexState) => ({ indexComplete: i.complete, ...(i.taskId !== null ? { taskID: i.taskId } : {}) });

function filterToWire(st: PropertyStat, withValues: boolean) {
  return {
    name: st.name,
    type: st.type,
    min: st.min,
    max: st.max,
    ...(withValues ? { values: st.values.map((v) => v.value), valueCounts: st.values } : {}),
    tokens: st.tokens,
    distinctValues: st.distinctValues,
  };
}

/** Token search and property filters (facets), with the deprecated names older SDKs call. */
export function tokenSearchMethods(s: TokenSearchDeps): Record<string, MethodDef<any>> {
  /**
   * Each token with its real status (a stale one is REFRESHING, as GetTokenMetadata says); the stale
   * ones are re-read in the background, as a GetTokenMetadata of them would: in the caller's share,
   * charged as its reads are (a keyless caller per token re-read; token-reads.ts).
   */
  const tokensWire = (rows: TokenSummary[], ctx: RpcContext) => {
    const now = Date.now();
    const stale = new Map<string, { chainId: number; contract: string; ids: string[] }>();
    const out = rows.map((r) => {
      const status = storedStatus(r, s.config.metadata.staleAfterSec, now);
      if (status === 'REFRESHING') {
        const k = `${r.chainId}:${r.contract}`;
        const g = stale.get(k) ?? { chainId: r.chainId, contract: r.contract, ids: [] };
        g.ids.push(r.tokenId);
        stale.set(k, g);
      }
      return toWire(r.chainId, r.contract, r.tokenId, r, status, null);
    });
    for (const g of stale.values()) {
      const chain = s.chains.get(g.chainId);
      if (chain) void s.tokens.getTokens(chain, g.contract as Address, g.ids, { waitMs: 0, caller: fetchCallerOf(s, ctx.keyId, ctx.request.ip) }).catch(() => undefined);
    }
    return out;
  };
  /** Chains a cross-chain search looks at: the one named, else those the caller's project may see. */
  const chainScope = (chainID: string | undefined, ctx: RpcContext) => (chainID ? chainIdsFor(s, [chainID], E) : (ctx.project?.allowedChainIds ?? null));

  const byFilter = method({
    input: SearchByFilterArgs,
    handler: async (a, ctx) => {
      const r = await s.tokenSearch.search(chainFor(s, a.chainID, E), a.contractAddress, a.filter, a.page, projectOf(ctx));
      const page = nextPageAfter(a.page, r.more, a.filter.text !== null, r.cursor);
      return { page, tokenMetadata: tokensWire(r.tokens, ctx), ...indexFields(r.index) };
    },
  });
  const ids = (key: 'tokenIDs' | 'tokenIds') =>
    method({
      input: SearchByFilterArgs,
      handler: async (a, ctx) => {
        const r = await s.tokenSearch.searchIds(chainFor(s, a.chainID, E), a.contractAddress, a.filter, a.page, projectOf(ctx));
        const page = nextPageAfter(a.page, r.more, a.filter.text !== null, r.cursor);
        return { page, [key]: r.tokenIds, ...indexFields(r.index) };
      },
    });
  const byQuery = method({
    input: SearchByQueryArgs,
    handler: async (a, ctx) => {
      const r = await s.tokenSearch.byQuery(a.q, chainScope(a.chainID, ctx), (a.contractAddress ?? null) as Address | null, a.page);
      return { tokenMetadata: tokensWire(r.rows, ctx), nextPage: nextPage(a.page, r.more) };
    },
  });
  const filters = (exclude: string[], withValues: boolean, chainID: string, contract: Address, ctx: RpcContext) =>
    s.tokenSearch.propertyFilters(chainFor(s, chainID, E), contract, exclude, projectOf(ctx)).then((r) => ({
      filters: r.stats.map((st) => filterToWire(st, withValues)),
      ...indexFields(r.index),
    }));

  return {
    SearchTokenMetadata: byFilter,
    SearchTokenMetadataTokenIDs: ids('tokenIDs'),
    SearchTokenMetadataByQuery: byQuery,
    GetTokenMetadataPropertyFilters: method({
      input: PropertyFiltersArgs,
      handler: (a, ctx) => filters(a.excludeProperties ?? [], !a.excludePropertyValues, a.chainID, a.contractAddress, ctx),
    }),
    // Deprecated names still in the schema, which older SDKs call.
    SearchTokens: byQuery,
    SearchTokenIDs: ids('tokenIds'),
    TokenCollectionFilters: method({
      input: z.strictObject({ chainID: ChainArg, contractAddress: AddressArg }),
      handler: (a, ctx) => filters([], true, a.chainID, a.contractAddress, ctx),
    }),
    SearchMetadata: method({
      input: SearchMetadataArgs,
      handler: async (a, ctx) => {
        const chainIds = chainScope(a.chainID, ctx);
        const page = { page: 0, pageSize: 20, after: null };
        const wantTokens = !a.excludeTokenMetadata && (!a.types || a.types.some((t) => t === 'ERC721' || t === 'ERC1155'));
        const [contracts, tokens] = await Promise.all([
          s.contractStore.search({ q: a.filter, chainIds, types: a.types ?? null, ...page }),
          wantTokens ? s.tokenSearch.byQuery(a.filter, chainIds, null, page) : { rows: [] },
        ]);
        return {
          tokenMetadata: tokensWire(tokens.rows, ctx),
          contractInfo: contracts.rows.map((r) => contractToWire(r.chain_id, r.address, r, 'AVAILABLE', null, s.contracts.mediaUrl)),
        };
      },
    }),
  };
}
