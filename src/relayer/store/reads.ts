import type { Address } from 'viem';
import { prepared, type Db, type Queryable } from '../../store/db.ts';
import { KeyGroups } from '../../util/key-groups.ts';
import { LIVE_IN } from '../live.ts';
import { normalise, type BundleRow, type MetaTxnRow } from '../meta-txn-rows.ts';

/*
 * The reads of meta_txns and meta_txn_bundles: look-ups by id (grouped across callers), the queue the
 * dispatcher reads, the slots the sweep settles, and the lists the API and the console page through.
 * Apart from the writes (store/writes.ts) so the tables' one writer stays a file a reader can hold in
 * their head; a read here never changes a row.
 */

/** Not claimed by another process than the one in parameter $3 (or its claim ran out). */
export const CLAIMABLE_BY_3 = '(claimed_until IS NULL OR claimed_until < now() OR claimed_by = $3)';

/** The row each asked id is ($3, of chain $2, asked as $1), by its own id or the id of a bundle inside it: at most one each. */
export const FIND_MANY_SQL = prepared(`SELECT u.i AS asked, m.* FROM unnest($1::int[], $2::bigint[], $3::text[]) AS u(i, chain, id)
   CROSS JOIN LATERAL (
     SELECT * FROM meta_txns y WHERE y.chain_id = u.chain AND y.id = u.id
     UNION ALL
     SELECT z.* FROM meta_txn_bundles b JOIN meta_txns z ON z.chain_id = b.chain_id AND z.id = b.meta_txn_id
      WHERE b.chain_id = u.chain AND b.bundle_id = u.id AND b.meta_txn_id <> u.id
     LIMIT 1) m`);

/** What the relayer reads of its meta-transactions (MetaTxnRepo's reads). */
export interface MetaTxnReads {
  /** By its own id or the id of any wallet bundle inside it. */
  find(chainId: number, id: string): Promise<MetaTxnRow | undefined>;
  /** The bundles of many meta-transactions at once, by meta-transaction id. */
  bundlesOfMany(chainId: number, ids: string[], q?: Queryable): Promise<Map<string, BundleRow[]>>;
  bundlesOf(chainId: number, metaTxnId: string): Promise<BundleRow[]>;
  /** Nonces of live meta-transactions for one wallet and space at or above `from`, ascending. */
  liveNonces(chainId: number, wallet: Address, space: bigint, from: bigint): Promise<bigint[]>;
  /** Live holders of many (wallet, space, nonce) at once, keyed `wallet:space:nonce`. */
  holdersOf(chainId: number, keys: { wallet: string; space: string; nonce: string }[]): Promise<Map<string, MetaTxnRow>>;
  /** The covers of the meta-transactions a slot carries (engine/cover-ceiling.ts bounds its replacements by them). */
  coversAtSlot(chainId: number, sender: string, nonce: number): Promise<Pick<MetaTxnRow, 'cover_wei' | 'exposure_wei' | 'fee_final'>[]>;
  /** Meta-transactions carried by the given sender slots (several per slot when batched). */
  atSlots(q: Queryable, chainId: number, slots: { sender: string; nonce: number }[]): Promise<MetaTxnRow[]>;
  /** Meta-transactions waiting to be sent and sent but not mined (the queue gauge, RuntimeStatus, the console). */
  depth(chainId: number): Promise<{ queued: number; sent: number }>;
  /** Queued meta-transactions due now, leaving out those another process has claimed. */
  queued(chainId: number, limit: number, owner?: string): Promise<MetaTxnRow[]>;
  /** A project's meta-transactions, newest first; `sponsoredOnly`: those a sponsorship paid for. */
  byProject(projectId: number, chainId: number, offset: number, limit: number, statuses?: string[], sponsoredOnly?: boolean): Promise<MetaTxnRow[]>;
  /** The meta-transaction each of these chain transactions carried (the indexer's Transaction.metaTxnID). */
  idsByTxnHash(chainId: number, hashes: string[]): Promise<Map<string, string>>;
  /** The chain transactions that carried these meta-transactions (ids or bundle ids, bare), where one was sent. */
  txnHashesOf(chainId: number, ids: string[]): Promise<string[]>;
}

export function metaTxnReads(db: Db): MetaTxnReads {
  /** The row each (chain, id) is, by its own id or a bundle's, in one statement, one asked or many. */
  const findMany = async (asked: ReadonlyArray<{ chainId: number; id: string }>): Promise<Array<MetaTxnRow | undefined>> => {
    const r = await db.query<Record<string, unknown> & { asked: number }>(FIND_MANY_SQL, [asked.map((_, i) => i), asked.map((x) => x.chainId), asked.map((x) => x.id)]);
    const out: Array<MetaTxnRow | undefined> = asked.map(() => undefined);
    for (const { asked: i, ...row } of r.rows) out[Number(i)] = normalise(row);
    return out;
  };
  // Look-ups of many callers at once (every SendMetaTxn asks first, and every GetMetaTxnReceipt poll): one
  // runs at once when none is under way, those asked meanwhile go together in the next statement. Each
  // is answered by a read begun after it was asked.
  const finds = new KeyGroups<{ chainId: number; id: string }, MetaTxnRow | undefined, never>({
    keys: () => [],
    one: async (x) => (await findMany([x]))[0],
    many: async (asked) => (await findMany(asked)).map((value) => ({ ok: true, value })),
    size: 64,
    running: db.kind === 'pglite' ? 1 : 2,
  });

  /** The bundles of many meta-transactions at once, by meta-transaction id. */
  const bundlesOfMany = async (chainId: number, ids: string[], q: Queryable = db): Promise<Map<string, BundleRow[]>> => {
    const out = new Map<string, BundleRow[]>(ids.map((id) => [id, []]));
    if (ids.length === 0) return out;
    const r = await q.query<BundleRow>(
      prepared('SELECT bundle_id, meta_txn_id, wallet, nonce_space::text AS nonce_space, nonce::text AS nonce FROM meta_txn_bundles WHERE chain_id = $1 AND meta_txn_id = ANY($2) ORDER BY bundle_id'),
      [chainId, ids],
    );
    for (const b of r.rows) out.get(b.meta_txn_id)?.push(b);
    return out;
  };

  return {
    /** By its own id or the id of any wallet bundle inside it. */
    find: (chainId: number, id: string) => finds.run({ chainId, id }),

    bundlesOfMany,

    async bundlesOf(chainId: number, metaTxnId: string): Promise<BundleRow[]> {
      return (await bundlesOfMany(chainId, [metaTxnId])).get(metaTxnId)!;
    },

    /** Nonces of live meta-transactions for one wallet and space at or above `from`, ascending. */
    async liveNonces(chainId: number, wallet: Address, space: bigint, from: bigint): Promise<bigint[]> {
      const r = await db.query<{ nonce: string }>(
        `SELECT b.nonce::text AS nonce FROM meta_txn_bundles b JOIN meta_txns m ON m.chain_id = b.chain_id AND m.id = b.meta_txn_id
         WHERE b.chain_id = $1 AND b.wallet = $2 AND b.nonce_space = $3 AND b.nonce >= $4 AND m.status IN ${LIVE_IN}
         ORDER BY b.nonce`,
        [chainId, wallet.toLowerCase(), space.toString(), from.toString()],
      );
      return r.rows.map((x) => BigInt(x.nonce));
    },

    /** Live holders of many (wallet, space, nonce) at once, keyed `wallet:space:nonce`. */
    async holdersOf(chainId: number, keys: { wallet: string; space: string; nonce: string }[]): Promise<Map<string, MetaTxnRow>> {
      const out = new Map<string, MetaTxnRow>();
      if (keys.length === 0) return out;
      const r = await db.query<Record<string, unknown> & { k: string }>(
        `SELECT b.wallet || ':' || b.nonce_space::text || ':' || b.nonce::text AS k, m.*
         FROM unnest($2::text[], $3::numeric[], $4::numeric[]) AS q(wallet, space, nonce)
         JOIN meta_txn_bundles b ON b.chain_id = $1 AND b.wallet = q.wallet AND b.nonce_space = q.space AND b.nonce = q.nonce
         JOIN meta_txns m ON m.chain_id = b.chain_id AND m.id = b.meta_txn_id
         WHERE m.status IN ${LIVE_IN}`,
        [chainId, keys.map((k) => k.wallet), keys.map((k) => k.space), keys.map((k) => k.nonce)],
      );
      for (const row of r.rows) {
        const { k, ...rest } = row;
        out.set(k, normalise(rest));
      }
      return out;
    },

    /** The covers of the meta-transactions a slot carries (engine/cover-ceiling.ts bounds its replacements by them). */
    async coversAtSlot(chainId: number, sender: string, nonce: number): Promise<Pick<MetaTxnRow, 'cover_wei' | 'exposure_wei' | 'fee_final'>[]> {
      const q = prepared(
        `SELECT cover_wei::text AS cover_wei, exposure_wei::text AS exposure_wei, fee_final FROM meta_txns WHERE chain_id = $1 AND sender = $2 AND txn_nonce = $3 AND status = 'SENT'`,
      );
      return (await db.query<{ cover_wei: string | null; exposure_wei: string | null; fee_final: boolean | null }>(q, [chainId, sender, nonce])).rows;
    },

    /** Meta-transactions carried by the given sender slots (several per slot when batched). */
    async atSlots(q: Queryable, chainId: number, slots: { sender: string; nonce: number }[]): Promise<MetaTxnRow[]> {
      if (slots.length === 0) return [];
      const r = await q.query<Record<string, unknown>>(
        `SELECT m.* FROM meta_txns m JOIN unnest($2::text[], $3::bigint[]) AS u(sender, nonce) ON m.sender = u.sender AND m.txn_nonce = u.nonce
         WHERE m.chain_id = $1 AND m.status <> 'QUEUED' ORDER BY m.batch_index NULLS FIRST, m.id`,
        [chainId, slots.map((x) => x.sender), slots.map((x) => x.nonce)],
      );
      return r.rows.map(normalise);
    },

    /** Meta-transactions waiting to be sent and sent but not mined (the queue gauge, RuntimeStatus, the console). */
    async depth(chainId: number): Promise<{ queued: number; sent: number }> {
      const r = await db.query<{ status: string; n: string }>(`SELECT status, count(*)::text AS n FROM meta_txns WHERE chain_id = $1 AND status IN ('QUEUED', 'SENT') GROUP BY status`, [chainId]);
      const n = (status: string) => Number(r.rows.find((x) => x.status === status)?.n ?? 0);
      return { queued: n('QUEUED'), sent: n('SENT') };
    },

    /** Queued meta-transactions due now, leaving out those another process has claimed. */
    async queued(chainId: number, limit: number, owner = ''): Promise<MetaTxnRow[]> {
      const r = await db.query<Record<string, unknown>>(
        `SELECT * FROM meta_txns WHERE chain_id = $1 AND status = 'QUEUED' AND next_attempt_at <= now() AND ${CLAIMABLE_BY_3}
         ORDER BY queued_at, id LIMIT $2`,
        [chainId, limit, owner],
      );
      return r.rows.map(normalise);
    },

    /** A project's meta-transactions, newest first; `sponsoredOnly`: those a sponsorship paid for. */
    async byProject(projectId: number, chainId: number, offset: number, limit: number, statuses?: string[], sponsoredOnly = false): Promise<MetaTxnRow[]> {
      const r = await db.query<Record<string, unknown>>(
        `SELECT * FROM meta_txns WHERE project_id = $1 AND chain_id = $2 AND ($5::text[] IS NULL OR status = ANY($5)) AND (NOT $6::boolean OR sponsored)
         ORDER BY queued_at DESC, id OFFSET $3 LIMIT $4`,
        [projectId, chainId, offset, limit, statuses ?? null, sponsoredOnly],
      );
      return r.rows.map(normalise);
    },

    /**
     * The meta-transaction each of these chain transactions carried (the indexer's Transaction.metaTxnID):
     * a batch carries several, and names the first queued. Hashes as the chain gives them (lower case).
     */
    async idsByTxnHash(chainId: number, hashes: string[]): Promise<Map<string, string>> {
      if (!hashes.length) return new Map();
      const r = await db.query<{ txn_hash: string; id: string }>(
        `SELECT DISTINCT ON (txn_hash) txn_hash, id FROM meta_txns WHERE chain_id = $1 AND txn_hash = ANY($2::text[]) ORDER BY txn_hash, queued_at, id`,
        [chainId, hashes],
      );
      return new Map(r.rows.map((x) => [x.txn_hash, x.id]));
    },

    /** The chain transactions that carried these meta-transactions (ids or bundle ids, bare), where one was sent. */
    async txnHashesOf(chainId: number, ids: string[]): Promise<string[]> {
      const r = await db.query<{ txn_hash: string }>(
        `SELECT DISTINCT txn_hash FROM meta_txns WHERE chain_id = $1 AND txn_hash IS NOT NULL
            AND (id = ANY($2::text[]) OR id IN (SELECT meta_txn_id FROM meta_txn_bundles WHERE chain_id = $1 AND bundle_id = ANY($2::text[])))`,
        [chainId, ids],
      );
      return r.rows.map((x) => x.txn_hash);
    },
  };
}
