import type { Address } from 'viem';
import type { Queryable } from '../../store/db.ts';
import { CONTRACT_COLUMNS, parseContractRow, type ContractRow } from './contract-store.ts';

export type DirectorySource = 'admin' | 'list';

export interface DirectoryEntry {
  chainId: number;
  address: Address;
  featureIndex: number;
  /** The stored contract record; absent until the contract was read or listed. */
  row?: ContractRow;
}

export interface DirectoryQuery {
  /** null: every chain. */
  chainIds: number[] | null;
  onlyFeatured: boolean;
  page: number;
  pageSize: number;
}

const prefixed = CONTRACT_COLUMNS.split(', ')
  .map((c) => `c.${c}`)
  .join(', ');

/**
 * The token directory: the curated contracts of each network, in `token_directory`. Entries come
 * from token list imports and from admins; an admin's removal stays recorded, so importing a list
 * again does not bring back what an admin took out (an admin's own add does).
 */
export function directoryStore(db: Queryable) {
  return {
    /** Adds entries. An admin's add revives a removed entry; a list's add never does, nor touches an existing one. */
    async add(chainId: number, addresses: Address[], source: DirectorySource, featureIndex?: number): Promise<number> {
      if (!addresses.length) return 0;
      const conflict =
        source === 'admin'
          ? `DO UPDATE SET removed = false, source = 'admin', updated_at = now(),
               feature_index = COALESCE($4::int, CASE WHEN token_directory.removed THEN 0 ELSE token_directory.feature_index END)`
          : 'DO NOTHING';
      const res = await db.query(
        `INSERT INTO token_directory (chain_id, address, source, feature_index)
         SELECT $1, a, $3, COALESCE($4::int, 0) FROM unnest($2::text[]) AS a
         ON CONFLICT (chain_id, address) ${conflict}`,
        [chainId, [...new Set(addresses)], source, featureIndex ?? null],
      );
      return res.rowCount ?? 0;
    },

    /** Takes entries out (kept as removed, see above); true if the contract was listed. */
    async remove(chainId: number, address: Address): Promise<boolean> {
      const res = await db.query<{ was_listed: boolean }>(
        `WITH prev AS (SELECT removed FROM token_directory WHERE chain_id = $1 AND address = $2)
         INSERT INTO token_directory (chain_id, address, source, removed) VALUES ($1, $2, 'admin', true)
         ON CONFLICT (chain_id, address) DO UPDATE SET removed = true, feature_index = 0, updated_at = now()
         RETURNING (SELECT NOT removed FROM prev) AS was_listed`,
        [chainId, address],
      );
      return res.rows[0]?.was_listed === true;
    },

    /** Sets the feature index of a listed contract; false if it is not listed. */
    async setFeatureIndex(chainId: number, address: Address, featureIndex: number): Promise<boolean> {
      const res = await db.query(`UPDATE token_directory SET feature_index = $3, updated_at = now() WHERE chain_id = $1 AND address = $2 AND NOT removed`, [chainId, address, featureIndex]);
      return (res.rowCount ?? 0) > 0;
    },

    /** Feature indexes of the listed ones among these contracts, by `chainId:address`. */
    async featureIndexes(pairs: { chainId: number; address: string }[]): Promise<Map<string, number>> {
      if (!pairs.length) return new Map();
      const res = await db.query<{ chain_id: string; address: string; feature_index: number }>(
        `SELECT d.chain_id, d.address, d.feature_index FROM token_directory d
          JOIN unnest($1::bigint[], $2::text[]) AS p(chain_id, address) ON p.chain_id = d.chain_id AND p.address = d.address
         WHERE NOT d.removed`,
        [pairs.map((p) => p.chainId), pairs.map((p) => p.address)],
      );
      return new Map(res.rows.map((r) => [`${Number(r.chain_id)}:${r.address}`, r.feature_index]));
    },

    /**
     * One page of the directory: featured entries first (lowest index first), then by chain and
     * name; the address breaks ties so pages neither repeat nor skip an entry.
     */
    async list(q: DirectoryQuery): Promise<{ entries: DirectoryEntry[]; more: boolean }> {
      const res = await db.query<Record<string, unknown>>(
        `SELECT d.chain_id AS d_chain_id, d.address AS d_address, d.feature_index AS d_feature_index,
                c.address IS NOT NULL AS has_row, ${prefixed}
           FROM token_directory d
           LEFT JOIN contracts c ON c.chain_id = d.chain_id AND c.address = d.address
          WHERE NOT d.removed
            AND ($1::bigint[] IS NULL OR d.chain_id = ANY($1::bigint[]))
            AND (NOT $2::boolean OR d.feature_index > 0)
          ORDER BY (d.feature_index = 0), d.feature_index, d.chain_id, lower(COALESCE(c.name, '')), d.address
          LIMIT $3 OFFSET $4`,
        [q.chainIds, q.onlyFeatured, q.pageSize + 1, q.page * q.pageSize],
      );
      const entries = res.rows.slice(0, q.pageSize).map((r) => ({
        chainId: Number(r.d_chain_id),
        address: r.d_address as Address,
        featureIndex: Number(r.d_feature_index),
        ...(r.has_row ? { row: parseContractRow(r) } : {}),
      }));
      return { entries, more: res.rows.length > q.pageSize };
    },

    /** Chains that have entries (featured ones, if asked). */
    async chainIds(onlyFeatured: boolean): Promise<number[]> {
      const res = await db.query<{ chain_id: string }>(`SELECT DISTINCT chain_id FROM token_directory WHERE NOT removed AND (NOT $1::boolean OR feature_index > 0) ORDER BY chain_id`, [onlyFeatured]);
      return res.rows.map((r) => Number(r.chain_id));
    },

    /** Every listed contract of a chain, for a refresh of the whole directory. */
    async addressesOn(chainId: number): Promise<Address[]> {
      const res = await db.query<{ address: Address }>(`SELECT address FROM token_directory WHERE chain_id = $1 AND NOT removed ORDER BY address`, [chainId]);
      return res.rows.map((r) => r.address);
    },
  };
}
export type DirectoryStore = ReturnType<typeof directoryStore>;
