import type { Address, Hex } from 'viem';
import type { Queryable } from '../store/db.ts';
import type { Authorization } from './intake/authorization.ts';

/*
 * The meta-transaction's row and what is said about its writes (the status hook's arguments): types and
 * the row's normalisation, no SQL (store.ts owns the table's statements).
 */

export const FINAL_STATUSES = new Set(['SUCCEEDED', 'PARTIALLY_FAILED', 'FAILED', 'DROPPED']);

export interface MetaTxnRow {
  chain_id: number;
  id: string;
  project_id: number | null;
  wallet: string;
  entrypoint: string;
  input: string;
  status: string;
  revert_reason: string | null;
  gas_limit: number;
  gas_estimated: number;
  sponsored: boolean;
  sponsor_id: number | null;
  fee_token: string | null;
  fee_value: string | null;
  sender: string | null;
  txn_nonce: number | null;
  txn_hash: string | null;
  block_number: number | null;
  gas_used: number | null;
  gas_price: string | null;
  receipt: string | null;
  attempts: number;
  batch_index: number | null;
  stalled: string | null;
  confirmed: boolean;
  key_id: number | null;
  client_ip: string | null;
  /** The client network its loss budgets count it under, and its exposure in wei (loss-budget.ts); null for sponsored ones. */
  client_net?: string | null;
  exposure_wei?: string | null;
  /** Whether its fee is final by construction: a row whose fee is not is signed within exposure_wei, not cover_wei. */
  fee_final?: boolean | null;
  fee_payer: string | null;
  fee_received: string | null;
  /** The gas price intake priced it at (docs/relayer-worst-case.md). */
  gas_price_priced: string | null;
  /** What its fee was worth (fee-paid) or its sponsor was held for (sponsored), in wei, at intake. */
  cover_wei: string | null;
  /** Once mined: what it cost beyond its cover, in wei (null when nothing). */
  shortfall_wei: string | null;
  /** Once mined on an OP-stack chain: its share of the receipt's L1 data fee, in wei (null elsewhere). */
  l1_fee_wei: string | null;
  /** EIP-7702: the authorization the meta-transaction brought (carried while the EOA is not yet delegated). */
  authorization: Authorization | null;
  queued_at: Date;
  sent_at: Date | null;
  mined_at: Date | null;
  updated_at: Date;
}

export interface BundleRow {
  bundle_id: string;
  meta_txn_id: string;
  wallet: string;
  nonce_space: string;
  nonce: string;
}

const NUMERIC = ['chain_id', 'project_id', 'key_id', 'gas_limit', 'gas_estimated', 'sponsor_id', 'txn_nonce', 'block_number', 'gas_used', 'attempts', 'batch_index'] as const;

/** pg returns BIGINT as strings; the row type promises numbers. */
export function normalise(r: Record<string, unknown>): MetaTxnRow {
  for (const k of NUMERIC) if (r[k] != null) r[k] = Number(r[k]);
  for (const k of ['queued_at', 'sent_at', 'mined_at', 'updated_at']) if (r[k] != null) r[k] = new Date(r[k] as string);
  if (r.fee_value != null) r.fee_value = String(r.fee_value);
  if (r.fee_received != null) r.fee_received = String(r.fee_received);
  for (const k of ['gas_price_priced', 'cover_wei', 'shortfall_wei', 'l1_fee_wei', 'exposure_wei'] as const) if (r[k] != null) r[k] = String(r[k]);
  if (r.gas_price != null) r.gas_price = String(r.gas_price);
  r.authorization = typeof r.authorization === 'string' ? (JSON.parse(r.authorization) as Authorization) : null;
  return r as unknown as MetaTxnRow;
}

/** A meta-transaction's result, as the block sweep writes it. */
export interface SettledMeta {
  id: string;
  status: string;
  reason: string | null;
  hash: string;
  block: number;
  gasUsed: string | null;
  gasPrice: string | null;
  receipt: string;
  confirmed: boolean;
  /** What the payment address received, from the receipt; null when no fee was due. */
  feeReceived: string | null;
  /** What it cost beyond its cover (gasUsed × effectiveGasPrice + l1 fee − cover_wei), in wei; null when nothing. */
  shortfallWei: string | null;
  /** Its share of the receipt's L1 data fee (OP stack), in wei; null on a chain without one. */
  l1FeeWei: string | null;
}

export interface NewMetaTxn {
  chainId: number;
  id: string;
  projectId: number | null;
  wallet: Address;
  entrypoint: Address;
  input: Hex;
  gasLimit: bigint;
  gasEstimated: bigint;
  sponsored: boolean;
  sponsorId: number | null;
  feeToken: string | null;
  feeValue: bigint | null;
  /** The wallet paying the fee (null when sponsored or gasless). */
  feePayer: Address | null;
  /** The gas price it was priced at, and what its fee or its sponsor's hold covers in wei (the worst case it was admitted with). */
  gasPricePriced?: bigint | null;
  coverWei?: bigint | null;
  keyId: number | null;
  clientIp: string | null;
  /** A fee-paying one whose fee is not final: what it may cost the relayer (loss-budget.ts); null otherwise. */
  exposureWei?: bigint | null;
  /** The client network its loss budgets count it under (loss-budget.ts clientNet). */
  clientNet?: string | null;
  /** Whether its fee is final by construction (intake/finality.ts); null when it pays none. */
  feeFinal?: boolean | null;
  bundles: { id: string; wallet: Address; space: bigint; nonce: bigint }[];
  /** EIP-7702: the authorization to carry (stored with the row). */
  authorization?: Authorization | null;
  /** PENDING_PRECONDITION: it waits for on-chain preconditions before it is simulated and sent. Default QUEUED. */
  status?: 'QUEUED' | 'PENDING_PRECONDITION';
  /** Writes what belongs with the row (its preconditions) in the same transaction. */
  also?: (q: Queryable) => Promise<void>;
  /**
   * Its sponsorship's charge (intake/spend-caps.ts Charge), made with the COMMIT by the repository's
   * chargeAtCommit: an intake group's charges are one statement.
   */
  charge?: unknown;
}

export class NonceTaken extends Error {
  constructor(
    readonly wallet: string,
    readonly space: bigint,
    readonly nonce: bigint,
    readonly by: string,
  ) {
    super(`nonce ${nonce} of space ${space} of wallet ${wallet} is already taken by queued meta-transaction ${by}`);
  }
}

/**
 * Called with every meta-transaction whose status was written, on the transaction that wrote it (the
 * events outbox records the change there, so it commits or rolls back with it).
 */
export type StatusHook = (q: Queryable, rows: MetaTxnRow[], cause?: StatusCause, known?: StatusKnown) => Promise<void>;

/**
 * What the writer already knows of the rows, so a hook need not read it back: `created`, the rows were
 * inserted by this very transaction (no earlier life of theirs is live: a DROPPED one sent again was
 * deleted first); `bundles`, their bundles by meta-transaction id, as just written.
 */
export interface StatusKnown {
  created?: boolean;
  /** The status every row had before this write, when the writer holds their locks and knows it. */
  before?: string;
  bundles?: Map<string, BundleRow[]>;
}

/** A QUEUED meta-transaction signed into a sender's slot (markSent). */
export interface SentMeta {
  id: string;
  sender: string;
  nonce: number;
  hash: string;
  batchIndex: number | null;
  gasLimit: string;
}

/** Why a status was written again without a new status: a fee-bumped replacement (new txnHash), or a reorg that took its block away. */
export type StatusCause = 'replaced' | 'replacement_refused' | 'reorged';
