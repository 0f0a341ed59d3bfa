import { formatGwei } from 'viem';
import type { Attempt } from './attempts.ts';
import type { EngineContext } from './context.ts';
import { feePerGas } from './cover-ceiling.ts';
import { replacementFees, type Fees, type Market } from './gas-price.ts';
import { sendFiller } from './ledger-mend.ts';

/*
 * Senders stay live (docs/relayer-worst-case.md). A slot whose last attempt offers less per gas than the
 * next base fee cannot be mined, and every later nonce of its sender waits behind it: its sender takes no
 * new work (the sweep reports it stalled), and when no replacement within the slot's cover can meet the
 * base fee for unblockAfterBlocks blocks, the slot is freed — a zero-value self-transfer at the market
 * price, paid by the relayer, takes the nonce. Whichever of the slot's transactions is mined decides:
 * the filler, and its meta-transactions are DROPPED (settle.ts); the bundle after all, and it is settled
 * as usual.
 */

/** Why an attempt with these fees cannot be mined in the next block (its max fee under the next base fee), or null. */
export function pricedOut(fees: Fees, market: Market): string | null {
  const base = market.nextBaseFee;
  if (base == null || feePerGas(fees) >= base) return null;
  return `its max fee of ${formatGwei(feePerGas(fees))} gwei per gas is below the next base fee of ${formatGwei(base)} gwei`;
}

/** The reason a meta-transaction whose slot a filler took is DROPPED with. */
export function freedReason(nonce: number, hash: string, blocks: number): string {
  return `stalled: its fee or sponsorship could not meet the base fee for ${blocks} blocks, so its sender's nonce ${nonce} was freed by a zero-value self-transfer (${hash}) the relayer paid for; nothing of it ran: send it again to have it priced anew`;
}

/**
 * Frees a stuck slot: a self-transfer at the market price (raised over the last attempt as a node's
 * replacement rule asks, never above feeCapGwei). Null when it went out; else why the slot still waits.
 */
export async function freeSlot(d: EngineContext, slot: { sender: `0x${string}`; nonce: number }, last: Attempt, market: Market, head: number, why: string): Promise<string | null> {
  const rep = replacementFees(last.fees, market, d.policy);
  if (!rep.ok) return `${why}; it cannot be freed: ${rep.reason}`;
  const still = pricedOut(rep.fees, market);
  if (still) return `${why}; it cannot be freed: a self-transfer within the fee cap would offer too little (${still})`;
  const sent = await sendFiller(d, slot.sender, slot.nonce, rep.fees, head);
  if (!sent.ok) return `${why}; the self-transfer freeing its nonce was refused: ${(sent.error ?? '').slice(0, 200)}`;
  d.log.warn({ chainId: d.chainId, sender: slot.sender, nonce: slot.nonce, hash: sent.hash, replaces: last.hash, why }, 'freeing a stuck nonce with a zero-value self-transfer');
  await d.metaTxns.setStalledAtSlot(d.chainId, slot.sender, slot.nonce, `${why}: its nonce is being freed by a zero-value self-transfer (${sent.hash}); it is DROPPED once that is mined`);
  return null;
}
