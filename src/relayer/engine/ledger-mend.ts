import type { Address, Hex } from 'viem';
import { broadcast, failAttempt, highestFinalNonce, insertAttempt, sign, slotHasAttempt } from './attempts.ts';
import type { EngineContext } from './context.ts';
import type { Fees } from './gas-price.ts';
import { setNextNonce } from './ledger.ts';

const FILLER_GAS = 21_000n;

/**
 * Keeps the ledger equal to what the chain and our open slots say: holes below an open slot that no
 * attempt of ours was ever signed for are filled with a zero-value self-transfer (nothing after a hole can be mined), a counter past every open slot
 * and the pool is rewound, and a counter behind the chain (the key used elsewhere) is moved up.
 */
export async function mendLedger(d: EngineContext, fees: () => Promise<Fees>, sender: Address, pending: number, next: number | null, open: readonly { nonce: number }[], head: number) {
  if (next == null || pending > next) {
    if (next != null) d.log.warn({ chainId: d.chainId, sender, ledger: next, chain: pending }, 'sender used outside this relayer; ledger moved up');
    await setNextNonce(d.db, d.chainId, sender, pending, d.owner);
    return;
  }
  // Every open slot counts, mined ones too: a reorg can put a mined one back above the chain's count.
  const taken = new Set(open.map((s) => s.nonce));
  const highest = open.length ? Math.max(...open.map((s) => s.nonce)) : -1;
  for (let n = pending; n < highest; n++) if (!taken.has(n)) await fill(d, fees, sender, n, head);
  if (next <= Math.max(pending, highest + 1)) return;
  // Nor below a final transaction: one above the chain's count is a deep reorg's, re-broadcast by the sweep
  // at its own nonce; a counter rewound under it would sign another meta-transaction there.
  const floor = Math.max(pending, highest + 1, (await highestFinalNonce(d.db, d.chainId, sender)) + 1);
  if (next > floor) {
    d.log.info({ chainId: d.chainId, sender, from: next, to: floor }, 'ledger rewound to the chain');
    await setNextNonce(d.db, d.chainId, sender, floor, d.owner);
  }
}

async function fill(d: EngineContext, fees: () => Promise<Fees>, sender: Address, nonce: number, head: number) {
  // A nonce with a transaction of its own (a final one a deep reorg took away, not yet reopened by the
  // sweep) is re-broadcast with its signed bytes, never filled: a filler would destroy its bundle.
  if (await slotHasAttempt(d.db, d.chainId, sender, nonce)) {
    d.log.warn({ chainId: d.chainId, sender, nonce }, 'a nonce below an open slot has a signed transaction of its own: not filled');
    return;
  }
  const { hash } = await sendFiller(d, sender, nonce, await fees(), head);
  d.log.warn({ chainId: d.chainId, sender, nonce, hash }, 'filling a nonce gap with a zero-value self-transfer');
}

/**
 * Signs, records and broadcasts a zero-value self-transfer of `sender` at `nonce` with these fees: a
 * hole's filler, or the replacement that frees a stuck slot (unblock.ts). Its hash, and whether the node took it.
 */
export async function sendFiller(d: EngineContext, sender: Address, nonce: number, fees: Fees, head: number): Promise<{ hash: Hex; ok: boolean; error?: string }> {
  // Arbitrum counts an L1 component even in a bare transfer: the node says how much.
  const gas = d.relayer.feeModel === 'arbitrum' ? await d.client.estimateGas({ account: sender, to: sender, value: 0n }) : FILLER_GAS;
  const u = { nonce, to: sender, data: '0x' as Hex, value: 0n, gas, fees };
  const { raw, hash } = await sign(d.accounts.get(sender)!, d.chainId, u);
  await insertAttempt(d.db, d.chainId, { ...u, sender, kind: 'filler', metaTxnId: null, hash, raw, head });
  const res = await broadcast(d.client, raw);
  if (res.ok) {
    d.metrics?.relayBroadcasts.inc({ chain: d.chainName, kind: 'filler' });
    return { hash, ok: true };
  }
  await failAttempt(d.db, d.chainId, hash, res.message);
  return { hash, ok: false, error: res.message };
}
