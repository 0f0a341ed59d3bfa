import type { Hex } from 'viem';
import { mnemonicToAccount, privateKeyToAccount, type HDAccount, type PrivateKeyAccount } from 'viem/accounts';
import type { RelayerChainConfig } from '../config.ts';

export type SenderAccount = PrivateKeyAccount | HDAccount;

/** The configured senders: explicit keys first, then the mnemonic's first `senderCount` accounts. */
export function senderAccounts(c: Pick<RelayerChainConfig, 'senderKeys' | 'senderMnemonic' | 'senderCount'>): SenderAccount[] {
  const out: SenderAccount[] = c.senderKeys.map((k) => privateKeyToAccount(k as Hex));
  if (c.senderMnemonic) for (let i = 0; i < c.senderCount; i++) out.push(mnemonicToAccount(c.senderMnemonic, { addressIndex: i }));
  const seen = new Set<string>();
  return out.filter((a) => !seen.has(a.address.toLowerCase()) && seen.add(a.address.toLowerCase()));
}

/** This process's lease owner id (util/owner-id.ts). */
export { ownerId as newOwner } from '../../util/owner-id.ts';

// The senders' ledger rows (leases, stops) are written by engine/ledger.ts; re-exported for the callers that lease.
export { LEASE_SEC, claimSenders, fairShare, releaseSenders, setSenderStopped, type LeaseRow } from './ledger.ts';
