import type { Authorization } from './authorization.ts';
import type { PreconditionInput } from '../preconditions/conditions.ts';
import type { MetaTxnRow } from '../store.ts';

/** A SendMetaTxn as intake and pricing take it, and what it answers. */
export interface SendResult {
  id: string;
  created: boolean;
  row: MetaTxnRow;
}

export interface SendArgs {
  projectId: number | null;
  /** The access key's id, for the per-key share of the queue and bars. */
  keyId?: number | null;
  /** The caller's address (IP), for the per-address share of the queue and bars. */
  clientIp?: string | null;
  walletAddress: string;
  contract: string;
  input: string;
  quote?: string;
  /** Wait in PENDING_PRECONDITION until these hold (checked once per block); DROPPED after preconditionTimeoutSec. */
  preconditions?: PreconditionInput[];
  /** EIP-7702: the EOA `walletAddress` delegates to an accepted wallet implementation in the transaction that carries this bundle. */
  authorization?: Authorization | null;
}
