import { hostname } from 'node:os';
import type { Address } from 'viem';
import { prepared, type Db, type Queryable, type Tx } from '../../store/db.ts';

/*
 * The senders' ledger: the only module that writes relay_senders and relay_instances. Leases between
 * processes (claim, release), an operator's stop, the next nonce each sender signs with, what the sweep
 * read of each sender at the last head, and its balance level.
 */

/** A sender's balance level as recorded on its row (balance-level.ts decides it). */
export type BalanceLevel = 'ok' | 'warning' | 'low';

export const LEASE_SEC = 20;

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
  // Only the missing sender rows are inserted: ON CONFLICT meeting a row that another process's signing
  // or sweep is updating waits for that transaction to end (to know whether the row stays), and did so
  // for every sender of the others at every claim (2–7 % of a fleet's active backends, issue #53).
  const live = await db.query<{ others: number }>(
    prepared(`WITH beat AS (
       INSERT INTO relay_instances (chain_id, owner, seen_until) VALUES ($1, $2, now() + make_interval(secs => $4))
       ON CONFLICT (chain_id, owner) DO UPDATE SET seen_until = EXCLUDED.seen_until RETURNING 1
     ), gone AS (
       DELETE FROM relay_instances WHERE chain_id = $1 AND seen_until < now() - interval '1 hour' RETURNING 1
     ), known AS (
       INSERT INTO relay_senders (chain_id, address) SELECT $1, a FROM unnest($3::text[]) AS a
        WHERE NOT EXISTS (SELECT 1 FROM relay_senders s WHERE s.chain_id = $1 AND s.address = a)
       ON CONFLICT DO NOTHING RETURNING 1
     )
     SELECT count(*)::int AS others FROM relay_instances WHERE chain_id = $1 AND owner <> $2 AND seen_until > now()`),
    [chainId, owner, all, LEASE_SEC],
  );
  const share = fairShare(all.length, live.rows[0].others + 1);
  // Own leases first (renewed), then free ones; rows another process is taking right now are skipped.
  // Own leases past the share (a process joined) go back now rather than when they expire.
  const take = () =>
    db.query<LeaseRow>(
      prepared(`WITH pick AS (
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
       RETURNING rs.address, rs.next_nonce::text AS next_nonce, rs.stopped_at IS NOT NULL AS stopped`),
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

/** The next nonce of every sender this process holds (null: not known yet, the sweep mends it). */
export async function ownedNextNonces(db: Db, chainId: number, owner: string): Promise<Map<Address, number | null>> {
  const r = await db.query<{ address: Address; next_nonce: string | null }>('SELECT address, next_nonce::text AS next_nonce FROM relay_senders WHERE chain_id = $1 AND owner = $2', [chainId, owner]);
  return new Map(r.rows.map((x) => [x.address, x.next_nonce == null ? null : Number(x.next_nonce)]));
}

/** The sender's next nonce, locked for the signing transaction; undefined when this process no longer holds it. */
export async function lockNextNonce(tx: Tx, chainId: number, sender: Address, owner: string): Promise<number | null | undefined> {
  const r = await tx.query<{ next_nonce: string | null }>('SELECT next_nonce::text AS next_nonce FROM relay_senders WHERE chain_id = $1 AND address = $2 AND owner = $3 FOR UPDATE', [
    chainId,
    sender,
    owner,
  ]);
  if (!r.rows[0]) return undefined;
  return r.rows[0].next_nonce == null ? null : Number(r.rows[0].next_nonce);
}

/** Sets the nonce the sender signs with next (with `owner`: only while this process holds it). */
export async function setNextNonce(q: Queryable, chainId: number, sender: Address, nonce: number, owner?: string): Promise<void> {
  if (owner === undefined) await q.query('UPDATE relay_senders SET next_nonce = $3, updated_at = now() WHERE chain_id = $1 AND address = $2', [chainId, sender, nonce]);
  else await q.query('UPDATE relay_senders SET next_nonce = $3, updated_at = now() WHERE chain_id = $1 AND address = $2 AND owner = $4', [chainId, sender, nonce, owner]);
}

/** What the sweep read of a sender at the head (RuntimeStatus and the console show it). */
export async function recordSenderRead(
  db: Db,
  chainId: number,
  sender: Address,
  read: { balance: bigint; belowFloor: boolean; latest: number; pending: number; stalled: string | null },
): Promise<void> {
  await db.query(
    'UPDATE relay_senders SET balance = $3, below_floor = $4, chain_latest = $5, chain_pending = $6, stalled = $7, read_at = now(), updated_at = now() WHERE chain_id = $1 AND address = $2',
    [chainId, sender, read.balance.toString(), read.belowFloor, read.latest, read.pending, read.stalled],
  );
}

/** The sender's recorded balance level, locked (a second process waits, then reads what the first wrote); undefined when it has no row. */
export async function lockBalanceLevel(tx: Tx, chainId: number, sender: Address): Promise<BalanceLevel | null | undefined> {
  const r = await tx.query<{ balance_level: BalanceLevel | null }>('SELECT balance_level FROM relay_senders WHERE chain_id = $1 AND address = $2 FOR UPDATE', [chainId, sender.toLowerCase()]);
  return r.rows.length === 0 ? undefined : r.rows[0].balance_level;
}

export async function setBalanceLevel(tx: Tx, chainId: number, sender: Address, level: BalanceLevel): Promise<void> {
  await tx.query('UPDATE relay_senders SET balance_level = $3 WHERE chain_id = $1 AND address = $2', [chainId, sender.toLowerCase(), level]);
}
