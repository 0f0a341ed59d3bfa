import { parseTransaction, serializeTransaction, type Address, type Hex, type PublicClient, type SignedAuthorization, type TransactionSerializable } from 'viem';
import { keccak256, signHash } from '../../chain/evm-crypto.ts';
import type { ChainHead } from '../../chain/head.ts';
import { signedAuthorization, type Authorization } from '../intake/authorization.ts';
import { prepared, type Db, type Queryable } from '../../store/db.ts';
import type { Fees } from './gas-price.ts';
import { classifySendError, type SendFailure } from '../../chain/node-errors.ts';
import { errorText } from '../../util/error.ts';
import { signingKeyOf, type SenderAccount } from './sender-pool.ts';

/** One signed transaction: an attempt at a (sender, nonce) slot. Replacements are further attempts. */
export interface Attempt {
  id: number;
  sender: Address;
  nonce: number;
  kind: 'meta' | 'batch' | 'filler';
  meta_txn_id: string | null;
  hash: Hex;
  raw: Hex;
  status: 'PENDING' | 'MINED' | 'CONFIRMED' | 'REPLACED' | 'FAILED';
  to_address: Address;
  data: Hex;
  value: bigint;
  gas_limit: bigint;
  fees: Fees;
  broadcast_block: number | null;
  broadcast_at: Date | null;
  mined_block: number | null;
  mined_block_hash: string | null;
}

export interface Unsigned {
  nonce: number;
  to: Address;
  data: Hex;
  value: bigint;
  gas: bigint;
  fees: Fees;
  /** EIP-7702: sign a type-4 transaction carrying this authorization (a wire one, or the list of a signed attempt). */
  authorization?: Authorization | readonly SignedAuthorization[];
}

/** The authorization list of a signed attempt (a replacement keeps it); none for other types. */
export function authorizationsOf(raw: Hex): readonly SignedAuthorization[] | undefined {
  if (!raw.startsWith('0x04')) return undefined;
  return parseTransaction(raw).authorizationList;
}

export async function sign(account: SenderAccount, chainId: number, u: Unsigned): Promise<{ raw: Hex; hash: Hex }> {
  const base = { chainId, nonce: u.nonce, to: u.to, data: u.data, value: u.value, gas: u.gas };
  if (u.authorization) {
    const authorizationList = Array.isArray(u.authorization) ? u.authorization : [signedAuthorization(u.authorization as Authorization)];
    // A type-4 transaction has EIP-1559 fees; on a legacy-priced chain both are the gas price.
    const [maxFeePerGas, maxPriorityFeePerGas] = u.fees.type === 'eip1559' ? [u.fees.maxFeePerGas, u.fees.maxPriorityFeePerGas] : [u.fees.gasPrice, u.fees.gasPrice];
    const raw = await signTransaction(account, { ...base, type: 'eip7702', maxFeePerGas, maxPriorityFeePerGas, authorizationList });
    return { raw, hash: keccak256(raw) };
  }
  const raw = await signTransaction(
    account,
    u.fees.type === 'eip1559'
      ? { ...base, type: 'eip1559', maxFeePerGas: u.fees.maxFeePerGas, maxPriorityFeePerGas: u.fees.maxPriorityFeePerGas }
      : { ...base, type: 'legacy', gasPrice: u.fees.gasPrice },
  );
  return { raw, hash: keccak256(raw) };
}

/**
 * What the account's signTransaction does (serialize, hash, sign, serialize with the signature), with
 * the hash and the signature in WebAssembly (chain/evm-crypto.ts): the same bytes, a third of the time.
 */
async function signTransaction(account: SenderAccount, tx: TransactionSerializable): Promise<Hex> {
  const key = signingKeyOf(account);
  return key ? serializeTransaction(tx, signHash(keccak256(serializeTransaction(tx)), key)) : account.signTransaction(tx);
}

/** Records a signed attempt; always before it is broadcast, so a crash never leaves an unknown transaction. */
/**
 * Records a signed attempt. The same transaction signed again after the node refused it (same nonce, fees
 * and call: the same hash, e.g. while the fees are held at a cap or a cover's ceiling) takes the refused
 * row back rather than failing on its hash; a live attempt with that hash is still an error.
 */
export type NewAttempt = { sender: Address; kind: Attempt['kind']; metaTxnId: string | null; hash: Hex; raw: Hex; head: number } & Unsigned;

export async function insertAttempt(q: Queryable, chainId: number, a: NewAttempt) {
  await insertAttempts(q, chainId, [a]);
}

/** insertAttempt for several attempts in one statement (a sender's units of one dispatch pass). */
export async function insertAttempts(q: Queryable, chainId: number, list: readonly NewAttempt[]) {
  if (list.length === 0) return;
  const col = <V>(f: (a: NewAttempt) => V) => list.map(f);
  const r = await q.query<{ hash: string }>(
    prepared(`INSERT INTO relay_txs (chain_id, sender, nonce, meta_txn_id, kind, hash, raw, to_address, data, value, gas_limit, max_fee, max_priority_fee, gas_price, broadcast_block)
     SELECT $1::bigint, u.* FROM unnest($2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::numeric[], $11::bigint[],
       $12::numeric[], $13::numeric[], $14::numeric[], $15::bigint[]) AS u
     ON CONFLICT (chain_id, hash) DO UPDATE SET status = 'PENDING', error = NULL, broadcast_at = NULL, broadcast_block = EXCLUDED.broadcast_block,
       meta_txn_id = EXCLUDED.meta_txn_id, kind = EXCLUDED.kind
     WHERE relay_txs.status = 'FAILED'
     RETURNING hash`),
    [
      chainId,
      col((a) => a.sender),
      col((a) => a.nonce),
      col((a) => a.metaTxnId),
      col((a) => a.kind),
      col((a) => a.hash),
      col((a) => a.raw),
      col((a) => a.to.toLowerCase()),
      col((a) => a.data),
      col((a) => a.value.toString()),
      col((a) => a.gas.toString()),
      col((a) => (a.fees.type === 'eip1559' ? a.fees.maxFeePerGas.toString() : null)),
      col((a) => (a.fees.type === 'eip1559' ? a.fees.maxPriorityFeePerGas.toString() : null)),
      col((a) => (a.fees.type === 'legacy' ? a.fees.gasPrice.toString() : null)),
      col((a) => a.head),
    ],
  );
  if (r.rows.length < list.length) {
    const written = new Set(r.rows.map((x) => x.hash));
    const live = list.find((a) => !written.has(a.hash));
    throw new Error(`attempt ${live?.hash} is already recorded and live`);
  }
}

interface AttemptRow {
  id: string;
  sender: string;
  nonce: string;
  kind: Attempt['kind'];
  meta_txn_id: string | null;
  hash: string;
  raw: string;
  status: Attempt['status'];
  to_address: string | null;
  data: string | null;
  value: string;
  gas_limit: string;
  max_fee: string | null;
  max_priority_fee: string | null;
  gas_price: string | null;
  broadcast_block: string | null;
  broadcast_at: Date | string | null;
  mined_block: string | null;
  mined_block_hash: string | null;
}

const COLUMNS = `id::text AS id, sender, nonce::text AS nonce, kind, meta_txn_id, hash, raw, status, to_address, data, value::text AS value,
  gas_limit::text AS gas_limit, max_fee::text AS max_fee, max_priority_fee::text AS max_priority_fee, gas_price::text AS gas_price,
  broadcast_block::text AS broadcast_block, broadcast_at, mined_block::text AS mined_block, mined_block_hash`;

function toAttempt(r: AttemptRow): Attempt {
  const num = (x: string | null) => (x == null ? null : Number(x));
  return {
    id: Number(r.id),
    sender: r.sender as Address,
    nonce: Number(r.nonce),
    kind: r.kind,
    meta_txn_id: r.meta_txn_id,
    hash: r.hash as Hex,
    raw: r.raw as Hex,
    status: r.status,
    to_address: (r.to_address ?? '0x') as Address,
    data: (r.data ?? '0x') as Hex,
    value: BigInt(r.value),
    gas_limit: BigInt(r.gas_limit),
    fees: r.max_fee != null ? { type: 'eip1559', maxFeePerGas: BigInt(r.max_fee), maxPriorityFeePerGas: BigInt(r.max_priority_fee ?? '0') } : { type: 'legacy', gasPrice: BigInt(r.gas_price ?? '0') },
    broadcast_block: num(r.broadcast_block),
    broadcast_at: r.broadcast_at == null ? null : new Date(r.broadcast_at),
    mined_block: num(r.mined_block),
    mined_block_hash: r.mined_block_hash,
  };
}

/** Every attempt of the senders' open slots (not yet final), oldest first. */
export async function openAttempts(db: Db, chainId: number, senders: Address[]): Promise<Attempt[]> {
  const r = await db.query<AttemptRow>(`SELECT ${COLUMNS} FROM relay_txs WHERE chain_id = $1 AND sender = ANY($2) AND status IN ('PENDING', 'MINED') ORDER BY sender, nonce, id`, [chainId, senders]);
  return r.rows.map(toAttempt);
}

export type BroadcastResult = { ok: true; uncertain?: SendFailure } | { ok: false; kind: SendFailure; message: string };

/**
 * Sends a signed transaction. "Already known" is success; a transport failure is uncertain (the node may
 * have it): the block sweep looks the slot up before anything is signed again.
 */
export async function broadcast(client: PublicClient, raw: Hex): Promise<BroadcastResult> {
  try {
    await client.request({ method: 'eth_sendRawTransaction', params: [raw] });
    return { ok: true };
  } catch (err) {
    const kind = classifySendError(err);
    if (kind === 'known' || kind === 'transport') return { ok: true, uncertain: kind };
    // "Nonce too low" may be our own transaction, delivered by an earlier try whose answer was lost
    // (a timeout, then failover to another node) and already mined: only its hash can tell.
    if (kind === 'nonceTooLow') {
      const hash = keccak256(raw);
      const seen = await client.request({ method: 'eth_getTransactionByHash', params: [hash] }).catch(() => undefined);
      if (seen !== null) return { ok: true, uncertain: seen === undefined ? 'transport' : 'known' };
    }
    return { ok: false, kind, message: errorText(err).slice(0, 500) };
  }
}

/**
 * Marks attempts as having reached the node, at the head read now: the 3-block rule counts from when a
 * transaction was really sent, not from when the pass that signed it began.
 */
export async function markBroadcast(db: Db, head: ChainHead, chainId: number, hashes: Hex[]) {
  if (hashes.length === 0) return;
  const at = Number(await head.number());
  await db.query('UPDATE relay_txs SET broadcast_at = now(), broadcast_block = $3 WHERE chain_id = $1 AND hash = ANY($2)', [chainId, hashes, at]);
}

/** The error of an attempt already recorded with this hash (null: recorded without one); undefined when there is none. */
export async function attemptError(q: Queryable, chainId: number, hash: Hex): Promise<string | null | undefined> {
  const r = await q.query<{ error: string | null }>(prepared('SELECT error FROM relay_txs WHERE chain_id = $1 AND hash = $2'), [chainId, hash]);
  return r.rows.length ? r.rows[0].error : undefined;
}

/** A signed attempt the node refused: it does not exist on chain, so it is never watched again. */
export async function failAttempt(q: Queryable, chainId: number, hash: Hex, error: string) {
  await q.query(`UPDATE relay_txs SET status = 'FAILED', error = $3 WHERE chain_id = $1 AND hash = $2`, [chainId, hash, error]);
}

export interface InclusionStats {
  /** Slots mined in the window (fillers aside). */
  mined: number;
  /** Of those, mined within `blocks` blocks of their first broadcast. */
  within: number;
  blocks: number;
  windowSec: number;
}

/** How many of the transactions mined recently were included within `blocks` blocks of their first broadcast. */
export async function inclusionStats(db: Queryable, chainId: number, blocks = 3, windowSec = 3_600): Promise<InclusionStats> {
  const r = await db.query<{ mined: string; within: string }>(
    `SELECT count(*)::text AS mined, count(*) FILTER (WHERE w.mined_block - f.first <= $2)::text AS within
     FROM relay_txs w
     JOIN LATERAL (SELECT min(a.broadcast_block) AS first FROM relay_txs a
                   WHERE a.chain_id = w.chain_id AND a.sender = w.sender AND a.nonce = w.nonce AND a.status <> 'FAILED') f ON true
     WHERE w.chain_id = $1 AND w.status IN ('MINED', 'CONFIRMED') AND w.kind <> 'filler' AND w.created_at > now() - make_interval(secs => $3)`,
    [chainId, blocks, windowSec],
  );
  return { mined: Number(r.rows[0].mined), within: Number(r.rows[0].within), blocks, windowSec };
}

/** A slot's winner mined: the slot's other pending attempts were replaced by it, and it is MINED (CONFIRMED when already final). */
export async function markMined(q: Queryable, chainId: number, rows: { sender: Address; nonce: number; winner: string; final: boolean; block: number; blockHash: string }[]) {
  await q.query(
    `UPDATE relay_txs t SET status = 'REPLACED' FROM unnest($2::text[], $3::bigint[], $4::text[]) AS u(sender, nonce, winner)
     WHERE t.chain_id = $1 AND t.sender = u.sender AND t.nonce = u.nonce AND t.status = 'PENDING' AND t.hash <> u.winner`,
    [chainId, rows.map((x) => x.sender), rows.map((x) => x.nonce), rows.map((x) => x.winner)],
  );
  await q.query(
    `UPDATE relay_txs t SET status = u.status, mined_block = u.block, mined_block_hash = u.bhash
     FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[]) AS u(hash, status, block, bhash) WHERE t.chain_id = $1 AND t.hash = u.hash`,
    [chainId, rows.map((x) => x.winner), rows.map((x) => (x.final ? 'CONFIRMED' : 'MINED')), rows.map((x) => x.block), rows.map((x) => x.blockHash)],
  );
}

/** Another transaction used the slot's nonce: its pending attempts never ran. */
export async function failTaken(q: Queryable, chainId: number, sender: Address, nonce: number) {
  await q.query(`UPDATE relay_txs SET status = 'FAILED', error = 'nonce used by another transaction' WHERE chain_id = $1 AND sender = $2 AND nonce = $3 AND status = 'PENDING'`, [
    chainId,
    sender,
    nonce,
  ]);
}

/**
 * The sender's final (CONFIRMED) winners at `nonce` and above. A chain whose count is below one of them
 * lost it in a reorg deeper than the confirmations (or the node read is behind: the caller tells which).
 */
export async function confirmedFrom(q: Queryable, chainId: number, sender: Address, nonce: number): Promise<Attempt[]> {
  const r = await q.query<AttemptRow>(`SELECT ${COLUMNS} FROM relay_txs WHERE chain_id = $1 AND sender = $2 AND nonce >= $3 AND status = 'CONFIRMED' ORDER BY nonce, id`, [chainId, sender, nonce]);
  return r.rows.map(toAttempt);
}

/** The sender's highest final (CONFIRMED) nonce, or -1: the ledger is never rewound below it (a deep reorg re-broadcasts it instead). */
export async function highestFinalNonce(q: Queryable, chainId: number, sender: Address): Promise<number> {
  const r = await q.query<{ n: string | null }>(`SELECT max(nonce)::text AS n FROM relay_txs WHERE chain_id = $1 AND sender = $2 AND status = 'CONFIRMED'`, [chainId, sender]);
  return r.rows[0].n == null ? -1 : Number(r.rows[0].n);
}

/** Whether any attempt signed at the slot is still live or final (a nonce with one is never filled by a self-transfer). */
export async function slotHasAttempt(q: Queryable, chainId: number, sender: Address, nonce: number): Promise<boolean> {
  const r = await q.query(`SELECT 1 FROM relay_txs WHERE chain_id = $1 AND sender = $2 AND nonce = $3 AND status IN ('PENDING', 'MINED', 'CONFIRMED') LIMIT 1`, [chainId, sender, nonce]);
  return r.rows.length > 0;
}

/** The attempts with these hashes: settling asks whose transaction a receipt is. */
export async function attemptsByHash(q: Queryable, chainId: number, hashes: readonly string[]): Promise<Attempt[]> {
  if (hashes.length === 0) return [];
  const r = await q.query<AttemptRow>(`SELECT ${COLUMNS} FROM relay_txs WHERE chain_id = $1 AND hash = ANY($2)`, [chainId, [...new Set(hashes)]]);
  return r.rows.map(toAttempt);
}

/** A reorg took the attempt's block away: it waits again as if broadcast at `head`. */
export async function unmine(q: Queryable, chainId: number, hash: string, head: number) {
  await q.query(`UPDATE relay_txs SET status = 'PENDING', mined_block = NULL, mined_block_hash = NULL, broadcast_block = $3 WHERE chain_id = $1 AND hash = $2`, [chainId, hash, head]);
}

/** Final: past the confirmation depth. */
export async function confirmAttempts(q: Queryable, chainId: number, hashes: string[]) {
  await q.query(`UPDATE relay_txs SET status = 'CONFIRMED' WHERE chain_id = $1 AND hash = ANY($2)`, [chainId, hashes]);
}

/** A re-broadcast the node took: the attempt has been broadcast (if it was not recorded so yet). */
export async function noteBroadcast(q: Queryable, chainId: number, hash: string) {
  await q.query('UPDATE relay_txs SET broadcast_at = COALESCE(broadcast_at, now()) WHERE chain_id = $1 AND hash = $2', [chainId, hash]);
}

/**
 * Attempts a prune may delete: final (CONFIRMED, REPLACED, FAILED), none still open at their slot, and
 * never a sender's highest CONFIRMED one (highestFinalNonce: the ledger is never rewound below it).
 */
const PRUNABLE_ATTEMPT = `t.status IN ('CONFIRMED', 'REPLACED', 'FAILED')
  AND NOT EXISTS (SELECT 1 FROM relay_txs o WHERE o.chain_id = t.chain_id AND o.sender = t.sender AND o.nonce = t.nonce AND o.status IN ('PENDING', 'MINED'))
  AND t.nonce < (SELECT coalesce(max(h.nonce), t.nonce + 1) FROM relay_txs h WHERE h.chain_id = t.chain_id AND h.sender = t.sender AND h.status = 'CONFIRMED')`;

/** Attempts not tied to a meta-transaction row any more (batches, fillers, a pruned row's) created before the cutoff ($1). */
const LOOSE_ATTEMPT = `t.created_at < $1 AND ${PRUNABLE_ATTEMPT}
  AND NOT EXISTS (SELECT 1 FROM meta_txns m WHERE m.chain_id = t.chain_id AND (m.id = t.meta_txn_id OR (m.sender = t.sender AND m.txn_nonce = t.nonce)))`;

/** Deletes the final attempts that carried these meta-transactions (a prune's batch). */
export async function deleteAttemptsOf(tx: Queryable, chainIds: number[], ids: string[]): Promise<number> {
  const r = await tx.query(`DELETE FROM relay_txs t WHERE (t.chain_id, t.meta_txn_id) IN (SELECT * FROM unnest($1::bigint[], $2::text[])) AND ${PRUNABLE_ATTEMPT}`, [chainIds, ids]);
  return r.rowCount;
}

/** Deletes up to `limit` final attempts created before `cutoff` that no meta-transaction row names (batches, fillers). */
export async function pruneLooseAttempts(tx: Queryable, cutoff: Date, limit: number): Promise<number> {
  const r = await tx.query(`DELETE FROM relay_txs WHERE id IN (SELECT t.id FROM relay_txs t WHERE ${LOOSE_ATTEMPT} ORDER BY t.id LIMIT $2 FOR UPDATE SKIP LOCKED)`, [cutoff, limit]);
  return r.rowCount;
}

/** How many attempts a prune at `cutoff` would delete, given its meta-transactions as a subquery of (chain_id, id) taking $1 (--dry-run). */
export async function countPrunableAttempts(q: Queryable, cutoff: Date, prunable: string): Promise<number> {
  const r = await q.query<{ n: string }>(
    `WITH p AS (${prunable})
     SELECT count(*)::text AS n FROM relay_txs t
      WHERE ${PRUNABLE_ATTEMPT} AND ((t.chain_id, t.meta_txn_id) IN (SELECT chain_id, id FROM p)
        OR (t.created_at < $1 AND NOT EXISTS (SELECT 1 FROM meta_txns m WHERE m.chain_id = t.chain_id AND (m.id = t.meta_txn_id OR (m.sender = t.sender AND m.txn_nonce = t.nonce))
              AND NOT EXISTS (SELECT 1 FROM p WHERE p.chain_id = m.chain_id AND p.id = m.id))))`,
    [cutoff],
  );
  return Number(r.rows[0]!.n);
}
