import type { Queryable } from '../store/db.ts';
import { appendEventsCounting, type EventBell } from './outbox.ts';

/** A balance as the indexer left it (src/indexer's BalanceChange, restated: domains meet in the wiring). */
export interface IndexedBalance {
  contract: string;
  account: string;
  tokenId: string;
  type: string;
  balance: string;
  blockNumber: number;
  blockHash: string;
}

/**
 * The indexer's hook for watchlist chains: one `balance.updated` per contract per applied step (a
 * step following the head is usually one block; a backfill chunk or a reorg's rollback is one step
 * too), on the transaction that changed the balances. `data.balances` are the balances as they now
 * are (zero for a holder that sold out), so a late or repeated delivery cannot mislead. Indexed
 * balances are the deployment's, not a project's: every subscribed endpoint on the chain gets them.
 */
export function balanceEvents(bell: EventBell) {
  return async (q: Queryable, chainId: number, changes: IndexedBalance[]) => {
    const byContract = new Map<string, IndexedBalance[]>();
    for (const c of changes) byContract.set(c.contract, [...(byContract.get(c.contract) ?? []), c]);
    const { deliveries } = await appendEventsCounting(
      q,
      [...byContract].map(([contract, rows]) => {
        const last = rows.reduce((a, b) => (b.blockNumber > a.blockNumber ? b : a));
        return {
          type: 'balance.updated' as const,
          chainId,
          projectId: null,
          subject: `balances:${chainId}:${contract}`,
          data: {
            chainId,
            contractAddress: contract,
            contractType: rows[0]!.type,
            blockNumber: last.blockNumber,
            blockHash: last.blockHash,
            balances: rows.map((r) => ({ accountAddress: r.account, tokenID: r.tokenId, balance: r.balance, blockNumber: r.blockNumber })),
          },
        };
      }),
    );
    bell.ring(deliveries > 0);
  };
}
