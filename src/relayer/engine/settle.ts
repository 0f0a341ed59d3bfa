import type { Address } from 'viem';
import type { Queryable } from '../../store/db.ts';
import { outcomeOf, type RawReceipt } from '../receipts.ts';
import type { SettledMeta } from '../store.ts';
import { LOST_DELEGATION, type Shortfall } from '../bars.ts';
import { receiptL1Fee } from '../fee-model.ts';
import { memberFailure, shareGas } from './batch.ts';
import type { EngineContext } from './context.ts';
import { feeReceived } from './fee-check.ts';
import { contractsToBar, gasShortfall, reconcileCost } from './reconcile.ts';
import { carriedBy, type Winner } from './slot-owners.ts';
import { freedReason } from './unblock.ts';

/** A slot the sweep found mined: the attempt that won it, its receipt, and whether it is past the confirmations. */
export interface MinedSlot {
  slot: { sender: string; nonce: number };
  /** A `filler` winner is a self-transfer that freed a stuck slot (unblock.ts): nothing of its meta-transactions ran. */
  winner: Winner;
  receipt: RawReceipt;
  final: boolean;
}

/** A slot's key in the maps of the sweep and of settling: (sender, nonce). */
export const slotKey = (sender: string, nonce: number) => `${sender}:${nonce}`;

/**
 * After inclusion, on the sweep's transaction: sets each meta-transaction of the mined slots from its
 * receipt (its own wallet events decide its status), shares a batch's gas and L1 fee among its members,
 * checks the fee that arrived and the cost against the cover (reconcile.ts), and records what a shortfall
 * bars. Returns the ids settled.
 */
export async function settleMined(d: EngineContext, tx: Queryable, rows: readonly MinedSlot[]): Promise<string[]> {
  const bySlot = new Map(rows.map((x) => [slotKey(x.slot.sender, x.slot.nonce), x]));
  // Only the meta-transactions the mined transaction carries: another one recorded at the same slot
  // (a reorg deeper than the confirmations) keeps its status, which only its own receipt changes.
  const metas = await carriedBy(
    tx,
    d.chainId,
    await d.metaTxns.atSlots(
      tx,
      d.chainId,
      rows.map((x) => ({ sender: x.slot.sender, nonce: x.slot.nonce })),
    ),
    (m) => bySlot.get(slotKey(m.sender!, m.txn_nonce!))?.winner,
  );
  const bundles = await d.metaTxns.bundlesOfMany(
    d.chainId,
    metas.map((m) => m.id),
    tx,
  );
  // Batch members share their transaction's gas by estimate; a single meta-transaction has it all.
  const gasOf = new Map<string, bigint>();
  // An OP-stack L1 data fee is shared the same way; null on a chain whose receipts carry none.
  const l1Of = new Map<string, bigint | null>();
  const members = new Map<string, typeof metas>();
  for (const m of metas) {
    const key = slotKey(m.sender!, m.txn_nonce!);
    members.set(key, [...(members.get(key) ?? []), m]);
  }
  for (const [key, ms] of members) {
    const total = bySlot.get(key)?.receipt.gasUsed;
    if (total == null) continue;
    const ordered = [...ms].sort((a, b) => (a.batch_index ?? 0) - (b.batch_index ?? 0));
    const shares = shareGas(
      BigInt(total),
      ordered.map((m) => BigInt(m.gas_estimated)),
    );
    ordered.forEach((m, i) => gasOf.set(m.id, shares[i]));
    const l1 = bySlot.get(key)?.receipt.l1Fee;
    const l1Shares = l1 == null ? null : shareGas(receiptL1Fee({ l1Fee: l1 }), shares);
    ordered.forEach((m, i) => l1Of.set(m.id, l1Shares?.[i] ?? null));
  }
  const out: SettledMeta[] = [];
  const shortfalls: Shortfall[] = [];
  const feeCtx = { chainId: d.chainId, context: d.relayer.context, payee: d.relayer.paymentAddress.toLowerCase() as Address, feeTokens: d.relayer.feeTokens };
  const freed: string[] = [];
  for (const m of metas) {
    const h = bySlot.get(slotKey(m.sender!, m.txn_nonce!));
    if (!h) continue;
    if (h.winner.kind === 'filler') {
      // The slot was freed: its bundle never ran and cost nothing; what it was charged or held is given back.
      if (m.status === 'SENT') {
        await d.metaTxns.setStatus(tx, d.chainId, m.id, { status: 'DROPPED', revert_reason: freedReason(m.txn_nonce!, h.winner.hash, d.config.unblockAfterBlocks), stalled: null }, 'SENT');
        freed.push(m.id);
      }
      continue;
    }
    const outcome = outcomeOf(h.receipt, m.id, bundles.get(m.id) ?? []);
    const reason = m.batch_index != null && outcome.status === 'FAILED' ? (memberFailure(h.receipt, d.relayer.context.guestModule, m.batch_index) ?? outcome.reason) : outcome.reason;
    // The fee recorded at intake is checked against what the receipt shows arrived.
    const received = m.fee_token ? feeReceived(h.receipt, m, feeCtx) : null;
    if (received != null && received < BigInt(m.fee_value ?? '0')) {
      // A fee the bundle took back: the contracts it called are barred too (the next caller of them pays or is sponsored).
      shortfalls.push({
        chainId: d.chainId,
        metaTxnId: m.id,
        wallet: m.fee_payer,
        keyId: m.key_id,
        clientIp: m.client_ip,
        clientNet: m.client_net ?? null,
        feeToken: m.fee_token,
        owed: BigInt(m.fee_value ?? '0'),
        received,
        contracts: contractsToBar(m, feeCtx),
      });
    } else if (m.authorization && outcome.noWallet) {
      // EIP-7702: a carried authorization whose call ran no wallet lost a race to its EOA (voided or
      // re-delegated after the last check), and the relayer paid up to the whole gas limit: it counts
      // against the signer, sponsored or not (owed: what it cost, in wei).
      const cost = BigInt(h.receipt.gasUsed ?? '0') * BigInt(h.receipt.effectiveGasPrice ?? '0') + receiptL1Fee(h.receipt);
      shortfalls.push({ chainId: d.chainId, metaTxnId: m.id, wallet: m.wallet, keyId: null, clientIp: null, feeToken: LOST_DELEGATION, owed: cost, received: 0n });
    }
    // What it cost against what it was admitted with (engine/reconcile.ts).
    const effective = h.receipt.effectiveGasPrice ? BigInt(h.receipt.effectiveGasPrice) : null;
    const l1Fee = l1Of.get(m.id) ?? null;
    const costCheck = reconcileCost(m, gasOf.get(m.id) ?? null, effective, l1Fee ?? 0n);
    if (costCheck.kind) {
      d.metrics?.relayCostShortfalls.inc({ chain: d.chainName, kind: costCheck.kind });
      d.metrics?.relayCostShortfallWei.inc({ chain: d.chainName }, Number(costCheck.shortfallWei));
      d.log.warn(
        { chainId: d.chainId, id: m.id, kind: costCheck.kind, shortfallWei: costCheck.shortfallWei!.toString(), cover: m.cover_wei },
        'a meta-transaction cost more than its fee or sponsor hold covered',
      );
      if (costCheck.kind === 'gas' && !m.sponsored) shortfalls.push(gasShortfall(m, d.chainId, costCheck.shortfallWei!, contractsToBar(m, feeCtx)));
    }
    out.push({
      id: m.id,
      status: outcome.status,
      reason,
      hash: h.winner.hash,
      block: Number(BigInt(h.receipt.blockNumber)),
      gasUsed: gasOf.get(m.id)?.toString() ?? null,
      gasPrice: h.receipt.effectiveGasPrice ? BigInt(h.receipt.effectiveGasPrice).toString() : null,
      receipt: JSON.stringify(h.receipt),
      confirmed: h.final,
      feeReceived: received?.toString() ?? null,
      shortfallWei: costCheck.shortfallWei?.toString() ?? null,
      l1FeeWei: l1Fee?.toString() ?? null,
    });
  }
  await d.metaTxns.settleMany(tx, d.chainId, out);
  if (shortfalls.length) {
    const keys = (await d.bars?.record(tx, shortfalls, d.config.lossBudget.keyBarAfterNetworks)) ?? [];
    for (const f of shortfalls.filter((x) => x.feeToken != null && x.feeToken !== LOST_DELEGATION)) {
      d.metrics?.relayFeeShortfalls.inc({ chain: d.chainName });
      d.log.warn(
        { chainId: d.chainId, id: f.metaTxnId, wallet: f.wallet, owed: f.owed.toString(), received: f.received.toString() },
        'a meta-transaction was mined without its fee: its client network and wallet are barred under its key, and the contracts it called, from fee-paid relaying',
      );
    }
    for (const keyId of keys) {
      d.metrics?.relayKeyBars.inc({ chain: d.chainName });
      d.log.error(
        { chainId: d.chainId, keyId },
        'an access key is barred from fee-paid relaying: fees did not arrive from several client networks using it (lift the bar in the console once settled)',
      );
    }
  }
  return [...out.map((m) => m.id), ...freed];
}
