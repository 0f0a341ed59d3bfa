import type { Address } from 'viem';
import type { SenderState } from '../context.ts';
import { paysForMarket } from '../cover-ceiling.ts';
import type { Market } from '../gas-price.ts';
import type { Plan } from '../units.ts';

/*
 * Which sender takes each ready meta-transaction (the Dispatcher's choice before it claims and signs):
 * the senders that may take work, the reserve kept for bundles that pay today's price, and the
 * assignment itself. No database and no node: given what the Dispatcher knows at this pass, a plain
 * answer, apart from the loop that sends so each rule reads on its own.
 */

/** What the assignment is given of the senders and the engine's settings. */
export interface SenderRoom {
  /** The senders this process holds, in lease order. */
  held: readonly Address[];
  /** Held senders an operator stopped: given no new work. */
  stopped: ReadonlySet<Address>;
  /** What the last sweep knew of each held sender. */
  senders: ReadonlyMap<Address, SenderState>;
  config: { maxInFlightPerSender: number; reserveSenders: number; batchSize: number };
}

/**
 * Senders that may take new work now: held, not stopped, above the balance floor, not stalled behind a
 * slot that cannot be mined in the next block (its max fee under the next base fee) or cannot be
 * replaced, with room in flight; each with its slots in flight.
 */
export function usableSenders(r: SenderRoom): Map<Address, number> {
  const out = new Map<Address, number>();
  for (const a of r.held) {
    const s = r.senders.get(a);
    if (!s || r.stopped.has(a) || s.belowFloor || s.stalled || s.open >= r.config.maxInFlightPerSender) continue;
    out.set(a, s.open);
  }
  return out;
}

/** The senders kept for bundles that pay today's price: the last reserveSenders held (by address), when more are held. */
export function reserveSenders(r: Pick<SenderRoom, 'held' | 'config'>): Set<Address> {
  const n = r.config.reserveSenders;
  return new Set(n > 0 && r.held.length > n ? [...r.held].sort().slice(-n) : []);
}

/**
 * The plans by sender: a successor goes with its predecessor, the rest to the least loaded. The cap is
 * on transactions in flight: with batching, a transaction may carry batchSize of them. `load` (the
 * usable senders' slots in flight) is counted up as plans are assigned. `forReserve`: plans that found
 * only reserve senders free, which they may not take.
 */
export function assignSenders(r: SenderRoom, plans: readonly Plan[], load: Map<Address, number>, market: Market): { assigned: Map<Address, Plan[]>; forReserve: string[] } {
  const perTx = r.config.batchSize;
  const assigned = new Map<Address, Plan[]>();
  const reserve = reserveSenders(r);
  const forReserve: string[] = [];
  for (const p of plans) {
    let sender = p.sender;
    if (sender && !load.has(sender)) continue; // its predecessor's sender is busy or another process's
    if (!sender) {
      // One that cannot pay for the first attempt's price (the base fee doubled) is the kind that stalls
      // a sender when the base fee rises: it never takes the reserve, kept for bundles that pay today's price.
      const thin = !paysForMarket([p.row], BigInt(p.row.gas_limit), market);
      const open = [...load].filter(([a]) => !(thin && reserve.has(a)));
      if (open.length === 0) {
        forReserve.push(p.row.id);
        continue;
      }
      sender = open.sort((a, b) => a[1] - b[1])[0][0];
    }
    const n = load.get(sender)!;
    if (n >= r.config.maxInFlightPerSender) continue;
    load.set(sender, n + 1 / perTx);
    assigned.set(sender, [...(assigned.get(sender) ?? []), p]);
  }
  return { assigned, forReserve };
}
