import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Address, Hex } from 'viem';
import { mnemonicToAccount, privateKeyToAccount, type HDAccount, type PrivateKeyAccount } from 'viem/accounts';
import type { Db } from '../store/db.ts';
import type { RelayerChainConfig } from './service.ts';

export type SenderAccount = PrivateKeyAccount | HDAccount;

/** The configured senders: explicit keys first, then the mnemonic's first `senderCount` accounts. */
export function senderAccounts(c: Pick<RelayerChainConfig, 'senderKeys' | 'senderMnemonic' | 'senderCount'>): SenderAccount[] {
  const out: SenderAccount[] = c.senderKeys.map((k) => privateKeyToAccount(k as Hex));
  if (c.senderMnemonic) for (let i = 0; i < c.senderCount; i++) out.push(mnemonicToAccount(c.senderMnemonic, { addressIndex: i }));
  const seen = new Set<string>();
  return out.filter((a) => !seen.has(a.address.toLowerCase()) && seen.add(a.address.toLowerCase()));
}

export const LEASE_SEC = 20;

/** host:pid:random, so a process restarted on the same host can tell a dead predecessor's lease. */
export function newOwner(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
}

function deadLocalOwner(owner: string): boolean {
  const [host, pid] = owner.split(':');
  if (host !== hostname() || !/^\d+$/.test(pid ?? '') || Number(pid) === process.pid) return false;
  try {
    process.kill(Number(pid), 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

export interface LeaseRow {
  address: Address;
  next_nonce: string | null;
  /** Stopped by an operator (StopSender): settles what it has open, takes nothing new. */
  stopped: boolean;
}

/**
 * Takes or renews this process's leases on the senders. A sender is signed for by one process at a
 * time; a lease left by a process that died on this host is taken over at once, others when they expire.
 */
export async function claimSenders(db: Db, chainId: number, owner: string, addresses: Address[]): Promise<LeaseRow[]> {
  const take = () =>
    db.query<LeaseRow>(
      `INSERT INTO relay_senders (chain_id, address, owner, lease_until)
       SELECT $1, a, $2, now() + make_interval(secs => $4) FROM unnest($3::text[]) AS a
       ON CONFLICT (chain_id, address) DO UPDATE SET owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until, updated_at = now()
         WHERE relay_senders.owner = EXCLUDED.owner OR relay_senders.lease_until IS NULL OR relay_senders.lease_until < now()
       RETURNING address, next_nonce::text AS next_nonce, stopped_at IS NOT NULL AS stopped`,
      [chainId, owner, addresses.map((a) => a.toLowerCase()), LEASE_SEC],
    );
  const r = await take();
  if (r.rows.length === addresses.length) return r.rows;
  // Some are held elsewhere: a holder that died on this host gives them up now, not when its lease ends.
  const held = await db.query<{ owner: string }>(
    'SELECT DISTINCT owner FROM relay_senders WHERE chain_id = $1 AND owner IS NOT NULL AND owner <> $2 AND lease_until > now()',
    [chainId, owner],
  );
  const dead = held.rows.map((x) => x.owner).filter(deadLocalOwner);
  if (dead.length === 0) return r.rows;
  await db.query('UPDATE relay_senders SET owner = NULL, lease_until = NULL WHERE chain_id = $1 AND owner = ANY($2)', [chainId, dead]);
  return (await take()).rows;
}

export async function releaseSenders(db: Db, chainId: number, owner: string) {
  await db.query('UPDATE relay_senders SET owner = NULL, lease_until = NULL WHERE chain_id = $1 AND owner = $2', [chainId, owner]);
}

/**
 * StopSender / StartSender. The row may not exist yet (a sender no process has claimed), so this is
 * an upsert; whichever process holds the sender sees the flag on its next claim, within one poll.
 */
export async function setSenderStopped(db: Db, chainId: number, address: Address, stopped: boolean) {
  await db.query(
    `INSERT INTO relay_senders (chain_id, address, stopped_at) VALUES ($1, $2, CASE WHEN $3 THEN now() END)
     ON CONFLICT (chain_id, address) DO UPDATE
       SET stopped_at = CASE WHEN $3 THEN COALESCE(relay_senders.stopped_at, now()) END, updated_at = now()`,
    [chainId, address.toLowerCase(), stopped],
  );
}
