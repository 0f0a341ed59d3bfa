import { z } from 'zod';
import { IndexerErrors, RpcError } from '../core/errors.ts';
import { eventTopic } from '../../indexer/index.ts';
import { AddressArg, TokenIdArg } from '../core/args.ts';
import { pageSizeUpTo } from '../core/page.ts';

/** A block number: a JSON number that fits a SQL bigint exactly. */
export const BlockNumber = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
/** The most rows a request may skip to: pages beyond it are refused, not sent to the database. */
const MAX_OFFSET = 100_000_000;
const Ids = z.array(TokenIdArg).max(1000, 'at most 1000 token ids');
/** A meta-transaction id as the relayer hands it out: 64 hex digits, 0x optional, stored bare. */
const MetaTxnIdArg = z
  .string()
  .trim()
  .regex(/^(0x)?[0-9a-fA-F]{64}$/, 'must be a 32-byte meta-transaction id (64 hex digits, 0x optional)')
  .transform((id) => id.replace(/^0x/i, '').toLowerCase());

// The Indexer service's request schemas and the rules for fields metarelay refuses rather than ignores.

/** Page sizes: the default, and the most one page may hold. */
export const INDEXER_PAGE = { default: 50, max: 1000 } as const;
/** GetTokenSuppliesMap: contracts per call and ids per contract. */
export const MAP_LIMITS = { contracts: 50, ids: 100, prices: 100 } as const;

export const bad = (msg: string) => new RpcError(IndexerErrors.InvalidArgument, msg);

/**
 * The Sequence Page. Numbered from 0; `after` is the cursor an answer hands out for the page that
 * follows (clients may send the answer's page back as is). Sorting is fixed (documented per method):
 * a `sort`, `column` or `before` is refused rather than ignored.
 */
export const PageArg = z
  .object({
    page: z.number().int().min(0).max(MAX_OFFSET).optional(),
    pageSize: pageSizeUpTo(INDEXER_PAGE.max).optional(),
    after: z.union([z.string().regex(/^\d{1,9}$/, 'must be the cursor an earlier answer gave'), z.number().int().min(0).max(MAX_OFFSET)]).optional(),
    before: z.unknown().optional(),
    column: z.string().optional(),
    sort: z.array(z.unknown()).optional(),
    more: z.boolean().optional(),
  })
  .loose()
  .optional();

export function paging(p: z.infer<typeof PageArg>) {
  if (p?.before !== undefined && p.before !== '') throw bad('page.before is not supported: pages go forward with page.after');
  if (p?.sort?.length) throw bad('page.sort is not supported: the order is fixed (see docs/indexer.md)');
  if (p?.column) throw bad('page.column is not supported: the order is fixed (see docs/indexer.md)');
  const pageSize = p?.pageSize ?? INDEXER_PAGE.default;
  const offset = p?.after !== undefined ? Number(p.after) : (p?.page ?? 0) * pageSize;
  if (offset > MAX_OFFSET) throw bad(`page: at most ${MAX_OFFSET} rows can be skipped`);
  const page = Math.floor(offset / pageSize);
  return {
    offset,
    limit: pageSize + 1,
    cut<T>(rows: T[]) {
      const more = rows.length > pageSize;
      return {
        rows: rows.slice(0, pageSize),
        page: { page, pageSize, more, ...(more ? { after: String(offset + pageSize) } : {}) },
      };
    },
  };
}

export const MetadataOptions = z
  .object({
    verifiedOnly: z.boolean().optional(),
    unverifiedOnly: z.boolean().optional(),
    includeContracts: z.array(AddressArg).max(100, 'at most 100 contracts').optional(),
  })
  .loose()
  .optional();

export const ContractStatus = z.enum(['VERIFIED', 'UNVERIFIED', 'ALL']).optional();

/**
 * Which contracts an answer keeps, by the token directory's word (verified = listed there):
 * null keeps every contract (metarelay's default, where Sequence's is verified only: a deployment
 * whose directory is empty would otherwise answer nothing). `always` are kept whatever their grade
 * (metadataOptions.includeContracts).
 */
export type Grade = { only: 'VERIFIED' | 'UNVERIFIED'; always: string[] } | null;

export function gradeOf(status: z.infer<typeof ContractStatus>, o: z.infer<typeof MetadataOptions>): Grade {
  if (o?.verifiedOnly && o?.unverifiedOnly) throw bad('metadataOptions: verifiedOnly and unverifiedOnly exclude each other');
  const only = o?.verifiedOnly ? 'VERIFIED' : o?.unverifiedOnly ? 'UNVERIFIED' : status && status !== 'ALL' ? status : null;
  return only ? { only, always: o?.includeContracts ?? [] } : null;
}

/** The contract filters of a query narrowed to a grade, given the chain's verified contracts. */
export function narrowToGrade<Q extends { contracts?: string[]; excludeContracts?: string[] }>(q: Q, grade: Grade, verified: readonly string[]): Q {
  if (!grade) return q;
  const listed = new Set(verified);
  const always = new Set(grade.always);
  if (grade.only === 'VERIFIED') {
    const keep = (c: string) => listed.has(c) || always.has(c);
    // An empty list is kept as it is: it matches nothing (no verified contract), it does not lift the filter.
    return { ...q, contracts: q.contracts ? q.contracts.filter(keep) : [...new Set([...listed, ...always])] };
  }
  return { ...q, excludeContracts: [...(q.excludeContracts ?? []), ...[...listed].filter((c) => !always.has(c))] };
}

export const ContractTypes = z.array(z.enum(['ERC20', 'ERC721', 'ERC1155'], { message: 'contract types indexed are ERC20, ERC721 and ERC1155' }));

export const GetTokenBalancesArgs = z.object({
  accountAddress: AddressArg.optional(),
  contractAddress: AddressArg.optional(),
  tokenID: TokenIdArg.optional(),
  includeMetadata: z.boolean().optional(),
  metadataOptions: MetadataOptions,
  includeCollectionTokens: z.boolean().optional(),
  page: PageArg,
});

export const TokenBalancesFilter = z.object({
  accountAddresses: z.array(AddressArg).min(1, 'at least one account').max(50, 'at most 50 accounts'),
  contractStatus: ContractStatus,
  contractTypes: ContractTypes.optional(),
  contractWhitelist: z.array(AddressArg).max(100, 'at most 100 contracts').optional(),
  contractBlacklist: z.array(AddressArg).max(100, 'at most 100 contracts').optional(),
  omitNativeBalances: z.boolean().optional(),
  omitPrices: z.boolean().optional(),
  tokenIDs: Ids.optional(),
});
export const TokenBalancesFilterArgs = z.object({ filter: TokenBalancesFilter, omitMetadata: z.boolean().optional(), page: PageArg });

export const ByContractArgs = z.object({
  filter: z.object({
    contractAddresses: z.array(AddressArg).min(1, 'at least one contract').max(50, 'at most 50 contracts'),
    accountAddresses: z.array(AddressArg).max(50, 'at most 50 accounts').optional(),
    contractStatus: ContractStatus,
    tokenIDs: Ids.optional(),
  }),
  omitMetadata: z.boolean().optional(),
  page: PageArg,
});

export const TxHash = z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'not a 32-byte transaction hash');

export const HistoryArgs = z.object({
  filter: z.object({
    accountAddress: AddressArg.optional(),
    contractAddress: AddressArg.optional(),
    accountAddresses: z.array(AddressArg).max(50).optional(),
    contractAddresses: z.array(AddressArg).max(50).optional(),
    transactionHashes: z
      .array(
        z
          .string()
          .regex(/^0x[0-9a-fA-F]{64}$/, 'not a 32-byte transaction hash')
          .transform((h) => h.toLowerCase()),
      )
      .max(100)
      .optional(),
    metaTransactionIDs: z.array(MetaTxnIdArg).max(100, 'at most 100 meta-transaction ids').optional(),
    fromBlock: BlockNumber.optional(),
    toBlock: BlockNumber.optional(),
    tokenID: TokenIdArg.optional(),
    omitPrices: z.boolean().optional(),
  }),
  page: PageArg,
  includeMetadata: z.boolean().optional(),
  metadataOptions: MetadataOptions,
});

/** FetchTransactionReceipt waits at most this long for a transaction to be mined, whatever maxBlockWait says. */
export const MAX_RECEIPT_WAIT_MS = 30_000;

export const AccountArgs = z.object({ accountAddress: AddressArg.optional(), omitPrices: z.boolean().optional() });

/** FetchTransactionReceiptWithFilter's TransactionFilter: at least one field; `event` a topic or an event signature. */
export const ReceiptFilterArg = z
  .object({
    txnHash: TxHash.transform((h) => h.toLowerCase() as `0x${string}`).optional(),
    from: AddressArg.optional(),
    to: AddressArg.optional(),
    contractAddress: AddressArg.optional(),
    event: z
      .string()
      .max(500)
      .transform((e, ctx) => {
        const topic = eventTopic(e);
        if (!topic) ctx.addIssue({ code: 'custom', message: 'must be a 32-byte topic (0x…) or an event signature such as Transfer(address,address,uint256)' });
        return topic ?? z.NEVER;
      })
      .optional(),
  })
  .refine((f) => Object.values(f).some((v) => v !== undefined), 'filter: set at least one of txnHash, from, to, contractAddress, event');

export const BalanceUpdatesArgs = z.object({
  contractAddress: AddressArg,
  lastBlockNumber: BlockNumber,
  lastBlockHash: z
    .string()
    .regex(/^0x[0-9a-fA-F]{64}$/, 'not a 32-byte block hash')
    .transform((h) => h.toLowerCase())
    .optional(),
  page: PageArg,
});

/** The Sequence TokenPriceQuery: a contract (0x000…0 for the native token) and an optional token id (prices are per contract). */
export const PriceQueryArg = z.object({ contractAddress: AddressArg, tokenID: TokenIdArg.optional() });
