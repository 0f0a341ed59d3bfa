import { decodeEventLog, encodeEventTopics, pad, parseAbi, type Address, type Hex } from 'viem';
import { walletAbi } from '../abi.ts';
import { bareId, decodeCall, type DecodedCall } from '../intake/bundle.ts';
import type { SequenceContext } from '../context.ts';
import { structuralFees, type FeeTokenConfig } from '../intake/fees.ts';
import type { RawReceipt } from '../receipts.ts';
import type { MetaTxnRow } from '../store.ts';

const TRANSFER_TOPIC = encodeEventTopics({ abi: parseAbi(['event Transfer(address indexed from, address indexed to, uint256 value)']), eventName: 'Transfer' })[0].toLowerCase();

/**
 * What the payment address really received for one mined meta-transaction, from its receipt — the
 * ground truth the fee recorded at intake is checked against after inclusion:
 * - an ERC20 fee: the fee token's own Transfer logs from the paying wallet to the payment address;
 * - a native fee: the paying wallet's TxExecuted event for each native fee transaction of its bundle
 *   (a transaction with revertOnError=true is either executed, value sent, or the bundle reverts, and a
 *   reverted bundle leaves no event). Native transfers leave no log of their own.
 */
export function feeReceived(receipt: RawReceipt, row: MetaTxnRow, ctx: { chainId: number; context: SequenceContext; payee: Address; feeTokens: readonly FeeTokenConfig[] }): bigint {
  if (!row.fee_token || !row.fee_payer || receipt.status === '0x0') return 0n;
  const payer = row.fee_payer.toLowerCase();
  if (row.fee_token !== 'native') {
    const from = pad(payer as Hex, { size: 32 }).toLowerCase();
    const to = pad(ctx.payee, { size: 32 }).toLowerCase();
    let sum = 0n;
    for (const log of receipt.logs) {
      if (log.address.toLowerCase() !== row.fee_token || log.topics.length !== 3) continue;
      if (log.topics[0].toLowerCase() !== TRANSFER_TOPIC || log.topics[1].toLowerCase() !== from || log.topics[2].toLowerCase() !== to) continue;
      sum += BigInt(log.data === '0x' ? 0 : log.data);
    }
    return sum;
  }
  let call: DecodedCall;
  try {
    call = decodeCall(ctx.chainId, ctx.context, row.wallet as Address, row.entrypoint as Address, row.input as Hex);
  } catch {
    return 0n;
  }
  const executed = new Set<string>();
  for (const log of receipt.logs) {
    if (log.address.toLowerCase() !== payer) continue;
    try {
      const ev = decodeEventLog({ abi: walletAbi, data: log.data as Hex, topics: log.topics as [Hex, ...Hex[]] });
      if (ev.eventName === 'TxExecuted') executed.add(`${bareId(ev.args._tx)}:${ev.args._index}`);
    } catch {
      // not a wallet event
    }
  }
  let sum = 0n;
  for (const p of structuralFees(call, ctx.payee, ctx.feeTokens)) {
    if (p.token !== 'native' || p.wallet !== payer) continue;
    if (executed.has(`${bareId(call.bundles[p.bundle].id)}:${p.index}`)) sum += p.value;
  }
  return sum;
}
