import { toHex, type Hex } from 'viem';
import { mnemonicToAccount, privateKeyToAccount, type HDAccount, type PrivateKeyAccount } from 'viem/accounts';
import type { RelayerChainConfig } from '../config.ts';

export type SenderAccount = PrivateKeyAccount | HDAccount;

/**
 * Each sender's private key, for signing in WebAssembly (attempts.ts sign). Beside the account, not on
 * it: an account that reaches a log line carries no key.
 */
const keys = new WeakMap<SenderAccount, Hex>();

/** The private key of a configured sender (undefined for any other account). */
export const signingKeyOf = (account: SenderAccount): Hex | undefined => keys.get(account);

/** The configured senders: explicit keys first, then the mnemonic's first `senderCount` accounts. */
export function senderAccounts(c: Pick<RelayerChainConfig, 'senderKeys' | 'senderMnemonic' | 'senderCount'>): SenderAccount[] {
  const withKey = <A extends SenderAccount>(account: A, key: Hex): A => {
    keys.set(account, key);
    return account;
  };
  const out: SenderAccount[] = c.senderKeys.map((k) => withKey(privateKeyToAccount(k as Hex), k as Hex));
  if (c.senderMnemonic) {
    for (let i = 0; i < c.senderCount; i++) {
      const a = mnemonicToAccount(c.senderMnemonic, { addressIndex: i });
      const key = a.getHdKey().privateKey;
      out.push(key ? withKey(a, toHex(key)) : a);
    }
  }
  const seen = new Set<string>();
  return out.filter((a) => !seen.has(a.address.toLowerCase()) && seen.add(a.address.toLowerCase()));
}

/** This process's lease owner id (util/owner-id.ts). */
export { ownerId as newOwner } from '../../util/owner-id.ts';

// The senders' ledger rows (leases, stops) are written by engine/ledger.ts; re-exported for the callers that lease.
export { LEASE_SEC, claimSenders, fairShare, releaseSenders, setSenderStopped, type LeaseRow } from './ledger.ts';
