import type { Address, Hex, PublicClient } from 'viem';
import type { ChainRelayer } from '../chain-relayer.ts';
import { StaleState } from '../errors.ts';
import { AUTHORIZATION_GAS, designator, readNonceAt, type Authorization } from '../intake/authorization.ts';
import { tokenKey } from '../intake/fees.ts';
import { intrinsicGas, type NonceOverride } from '../intake/simulate.ts';
import type { MetaTxnRow } from '../store.ts';

/**
 * What the dispatcher's run before signing says of a queued meta-transaction. 'behind': no node ran it
 * on the head seen (StaleState), so nothing is known of it: left queued as it is, judged at the next pass.
 */
export type Verdict = { kind: 'good' } | { kind: 'drop'; reason: string } | { kind: 'resize'; estimate: bigint } | { kind: 'unsure'; reason: string } | { kind: 'behind'; reason: string };

/** Passes in a row a meta-transaction may be judged unsure (left queued, nothing signed) before it is dropped. */
export const UNSURE_PASSES = 3;

/** A verdict against a meta-transaction is read again after this long before it stands. */
const RECHECK_PAUSE_MS = 250;

/**
 * Whether a queued meta-transaction still executes, pays the fee it was accepted with and runs within
 * the gas limit it was priced on, judged twice before it is dropped or resized: one run rests on one
 * node's answer, and a load-balanced provider's nodes lag a block or two (a wallet nonce a block old
 * fails the trial while the bundle is fine). A bundle really gone bad fails both runs.
 */
export async function judgeStillGood(r: ChainRelayer, engine: PublicClient, sender: Address, row: MetaTxnRow, overrides: NonceOverride[], wallets: Address[], carry?: Authorization): Promise<Verdict> {
  const first = await judgeOnce(r, engine, sender, row, overrides, wallets, carry);
  if (first.kind === 'good' || first.kind === 'behind') return first;
  await new Promise((resolve) => setTimeout(resolve, RECHECK_PAUSE_MS));
  return judgeOnce(r, engine, sender, row, overrides, wallets, carry);
}

async function judgeOnce(r: ChainRelayer, engine: PublicClient, sender: Address, row: MetaTxnRow, overrides: NonceOverride[], wallets: Address[], carry?: Authorization): Promise<Verdict> {
  try {
    return await judgeRun(r, engine, sender, row, overrides, wallets, carry);
  } catch (err) {
    if (err instanceof StaleState) return { kind: 'behind', reason: err.message };
    throw err;
  }
}

async function judgeRun(r: ChainRelayer, engine: PublicClient, sender: Address, row: MetaTxnRow, overrides: NonceOverride[], wallets: Address[], carry?: Authorization): Promise<Verdict> {
  // Tried with the gas its transaction will give the entrypoint: eth_estimateGas only when that fails.
  const intrinsic = intrinsicGas(row.input as Hex) + (row.authorization ? AUTHORIZATION_GAS : 0n);
  const codes = carry ? [{ address: row.wallet as Address, code: designator(carry.implementation) }] : undefined;
  const sim = await r.simulate(sender, row.entrypoint as Address, row.input as Hex, overrides, BigInt(row.gas_limit) - intrinsic, wallets, codes);
  if (!sim.ok) return { kind: 'drop', reason: `no longer executes: ${sim.reason}` };
  // The delegation is placed by override, so the run passes whether or not the authorization holds: on
  // chain it applies only while the EOA's nonce is the one signed, read here at the very block run on.
  if (carry) {
    const nonce = await readNonceAt(engine, row.wallet as Address, sim.block);
    if (nonce === null) return { kind: 'behind', reason: `no node answered the account nonce of ${row.wallet} at block ${sim.block}, which it was simulated on` };
    if (nonce !== carry.nonce) {
      return { kind: 'drop', reason: `its EIP-7702 authorization is void: it is for account nonce ${carry.nonce} of ${row.wallet}, which is at ${nonce} at block ${sim.block}; nothing was sent` };
    }
  }
  if (row.fee_token) {
    const i = r.feeTokens.findIndex((t) => tokenKey(t) === row.fee_token);
    if (i < 0 || (sim.paid[i] ?? 0n) < BigInt(row.fee_value ?? '0')) return { kind: 'drop', reason: 'the bundle no longer pays the fee it was accepted with' };
  }
  // The gas limit is what its fee, its sponsor's caps and hold were priced on: never raised here. A bundle
  // that no longer runs within it is dropped, and sent again it is priced again through the whole of intake.
  if (sim.trial === 'failed' || (sim.estimate != null && sim.estimate > BigInt(row.gas_limit))) {
    // Arbitrum: the L1 component rose since intake; a larger limit the bundle's cover pays for is taken (l2-gas.ts).
    if (r.feeModel === 'arbitrum' && sim.trial !== 'failed') return { kind: 'resize', estimate: sim.estimate! };
    const needs = sim.estimate != null ? `${sim.estimate} gas` : 'more gas';
    // The trial failed within the limit while the node's estimate fits in it: two reads that disagree (a
    // node a block behind ran the trial on state before the wallet's last transaction). Unknown, not bad:
    // left queued and judged again at the next pass; only a disagreement that lasts drops it.
    if (sim.trial === 'failed' && sim.estimate != null && sim.estimate <= BigInt(row.gas_limit)) {
      return { kind: 'unsure', reason: `its trial within the gas limit of ${row.gas_limit} failed ${UNSURE_PASSES} passes in a row though the node estimates ${needs}` };
    }
    return { kind: 'drop', reason: `it now needs ${needs}, more than the gas limit of ${row.gas_limit} it was accepted and priced with; send it again to have it priced anew` };
  }
  return { kind: 'good' };
}
