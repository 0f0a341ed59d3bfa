import type { Address, Hex } from 'viem';
import type { Db, Queryable } from '../store/db.ts';

export const FINAL_STATUSES = new Set(['SUCCEEDED', 'PARTIALLY_FAILED', 'FAILED', 'DROPPED']);
/** Statuses whose wallet nonces are spoken for: a new bundle may not reuse them. */
export const LIVE_STATUSES = ['QUEUED', 'SENT'];

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

const NUMERIC = ['chain_id', 'project_id', 'gas_limit', 'gas_estimated', 'sponsor_id', 'txn_nonce', 'block_number', 'gas_used', 'attempts'] as const;

/** pg returns BIGINT as strings; the row type promises numbers. */
function normalise(r: Record<string, unknown>): MetaTxnRow {
  for (const k of NUMERIC) if (r[k] != null) r[k] = Number(r[k]);
  for (const k of ['queued_at', 'sent_at', 'mined_at', 'updated_at']) if (r[k] != null) r[k] = new Date(r[k] as string);
  if (r.fee_value != null) r.fee_value = String(r.fee_value);
  if (r.gas_price != null) r.gas_price = String(r.gas_price);
  return r as unknown as MetaTxnRow;
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
  bundles: { id: string; wallet: Address; space: bigint; nonce: bigint }[];
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

export function metaTxnRepo(db: Db) {
  const findIn = async (q: Queryable, chainId: number, id: string): Promise<MetaTxnRow | undefined> => {
    const r = await q.query<Record<string, unknown>>(
      `SELECT * FROM meta_txns WHERE chain_id = $1 AND id = $2
       UNION ALL
       SELECT m.* FROM meta_txn_bundles b JOIN meta_txns m ON m.chain_id = b.chain_id AND m.id = b.meta_txn_id
        WHERE b.chain_id = $1 AND b.bundle_id = $2 AND b.meta_txn_id <> $2
       LIMIT 1`,
      [chainId, id],
    );
    return r.rows[0] ? normalise(r.rows[0]) : undefined;
  };

  /** The live meta-transaction holding a wallet's nonce, if any. */
  const holderIn = async (q: Queryable, chainId: number, wallet: string, space: string, nonce: string): Promise<MetaTxnRow | undefined> => {
    const r = await q.query<Record<string, unknown>>(
      `SELECT m.* FROM meta_txn_bundles b JOIN meta_txns m ON m.chain_id = b.chain_id AND m.id = b.meta_txn_id
       WHERE b.chain_id = $1 AND b.wallet = $2 AND b.nonce_space = $3 AND b.nonce = $4 AND m.status = ANY($5) LIMIT 1`,
      [chainId, wallet, space, nonce, LIVE_STATUSES],
    );
    return r.rows[0] ? normalise(r.rows[0]) : undefined;
  };

  return {
    /** By its own id or the id of any wallet bundle inside it. */
    find: (chainId: number, id: string) => findIn(db, chainId, id),

    async bundlesOf(chainId: number, metaTxnId: string): Promise<BundleRow[]> {
      const r = await db.query<BundleRow>(
        'SELECT bundle_id, meta_txn_id, wallet, nonce_space::text AS nonce_space, nonce::text AS nonce FROM meta_txn_bundles WHERE chain_id = $1 AND meta_txn_id = $2 ORDER BY bundle_id',
        [chainId, metaTxnId],
      );
      return r.rows;
    },

    /**
     * Inserts the meta-transaction and its bundles atomically. Returns the existing row instead when any
     * of its ids is already known (the same bundle sent twice is one meta-transaction); throws
     * NonceTaken when another live meta-transaction holds one of its nonces.
     */
    async insert(m: NewMetaTxn): Promise<{ row: MetaTxnRow; created: boolean }> {
      return db.transaction(async (tx) => {
        // Serialises intake per chain so two concurrent sends of one nonce cannot both pass the check.
        await tx.query('SELECT pg_advisory_xact_lock(7250001, $1::int)', [m.chainId % 2_000_000_000]);
        for (const id of [m.id, ...m.bundles.map((b) => b.id)]) {
          const existing = await findIn(tx, m.chainId, id);
          if (existing && existing.status !== 'DROPPED') return { row: existing, created: false };
        }
        for (const b of m.bundles) {
          const holder = await holderIn(tx, m.chainId, b.wallet, b.space.toString(), b.nonce.toString());
          if (holder) throw new NonceTaken(b.wallet, b.space, b.nonce, holder.id);
        }
        // A DROPPED meta-transaction sent again starts over under the same id.
        await tx.query('DELETE FROM meta_txn_bundles WHERE chain_id = $1 AND meta_txn_id = $2', [m.chainId, m.id]);
        await tx.query('DELETE FROM meta_txns WHERE chain_id = $1 AND id = $2', [m.chainId, m.id]);
        const r = await tx.query<Record<string, unknown>>(
          `INSERT INTO meta_txns (chain_id, id, project_id, wallet, entrypoint, input, status, gas_limit, gas_estimated, sponsored, sponsor_id, fee_token, fee_value)
           VALUES ($1, $2, $3, $4, $5, $6, 'QUEUED', $7, $8, $9, $10, $11, $12) RETURNING *`,
          [m.chainId, m.id, m.projectId, m.wallet, m.entrypoint, m.input, m.gasLimit.toString(), m.gasEstimated.toString(), m.sponsored, m.sponsorId, m.feeToken, m.feeValue?.toString() ?? null],
        );
        for (const b of m.bundles) {
          await tx.query(
            `INSERT INTO meta_txn_bundles (chain_id, bundle_id, meta_txn_id, wallet, nonce_space, nonce) VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (chain_id, bundle_id) DO UPDATE SET meta_txn_id = EXCLUDED.meta_txn_id, wallet = EXCLUDED.wallet,
               nonce_space = EXCLUDED.nonce_space, nonce = EXCLUDED.nonce`,
            [m.chainId, b.id, m.id, b.wallet, b.space.toString(), b.nonce.toString()],
          );
        }
        return { row: normalise(r.rows[0]), created: true };
      });
    },

    /** Nonces of live meta-transactions for one wallet and space at or above `from`, ascending. */
    async liveNonces(chainId: number, wallet: Address, space: bigint, from: bigint): Promise<bigint[]> {
      const r = await db.query<{ nonce: string }>(
        `SELECT b.nonce::text AS nonce FROM meta_txn_bundles b JOIN meta_txns m ON m.chain_id = b.chain_id AND m.id = b.meta_txn_id
         WHERE b.chain_id = $1 AND b.wallet = $2 AND b.nonce_space = $3 AND b.nonce >= $4 AND m.status = ANY($5)
         ORDER BY b.nonce`,
        [chainId, wallet.toLowerCase(), space.toString(), from.toString(), LIVE_STATUSES],
      );
      return r.rows.map((x) => BigInt(x.nonce));
    },

    /** The live meta-transaction holding a wallet's nonce, if any (the predecessor a bundle waits for). */
    holderOf: (chainId: number, wallet: string, space: string, nonce: string) => holderIn(db, chainId, wallet, space, nonce),

    async queued(chainId: number, limit: number): Promise<MetaTxnRow[]> {
      const r = await db.query<Record<string, unknown>>(
        `SELECT * FROM meta_txns WHERE chain_id = $1 AND status = 'QUEUED' AND next_attempt_at <= now() ORDER BY queued_at, id LIMIT $2`,
        [chainId, limit],
      );
      return r.rows.map(normalise);
    },

    async byProject(projectId: number, chainId: number, offset: number, limit: number, statuses?: string[]): Promise<MetaTxnRow[]> {
      const r = await db.query<Record<string, unknown>>(
        `SELECT * FROM meta_txns WHERE project_id = $1 AND chain_id = $2 AND ($5::text[] IS NULL OR status = ANY($5))
         ORDER BY queued_at DESC, id OFFSET $3 LIMIT $4`,
        [projectId, chainId, offset, limit, statuses ?? null],
      );
      return r.rows.map(normalise);
    },

    async setStatus(q: Queryable, chainId: number, id: string, patch: Partial<Pick<MetaTxnRow, 'status' | 'revert_reason'>> & Record<string, unknown>) {
      const keys = Object.keys(patch);
      const sets = keys.map((k, i) => `${k} = $${i + 3}`).join(', ');
      await q.query(`UPDATE meta_txns SET ${sets}, updated_at = now() WHERE chain_id = $1 AND id = $2`, [chainId, id, ...keys.map((k) => patch[k])]);
    },
  };
}
export type MetaTxnRepo = ReturnType<typeof metaTxnRepo>;
