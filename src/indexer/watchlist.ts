import type { Db } from '../store/db.ts';

export type IndexScope = 'all' | 'watchlist';

/** The contracts a 'watchlist' chain indexes: those of the config and those projects registered. */
export function watchlist(db: Db, chainId: number, fromConfig: readonly string[]) {
  const configured = fromConfig.map((a) => a.toLowerCase());
  return {
    async list(): Promise<string[]> {
      const res = await db.query<{ contract: string }>('SELECT contract FROM indexer_watchlist WHERE chain_id = $1', [chainId]);
      return [...new Set([...configured, ...res.rows.map((r) => r.contract)])].sort();
    },
    async add(contract: string, projectId: number | null): Promise<void> {
      await db.query('INSERT INTO indexer_watchlist (chain_id, contract, project_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [chainId, contract.toLowerCase(), projectId]);
    },
  };
}

/** The address filter of a scope's log reads: undefined reads every contract. */
export function addressFilter(db: Db, chainId: number, scope: IndexScope, fromConfig: readonly string[]): (() => Promise<string[]>) | undefined {
  if (scope === 'all') return undefined;
  const w = watchlist(db, chainId, fromConfig);
  return () => w.list();
}
