import { prepared, type Db, type Queryable, type Tx } from '../../store/db.ts';
import type { MetaTxnRow, NewMetaTxn, SentMeta, SettledMeta, StatusCause, StatusHook } from '../meta-txn-rows.ts';
import { normalise } from '../meta-txn-rows.ts';
import { CLAIMABLE_BY_3 } from './reads.ts';

/*
 * Every statement that writes meta_txns and meta_txn_bundles, and nothing else: the tables' one writer
 * (test/layering.test.ts holds each relayer table to one). A status change is announced through the
 * status hook on the same transaction as the change (StatusHook: the events, the usage roll-up, the
 * debits), so whoever writes a status goes through here and cannot forget it. The intake groups
 * (store/intake-group.ts) decide what to insert; the rows themselves are written here.
 */

/** The rows and bundles of an intake group in one statement (insertGroupIn). */
/**
 * The channel an intake NOTIFYs, with the chain id, when it queued meta-transactions the process that
 * dispatches the chain does not hear of otherwise (another process of the fleet leads it, Dispatcher):
 * delivered with the intake's COMMIT, it wakes that dispatcher without a poll.
 */
export const QUEUED_CHANNEL = 'metarelay_queued';

const GROUP_INSERT_SQL = prepared(`WITH mt AS (
   INSERT INTO meta_txns (chain_id, id, project_id, wallet, entrypoint, input, status, gas_limit, gas_estimated, sponsored, sponsor_id, fee_token, fee_value,
     fee_payer, key_id, client_ip, "authorization", gas_price_priced, cover_wei, exposure_wei, client_net, fee_final)
   SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::bigint[], $10::boolean[],
     $11::bigint[], $12::text[], $13::numeric[], $14::text[], $15::bigint[], $16::text[], $17::text[], $18::numeric[], $19::numeric[], $26::numeric[], $27::text[], $28::boolean[])
   RETURNING *),
 b AS (
   INSERT INTO meta_txn_bundles (chain_id, bundle_id, meta_txn_id, wallet, nonce_space, nonce)
   SELECT * FROM unnest($20::bigint[], $21::text[], $22::text[], $23::text[], $24::numeric[], $25::numeric[])
   ON CONFLICT (chain_id, bundle_id) DO UPDATE SET meta_txn_id = EXCLUDED.meta_txn_id, wallet = EXCLUDED.wallet,
     nonce_space = EXCLUDED.nonce_space, nonce = EXCLUDED.nonce, live = TRUE),
nt AS (SELECT count(pg_notify('${QUEUED_CHANNEL}', c::text)) AS n FROM unnest($29::bigint[]) AS c)
 SELECT mt.* FROM mt, nt`);

/** One bundle id once (a call may carry the same bundle twice; one upsert cannot touch a row twice). */
export const distinctBundles = (m: NewMetaTxn) => [...new Map(m.bundles.map((b) => [b.id, b])).values()];

/**
 * The rows and bundles of new meta-transactions in one statement (an intake group's), in the order given;
 * `notify`: the chains whose dispatchers it NOTIFYs (QUEUED_CHANNEL) with the COMMIT.
 */
export async function insertRows(tx: Queryable, ms: readonly NewMetaTxn[], notify: readonly number[] = []): Promise<MetaTxnRow[]> {
  const col = <V>(f: (m: NewMetaTxn) => V) => ms.map(f);
  const bundles = ms.flatMap((m) => distinctBundles(m).map((b) => ({ m, b })));
  const r = await tx.query<Record<string, unknown>>(GROUP_INSERT_SQL, [
    col((m) => m.chainId),
    col((m) => m.id),
    col((m) => m.projectId),
    col((m) => m.wallet),
    col((m) => m.entrypoint),
    col((m) => m.input),
    col((m) => m.status ?? 'QUEUED'),
    col((m) => m.gasLimit.toString()),
    col((m) => m.gasEstimated.toString()),
    col((m) => m.sponsored),
    col((m) => m.sponsorId),
    col((m) => m.feeToken),
    col((m) => m.feeValue?.toString() ?? null),
    col((m) => m.feePayer?.toLowerCase() ?? null),
    col((m) => m.keyId),
    col((m) => m.clientIp),
    col((m) => (m.authorization ? JSON.stringify(m.authorization) : null)),
    col((m) => m.gasPricePriced?.toString() ?? null),
    col((m) => m.coverWei?.toString() ?? null),
    bundles.map(({ m }) => m.chainId),
    bundles.map(({ b }) => b.id),
    bundles.map(({ m }) => m.id),
    bundles.map(({ b }) => b.wallet),
    bundles.map(({ b }) => b.space.toString()),
    bundles.map(({ b }) => b.nonce.toString()),
    col((m) => m.exposureWei?.toString() ?? null),
    col((m) => m.clientNet ?? null),
    col((m) => m.feeFinal ?? null),
    notify,
  ]);
  const byId = new Map(r.rows.map((x) => [`${x.chain_id}:${x.id}`, normalise(x)]));
  return ms.map((m) => byId.get(`${m.chainId}:${m.id}`)!);
}

/** A DROPPED meta-transaction sent again starts over under the same id: its old row and bundles go first. */
export async function deleteDropped(tx: Queryable, chainId: number, id: string): Promise<void> {
  await tx.query('DELETE FROM meta_txn_bundles WHERE chain_id = $1 AND meta_txn_id = $2', [chainId, id]);
  await tx.query('DELETE FROM meta_txns WHERE chain_id = $1 AND id = $2', [chainId, id]);
}

/** Deletes these meta-transactions and their bundles (a prune's batch, whose other rows went first). */
export async function deleteMetaTxns(tx: Queryable, chainIds: number[], ids: string[]): Promise<{ metaTxns: number; bundles: number }> {
  const pairs = 'SELECT * FROM unnest($1::bigint[], $2::text[]) AS u(chain_id, id)';
  const b = await tx.query(`DELETE FROM meta_txn_bundles WHERE (chain_id, meta_txn_id) IN (${pairs})`, [chainIds, ids]);
  const m = await tx.query(`DELETE FROM meta_txns WHERE (chain_id, id) IN (${pairs})`, [chainIds, ids]);
  return { metaTxns: m.rowCount, bundles: b.rowCount };
}

/** What the relayer changes of its meta-transactions after intake (MetaTxnRepo's writes). */
export interface MetaTxnWrites {
  /** Patches one meta-transaction; with `from`, only while its status is still that. Says whether it changed. */
  setStatus(q: Queryable, chainId: number, id: string, patch: Partial<Pick<MetaTxnRow, 'status' | 'revert_reason'>> & Record<string, unknown>, from?: string, cause?: StatusCause): Promise<boolean>;
  /** QUEUED meta-transactions signed into their senders' slots, marked SENT on the caller's transaction. */
  markSent(q: Queryable, chainId: number, sent: readonly SentMeta[], at: Date): Promise<void>;
  /** Points the meta-transactions of a sender's slot at another attempt's hash, announcing it. */
  setSlotHash(q: Queryable, chainId: number, sender: string, nonce: number, hash: string, cause: StatusCause, clearStalled?: boolean): Promise<void>;
  /** Sets many meta-transactions from their receipts in one statement. */
  settleMany(q: Queryable, chainId: number, items: SettledMeta[]): Promise<void>;
  /** The meta-transactions of these slots are final (past the confirmation depth). */
  confirmAtSlots(q: Queryable, chainId: number, slots: { sender: string; nonce: number }[]): Promise<void>;
  /** Why the meta-transactions of a slot cannot be replaced now (the fee cap), as RuntimeStatus shows them. */
  setStalledAtSlot(chainId: number, sender: string, nonce: number, reason: string): Promise<void>;
  /** Locks these meta-transactions for signing (those another transaction holds skipped); the ids of those still QUEUED. */
  lockQueued(tx: Tx, chainId: number, ids: string[]): Promise<Set<string>>;
  /** Puts queued meta-transactions out of the dispatcher's reads for `ms` (they wait on a predecessor). */
  defer(chainId: number, ids: string[], ms: number): Promise<void>;
  /** Claims queued meta-transactions for `owner` for `seconds`; returns the ids it got. */
  claim(chainId: number, ids: string[], owner: string, seconds: number): Promise<Set<string>>;
}

/** The writes on `db`; `onStatus` hears of every status change, on the transaction that made it. */
export function metaTxnWrites(db: Db, onStatus?: StatusHook): MetaTxnWrites {
  const writes: MetaTxnWrites = {
    /** Patches one meta-transaction; with `from`, only while its status is still that. Says whether it changed. */
    async setStatus(
      q: Queryable,
      chainId: number,
      id: string,
      patch: Partial<Pick<MetaTxnRow, 'status' | 'revert_reason'>> & Record<string, unknown>,
      from?: string,
      cause?: StatusCause,
    ): Promise<boolean> {
      const hook = patch.status !== undefined ? onStatus : undefined;
      // Called on the database itself: the change and its event still go in one transaction.
      if (hook && 'transaction' in q) return db.transaction((tx) => writes.setStatus(tx, chainId, id, patch, from, cause));
      const keys = Object.keys(patch);
      const sets = keys.map((k, i) => `${k} = $${i + 4}`).join(', ');
      const r = await q.query<Record<string, unknown>>(`UPDATE meta_txns SET ${sets}, updated_at = now() WHERE chain_id = $1 AND id = $2 AND ($3::text IS NULL OR status = $3) RETURNING *`, [
        chainId,
        id,
        from ?? null,
        ...keys.map((k) => patch[k]),
      ]);
      if (hook && r.rows.length) await hook(q, r.rows.map(normalise), cause);
      return r.rows.length > 0;
    },

    /**
     * QUEUED meta-transactions signed into their senders' slots, marked SENT in one statement on the
     * caller's transaction (which holds their row locks: lockQueued), and announced in one hook call.
     */
    async markSent(q: Queryable, chainId: number, sent: readonly SentMeta[], at: Date): Promise<void> {
      if (sent.length === 0) return;
      const r = await q.query<Record<string, unknown>>(
        prepared(`UPDATE meta_txns m SET status = 'SENT', sender = u.sender, txn_nonce = u.nonce, txn_hash = u.hash, batch_index = u.batch_index,
           gas_limit = u.gas_limit, sent_at = $8, stalled = NULL, updated_at = now()
         FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::int[], $7::bigint[]) AS u(id, sender, nonce, hash, batch_index, gas_limit)
         WHERE m.chain_id = $1 AND m.id = u.id RETURNING m.*`),
        [chainId, sent.map((x) => x.id), sent.map((x) => x.sender), sent.map((x) => x.nonce), sent.map((x) => x.hash), sent.map((x) => x.batchIndex), sent.map((x) => x.gasLimit), at],
      );
      // Every one is this transaction's to mark (locked QUEUED): one missing rolls the signing back.
      if (r.rows.length !== sent.length) throw new Error(`markSent: ${sent.length - r.rows.length} of ${sent.length} meta-transactions not found`);
      // In the order they were signed (slot, then place in the batch): their events are written in it.
      const order = new Map(sent.map((x, i) => [x.id, i]));
      const rows = r.rows.map(normalise).sort((a, b) => order.get(a.id)! - order.get(b.id)!);
      if (onStatus && rows.length) await onStatus(q, rows, undefined, { before: 'QUEUED' });
    },

    /** Points the meta-transactions of a sender's slot at another attempt's hash (a replacement, or back after one was refused), announcing it. */
    async setSlotHash(q: Queryable, chainId: number, sender: string, nonce: number, hash: string, cause: StatusCause, clearStalled = false): Promise<void> {
      const r = await q.query<Record<string, unknown>>(
        `UPDATE meta_txns SET txn_hash = $4, stalled = CASE WHEN $5 THEN NULL ELSE stalled END, updated_at = now()
         WHERE chain_id = $1 AND sender = $2 AND txn_nonce = $3 AND status = 'SENT' AND txn_hash IS DISTINCT FROM $4 RETURNING *`,
        [chainId, sender, nonce, hash, clearStalled],
      );
      if (onStatus && r.rows.length) await onStatus(q, r.rows.map(normalise), cause);
    },

    /** Sets many meta-transactions from their receipts in one statement. */
    async settleMany(q: Queryable, chainId: number, items: SettledMeta[]) {
      if (items.length === 0) return;
      const col = <K extends keyof SettledMeta>(k: K) => items.map((x) => x[k]);
      const r = await q.query<Record<string, unknown>>(
        `UPDATE meta_txns m SET status = u.status, revert_reason = u.reason, txn_hash = u.hash, block_number = u.block, gas_used = u.gas_used,
           gas_price = u.gas_price, receipt = u.receipt, confirmed = u.confirmed, fee_received = u.fee_received, shortfall_wei = u.shortfall_wei,
           l1_fee_wei = u.l1_fee_wei, mined_at = now(), stalled = NULL, updated_at = now()
         FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::numeric[], $8::numeric[], $9::text[], $10::boolean[], $11::numeric[], $12::numeric[], $13::numeric[])
           AS u(id, status, reason, hash, block, gas_used, gas_price, receipt, confirmed, fee_received, shortfall_wei, l1_fee_wei)
         WHERE m.chain_id = $1 AND m.id = u.id RETURNING m.*`,
        [
          chainId,
          col('id'),
          col('status'),
          col('reason'),
          col('hash'),
          col('block'),
          col('gasUsed'),
          col('gasPrice'),
          col('receipt'),
          col('confirmed'),
          col('feeReceived'),
          col('shortfallWei'),
          col('l1FeeWei'),
        ],
      );
      await onStatus?.(q, r.rows.map(normalise));
    },

    /** The meta-transactions of these slots are final (past the confirmation depth). */
    async confirmAtSlots(q: Queryable, chainId: number, slots: { sender: string; nonce: number }[]) {
      await q.query(
        `UPDATE meta_txns m SET confirmed = true, updated_at = now() FROM unnest($2::text[], $3::bigint[]) AS u(sender, nonce)
         WHERE m.chain_id = $1 AND m.sender = u.sender AND m.txn_nonce = u.nonce`,
        [chainId, slots.map((x) => x.sender), slots.map((x) => x.nonce)],
      );
    },

    /** Why the meta-transactions of a slot cannot be replaced now (the fee cap), as RuntimeStatus shows them. */
    async setStalledAtSlot(chainId: number, sender: string, nonce: number, reason: string) {
      await db.query('UPDATE meta_txns SET stalled = $4, updated_at = now() WHERE chain_id = $1 AND sender = $2 AND txn_nonce = $3 AND stalled IS DISTINCT FROM $4', [chainId, sender, nonce, reason]);
    },

    /**
     * Locks these meta-transactions for signing; the ids of those still QUEUED. One another transaction
     * holds is skipped, not waited for (SKIP LOCKED): it is being signed or written elsewhere, and if
     * not, the next pass takes it; a frozen holder (a process stopped mid-transaction) would otherwise
     * stall every dispatcher that planned it until lock_timeout, pass after pass (issue #53).
     */
    async lockQueued(tx: Tx, chainId: number, ids: string[]): Promise<Set<string>> {
      const r = await tx.query<{ id: string }>(`SELECT id FROM meta_txns WHERE chain_id = $1 AND id = ANY($2) AND status = 'QUEUED' ORDER BY id FOR UPDATE SKIP LOCKED`, [chainId, ids]);
      return new Set(r.rows.map((x) => x.id));
    },

    /** Puts queued meta-transactions out of the dispatcher's reads for `ms` (they wait on a predecessor). */
    async defer(chainId: number, ids: string[], ms: number) {
      if (ids.length === 0) return;
      await db.query(`UPDATE meta_txns SET next_attempt_at = now() + make_interval(secs => $3) WHERE chain_id = $1 AND id = ANY($2) AND status = 'QUEUED'`, [chainId, ids, ms / 1000]);
    },

    /** Claims queued meta-transactions for `owner` for `seconds`; returns the ids it got. */
    async claim(chainId: number, ids: string[], owner: string, seconds: number): Promise<Set<string>> {
      if (ids.length === 0) return new Set();
      const r = await db.query<{ id: string }>(
        `UPDATE meta_txns SET claimed_by = $3, claimed_until = now() + make_interval(secs => $4)
         WHERE chain_id = $1 AND id = ANY($2) AND status = 'QUEUED' AND ${CLAIMABLE_BY_3}
         RETURNING id`,
        [chainId, ids, owner, seconds],
      );
      return new Set(r.rows.map((x) => x.id));
    },
  };
  return writes;
}
