import { decodeEventLog, encodeFunctionData, type Address, type Hex } from 'viem';
import { walletAbi } from '../abi.ts';
import { describeRevert, intrinsicGas } from '../intake/simulate.ts';
import { tokenKey } from '../intake/fees.ts';
import type { ChainRelayer } from '../chain-relayer.ts';
import { StaleState } from '../errors.ts';
import type { RawReceipt } from '../receipts.ts';
import type { MetaTxnRow } from '../store.ts';

/** Room for the guest module's loop, events and the outer call around the members' own limits. */
const BATCH_OVERHEAD = 40_000n;
const PER_MEMBER_OVERHEAD = 12_000n;

export interface BatchMember {
  /** The wallet a wallet-form meta-transaction calls (its entrypoint). */
  wallet: Address;
  input: Hex;
  gasLimit: bigint;
}

/**
 * Several wallets' signed `execute` calls as one guest-module call. Each member has revertOnError=false,
 * so one failing member does not sink the others, and its own gas limit, so none starves the rest.
 */
export function batchCall(members: BatchMember[]): { data: Hex; gas: bigint } {
  const txs = members.map((m) => ({ delegateCall: false, revertOnError: false, gasLimit: m.gasLimit, target: m.wallet, value: 0n, data: m.input }));
  const data = encodeFunctionData({ abi: walletAbi, functionName: 'execute', args: [txs, 0n, '0x'] });
  // 64/63: the guest module forwards a member's limit from what is left, which must cover it.
  const inner = members.reduce((a, m) => a + (m.gasLimit * 64n) / 63n + PER_MEMBER_OVERHEAD, 0n);
  return { data, gas: inner + BATCH_OVERHEAD };
}

/** Why a batched member's whole wallet call reverted, from the guest module's TxFailed at its index. */
export function memberFailure(receipt: RawReceipt, guestModule: Address, index: number): string | null {
  for (const log of receipt.logs) {
    if (log.address.toLowerCase() !== guestModule.toLowerCase()) continue;
    try {
      const ev = decodeEventLog({ abi: walletAbi, data: log.data as Hex, topics: log.topics as [Hex, ...Hex[]] });
      if (ev.eventName === 'TxFailed' && ev.args._index === BigInt(index)) return `the wallet call reverted: ${describeRevert(ev.args._reason)}`;
    } catch {
      // not a wallet event
    }
  }
  return null;
}

/**
 * A batch transaction's gas split over its members in proportion to their estimates (what each was
 * simulated to use), so the members' gas and cost add up to the transaction's rather than each showing
 * the whole. The rounding remainder goes to the last member.
 */
export function shareGas(total: bigint, weights: bigint[]): bigint[] {
  if (weights.length === 0) return [];
  const sum = weights.reduce((a, w) => a + (w > 0n ? w : 0n), 0n);
  const parts = weights.map((w) => (sum === 0n ? total / BigInt(weights.length) : (total * (w > 0n ? w : 0n)) / sum));
  parts[parts.length - 1] += total - parts.reduce((a, p) => a + p, 0n);
  return parts;
}

/**
 * Which ready meta-transactions may share a guest-module transaction, in groups of at most `size`; the
 * rest go alone (a group of one too):
 * - one carrying an EIP-7702 authorization goes alone: its type-4 transaction is its own, and a void
 *   authorization (a race lost to the EOA) then costs only its own call, not a batch's;
 * - one riding a predecessor's nonce override, or calling through the guest module, goes alone;
 * - only sponsored meta-transactions of one project share a transaction: a member's gas is known only as
 *   a share of the batch's (by estimate), so a member that burns more than it was simulated to would
 *   make the others pay for it. Within one project that is the project's own money; across payers it
 *   would not be. Fee-paying ones go alone, each bounded by the gas limit its fee was priced on;
 * - one wallet once per batch: two bundles of one wallet would race on its nonces.
 */
export function batchGroups<P extends { row: MetaTxnRow; overrides: readonly unknown[]; carry?: unknown }>(plans: P[], size: number): { alone: P[]; groups: MetaTxnRow[][] } {
  const payerOf = (r: MetaTxnRow) => (r.sponsored && r.project_id != null ? `project:${r.project_id}` : null);
  const batchable = plans.filter((p) => p.overrides.length === 0 && p.row.entrypoint === p.row.wallet && !p.carry && payerOf(p.row) != null);
  const groups: MetaTxnRow[][] = [];
  const open = new Map<string, { rows: MetaTxnRow[]; wallets: Set<string> }>();
  for (const p of batchable) {
    const payer = payerOf(p.row)!;
    let g = open.get(payer);
    if (!g || g.wallets.has(p.row.wallet) || g.rows.length >= size) {
      g = { rows: [], wallets: new Set() };
      open.set(payer, g);
      groups.push(g.rows);
    }
    g.rows.push(p.row);
    g.wallets.add(p.row.wallet);
  }
  return { alone: plans.filter((p) => !batchable.includes(p)), groups };
}

/**
 * Whether a batch, simulated as the guest-module call it will be signed as (with `gas`, its members'
 * wallets' code as it is), still pays the payee at least what each member owes in each fee token:
 * a member that pays alone might not inside a batch (its fee read from state another member changed).
 */
export async function batchPays(r: ChainRelayer, sender: Address, data: Hex, gas: bigint, members: MetaTxnRow[]): Promise<boolean> {
  const sim = await r
    .simulate(
      sender,
      r.context.guestModule,
      data,
      [],
      gas - intrinsicGas(data),
      members.map((m) => m.wallet as Address),
    )
    // Not run on the head seen: unproven as a batch, so its members go singly (each was judged on it).
    .catch((err: unknown) => {
      if (err instanceof StaleState) return null;
      throw err;
    });
  if (!sim) return false;
  if (!sim.ok) return false;
  return r.feeTokens.every((t, i) => {
    const owed = members.filter((m) => m.fee_token === tokenKey(t)).reduce((a, m) => a + BigInt(m.fee_value ?? '0'), 0n);
    return (sim.paid[i] ?? 0n) >= owed;
  });
}
