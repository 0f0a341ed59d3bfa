// Project balances (gas tanks): the ledger, intake's holds, the debits of mined meta-transactions.
import type { ChainClient } from '../../chain/client.ts';
import type { ChainConfig } from '../../config/schema.ts';
import type { Db } from '../../store/db.ts';
import { balanceDebits } from './debits.ts';
import { balanceHolds } from './holds.ts';
import { tankRepo } from './tanks.ts';
import { UsdRate } from './usd.ts';

export { AmountError, MarkupFactor, NativeAmount, fromWei, parseFactor, toWei, usdOf } from './amounts.ts';
export { AdjustmentConflict, TankRefused, type LedgerEntry, type LedgerFilter, type Tank, type TankRepo } from './tanks.ts';
export { holdAmount, type BalanceHolds } from './holds.ts';
export { adjustmentWire, gasTankWire, ledgerWire } from './wire.ts';

/** Everything about project balances the wiring hands out: one per service, over every relayed chain. */
export function projectBalances(db: Db, chains: ReadonlyMap<number, ChainClient>, configs: readonly ChainConfig[]) {
  const usd = new Map<number, UsdRate>();
  for (const c of configs) if (c.relayer && chains.get(c.chainId)) usd.set(c.chainId, new UsdRate(chains.get(c.chainId)!, c.relayer.nativeUsdFeed));
  return {
    tanks: tankRepo(db),
    holds: balanceHolds(db),
    /** The meta-transaction status hook that debits, reverses and releases holds. */
    onStatus: balanceDebits({ usdRate: (chainId) => usd.get(chainId)?.current() ?? null }),
    /** The native/USD rate of a chain now (null without a feed). */
    usdRate: (chainId: number) => usd.get(chainId)?.read() ?? Promise.resolve(null),
  };
}
export type ProjectBalances = ReturnType<typeof projectBalances>;
