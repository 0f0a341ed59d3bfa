import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Address, Hex } from 'viem';
import { mnemonicToAccount, privateKeyToAccount, type HDAccount, type PrivateKeyAccount } from 'viem/accounts';
import type { Db } from '../../store/db.ts';
import type { RelayerChainConfig } from '../config.ts';

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

/** How many of `total` senders one of `instances` live processes may hold: all of them, shared fairly. */
export function fairShare(total: number, instances: number): number {
  return Math.ceil(total / Math.max(1, instances));
}

/**
 * Takes or renews this process's leases on the senders, up to its fair share among the processes
 * alive on the chain (a heartbeat row each). A sender is signed for by one process at a time; one over
 * the share is handed back at once, so a process that joins gets its part on its next pass. A lease
 * left by a process that died on this host is taken over at once, others when they expire.
 */
export async function claimSenders(db: Db, chainId: number, owner: string, addresses: Address[]): Promise<LeaseRow[]> {
  const all = addresses.map((a) => a.toLowerCase());
  // The heartbeat, the sender rows (an UPDATE can lease only what exists), and the other live processes.
  const live = await db.query<{ others: number }>(
    `WITH beat AS (
       INSERT INTO relay_instances (chain_id, owner, seen_until) VALUES ($1, $2, now() + make_interval(secs => $4))
       ON CONFLICT (chain_id, owner) DO UPDATE SET seen_until = EXCLUDED.seen_until RETURNING 1
     ), gone AS (
       DELETE FROM relay_instances WHERE chain_id = $1 AND seen_until < now() - interval '1 hour' RETURNING 1
     ), known AS (
       INSERT INTO relay_senders (chain_id, address) SELECT $1, a FROM unnest($3::text[]) AS a ON CONFLICT DO NOTHING RETURNING 1
     )
     SELECT count(*)::int AS others FROM relay_instances WHERE chain_id = $1 AND owner <> $2 AND seen_until > now()`,
    [chainId, owner, all, LEASE_SEC],
  );
  const share = fairShare(all.length, live.rows[0].others + 1);
  // Own leases first (renewed), then free ones; rows another process is taking right now are skipped.
  // Own leases past the share (a process joined) go back now rather than when they expire.
  const take = () =>
    db.query<LeaseRow>(
      `WITH pick AS (
         SELECT address FROM relay_senders
         WHERE chain_id = $1 AND address = ANY($3::text[])
           AND (owner = $2 OR owner IS NULL OR lease_until IS NULL OR lease_until < now())
         ORDER BY (owner IS NOT DISTINCT FROM $2) DESC, address
         LIMIT $5 FOR UPDATE SKIP LOCKED
       ), handed AS (
         UPDATE relay_senders SET owner = NULL, lease_until = NULL
         WHERE chain_id = $1 AND owner = $2 AND address NOT IN (SELECT address FROM pick) RETURNING 1
       )
       UPDATE relay_senders rs SET owner = $2, lease_until = now() + make_interval(secs => $4), updated_at = now()
       FROM pick WHERE rs.chain_id = $1 AND rs.address = pick.address
       RETURNING rs.address, rs.next_nonce::text AS next_nonce, rs.stopped_at IS NOT NULL AS stopped`,
      [chainId, owner, all, LEASE_SEC, share],
    );
  const rows = (await take()).rows;
  if (rows.length >= share) return rows;
  // Short of the share: a process that died on this host gives its senders up now, not when its lease
  // ends, and stops counting as alive; then the share is worked out again.
  const others = await db.query<{ owner: string }>(
    `SELECT owner FROM relay_senders WHERE chain_id = $1 AND owner <> $2 AND lease_until > now()
     UNION SELECT owner FROM relay_instances WHERE chain_id = $1 AND owner <> $2 AND seen_until > now()`,
    [chainId, owner],
  );
  const dead = others.rows.map((x) => x.owner).filter(deadLocalOwner);
  if (dead.length === 0) return rows;
  await db.query('UPDATE relay_senders SET owner = NULL, lease_until = NULL WHERE chain_id = $1 AND owner = ANY($2)', [chainId, dead]);
  await db.query('DELETE FROM relay_instances WHERE chain_id = $1 AND owner = ANY($2)', [chainId, dead]);
  return claimSenders(db, chainId, owner, addresses);
}

export async function releaseSenders(db: Db, chainId: number, owner: string) {
  await db.query('UPDATE relay_senders SET owner = NULL, lease_until = NULL WHERE chain_id = $1 AND owner = $2', [chainId, owner]);
  await db.query('DELETE FROM relay_instances WHERE chain_id = $1 AND owner = $2', [chainId, owner]);
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
