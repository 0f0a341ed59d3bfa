import type { Address, Hex } from 'viem';
import type { Authorization } from '../intake/authorization.ts';
import type { NonceOverride } from '../intake/simulate.ts';
import type { ChainRelayer } from '../chain-relayer.ts';
import type { MetaTxnRow } from '../store.ts';
import { batchCall, batchGroups, batchPays } from './batch.ts';
import { belowBaseFee, clampToCeiling, coverCeiling } from './cover-ceiling.ts';
import type { Fees, Market } from './gas-price.ts';

/*
 * What the dispatcher signs, from the ready meta-transactions a sender takes: the transactions (units),
 * then the fees each is signed with.
 */

export interface Plan {
  row: MetaTxnRow;
  /** Set when a predecessor in the same nonce space is in flight: it must ride on the same sender. */
  sender?: Address;
  /** The wallets whose bundles it carries. */
  wallets: Address[];
  overrides: NonceOverride[];
  /** EIP-7702: the authorization its transaction carries (the EOA is not yet delegated to that implementation). */
  carry?: Authorization;
}

/** One transaction to sign: a single meta-transaction, or several batched through the guest module. */
export interface Unit {
  kind: 'meta' | 'batch';
  metas: MetaTxnRow[];
  to: Address;
  data: Hex;
  gas: bigint;
  /** A type-4 transaction carrying this authorization. */
  authorization?: Authorization;
}

/** A unit with the fees it is signed with: the market's, never above what its members' covers pay for. */
export type Priced = Unit & { fees: Fees };

const single = (row: MetaTxnRow, carry?: Authorization): Unit => ({
  kind: 'meta',
  metas: [row],
  to: row.entrypoint as Address,
  data: row.input as Hex,
  gas: BigInt(row.gas_limit),
  authorization: carry,
});

/**
 * Singles, or guest-module batches of wallet-form meta-transactions when batching is on. A batch is
 * simulated as a whole and must pay at least the sum of its members' fees; otherwise they go singly.
 * `size`: the chain's batchSize (under 2: no batches).
 */
export async function unitsFor(relayer: ChainRelayer, sender: Address, plans: Plan[], size: number): Promise<Unit[]> {
  if (size < 2) return plans.map((p) => single(p.row, p.carry));
  const { alone, groups } = batchGroups(plans, size);
  const units = alone.map((p) => single(p.row, p.carry));
  // Every batch is simulated at once (one JSON-RPC batch), not one after the other.
  const built = await Promise.all(
    groups.map(async (g): Promise<Unit[]> => {
      if (g.length < 2) return g.map((m) => single(m));
      const call = batchCall(g.map((m) => ({ wallet: m.entrypoint as Address, input: m.input as Hex, gasLimit: BigInt(m.gas_limit) })));
      if (await batchPays(relayer, sender, call.data, call.gas, g)) return [{ kind: 'batch', metas: g, to: relayer.context.guestModule, data: call.data, gas: call.gas }];
      return g.map((m) => single(m));
    }),
  );
  return [...units, ...built.flat()];
}

/**
 * Each unit's fees: the market's, lowered to what its members' covers pay for over its gas limit
 * (cover-ceiling.ts). A unit that cannot then meet the base fee is not signed: a batch goes as singles
 * (its overhead may be what tips it), a single is handed to `wait` (it stays queued, or is dropped once
 * queueTimeoutSec has passed).
 */
export async function pricedUnits(units: Unit[], market: Market, l1Bound: (u: Unit) => Promise<bigint>, wait: (row: MetaTxnRow, why: string) => Promise<void>): Promise<Priced[]> {
  const out: Priced[] = [];
  for (const unit of units) {
    const ceiling = coverCeiling(unit.metas, unit.gas, await l1Bound(unit));
    const fees = clampToCeiling(market, ceiling);
    const why = belowBaseFee(fees, ceiling, market.nextBaseFee ?? null);
    if (!why) out.push({ ...unit, fees });
    else if (unit.kind === 'batch')
      out.push(
        ...(await pricedUnits(
          unit.metas.map((m) => single(m)),
          market,
          l1Bound,
          wait,
        )),
      );
    else await wait(unit.metas[0], why);
  }
  return out;
}
