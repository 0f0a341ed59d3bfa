import { z } from 'zod';
import { DeploymentBlockError } from '../../chain/deployment-block.ts';
import { AddressArg, MetadataErrors, type MethodDef, NoArgs, RpcError, metadataErrorMap, method } from '../../http/index.ts';
import type { Address } from 'viem';
import { PageArgs, ProjectId, chainIdArg, idCursor, type ConsoleArgDeps } from '../args.ts';
import { backfillStore, watchContract } from '../../indexer/index.ts';
import { listUnreadBlocks } from '../../chain/unread-blocks.ts';
import type { ConsoleDeps } from '../deps.ts';
import type { Services } from '../../services.ts';

/** What the indexer methods use: the chains' indexers and backfills, the contracts, the projects, the config and the database. */
export type IndexerServices = ConsoleArgDeps & Pick<Services, 'config' | 'contracts' | 'db' | 'indexerBackfills' | 'indexers' | 'projects'>;

/**
 * The indexed chains (cursor, head, malformed logs), the backfill tasks with their progress, and the
 * blocks the indexer or the metadata watcher passed over for their logs being unreadable.
 */
export function indexerMethods({ s }: ConsoleDeps<IndexerServices>): Record<string, MethodDef<any>> {
  return {
    IndexerStatus: method({
      input: NoArgs,
      handler: async () => ({
        chains: await Promise.all(
          [...s.indexers.values()].map(async (ix) => {
            const [cursor, head] = await Promise.all([ix.cursor(), ix.chain.head.number().catch(() => null)]);
            return {
              chainId: ix.chain.chainId,
              network: ix.chain.name,
              scope: ix.scope,
              cursor: cursor ? Number(cursor.block) : null,
              head: head === null ? null : Number(head),
              malformed: cursor?.malformed ?? 0,
              watchlist: ix.scope === 'watchlist' ? await ix.watchlist.list() : [],
            };
          }),
        ),
        backfills: await backfillStore(s.db).list(),
        unreadBlocks: await listUnreadBlocks(s.db),
      }),
    }),
    /**
     * An account's balances as the index holds them (the database, not the node), a page at a time,
     * each with its contract's name, symbol, decimals and logo source: the page shows an ERC-20's logo
     * (ContractLogo) and a collectible's picture (TokenPictures) beside it.
     */
    IndexerBalances: method({
      input: z.object({ chainID: z.string().min(1), accountAddress: AddressArg, ...PageArgs }),
      handler: async (a) => {
        const ix = s.indexers.get(chainIdArg(s, a.chainID));
        if (!ix) throw new RpcError(MetadataErrors.ChainNotFound, `chain ${a.chainID} is not indexed`);
        const size = a.pageSize ?? 25;
        const offset = idCursor(a.cursor) ?? 0;
        const rows = await ix.reads.balances({ accounts: [a.accountAddress], offset, limit: size + 1 });
        const page = rows.slice(0, size);
        const infos = page.length ? (await s.contracts.get(ix.chain, [...new Set(page.map((r) => r.contract))] as Address[], { eager: true })).infos : new Map();
        return {
          network: ix.chain.name,
          balances: page.map((r) => {
            const info = infos.get(r.contract);
            return {
              contractAddress: r.contract,
              contractType: r.type,
              tokenID: r.tokenId,
              balance: r.balance,
              name: info?.name ?? '',
              symbol: info?.symbol ?? '',
              decimals: info?.decimals ?? null,
              logoURI: info?.logoURI ?? '',
            };
          }),
          nextCursor: rows.length > size ? String(offset + size) : null,
        };
      },
    }),
    /**
     * Registers a contract on a watchlist chain, for a project: it is indexed from the next block on,
     * and a backfill (worked in the background) reads its history from its deployment block, or `fromBlock`.
     */
    IndexerWatch: method({
      input: z.object({
        chainID: z.string().min(1),
        contractAddress: AddressArg,
        projectId: ProjectId.optional(),
        fromBlock: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
      }),
      handler: async (a) => {
        const ix = s.indexers.get(chainIdArg(s, a.chainID));
        if (!ix) throw new RpcError(MetadataErrors.ChainNotFound, `chain ${a.chainID} is not indexed`);
        if (ix.scope !== 'watchlist') throw new RpcError(MetadataErrors.InvalidArgument, `chain ${ix.chain.name} indexes every contract: it has no watchlist`);
        if (a.projectId !== undefined && !(await s.projects.getById(a.projectId))) throw new RpcError(MetadataErrors.NotFound, `no project ${a.projectId}`);
        const out = await watchContract(ix, a.contractAddress, {
          projectId: a.projectId ?? null,
          fromBlock: a.fromBlock !== undefined ? BigInt(a.fromBlock) : undefined,
          rangeBlocks: s.config.indexer.backfillRangeBlocks,
        }).catch((err) => {
          // The node could not say where the contract starts (behind, rate-limited): transient, and nothing was added.
          if (err instanceof DeploymentBlockError) throw new RpcError(metadataErrorMap.chainUnavailable, err.message, { 'Retry-After': '5' });
          throw err;
        });
        if (out.backfill) s.indexerBackfills?.wake();
        return { watchlist: await ix.watchlist.list(), added: out.added, backfill: out.backfill, ...(out.note ? { note: out.note } : {}) };
      },
    }),
  };
}
