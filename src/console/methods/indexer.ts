import { NoArgs } from '../../http/services/common.ts';
import { method, type MethodDef } from '../../http/webrpc.ts';
import { backfillStore } from '../../indexer/index.ts';
import type { ConsoleDeps } from '../deps.ts';

/** The indexed chains (cursor, head, malformed logs) and the backfill tasks with their progress. */
export function indexerMethods({ s }: ConsoleDeps): Record<string, MethodDef<any>> {
  return {
    IndexerStatus: method({
      input: NoArgs,
      handler: async () => ({
        chains: await Promise.all(
          [...s.indexers.values()].map(async (ix) => {
            const [cursor, head] = await Promise.all([ix.cursor(), ix.chain.public.getBlockNumber().catch(() => null)]);
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
      }),
    }),
  };
}
