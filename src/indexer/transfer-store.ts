import type { Hex } from 'viem';
import type { Queryable } from '../store/db.ts';
import { ZERO_ADDRESS, type TransferEntry } from './decode.ts';

/** A balance as a step left it (what `balance.updated` events carry). */
export interface BalanceChange {
  contract: string;
  account: string;
  tokenId: string;
  type: string;
  balance: string;
  blockNumber: number;
  blockHash: string;
}

/**
 * Told, on the transaction that changed them, the balances a step of transfers (or a reorg's rollback)
 * changed: the wiring records events from it. Absent, the statements return no rows for it.
 */
export type BalanceHook = (q: Queryable, chainId: number, changes: BalanceChange[]) => Promise<void>;

// The changed balance rows of the `up` CTE as one JSON array (only when a hook listens).
const CHANGES = `(SELECT coalesce(json_agg(json_build_object('contract', contract, 'account', account, 'tokenId', token_id::text,
   'type', contract_type, 'balance', balance::text, 'blockNumber', block_number, 'blockHash', block_hash)), '[]'::json) FROM up)`;
const UP_ROWS = 'contract, account, token_id, contract_type, balance, block_number, block_hash';

async function tell(q: Queryable, chainId: number, hook: BalanceHook | undefined, raw: unknown): Promise<void> {
  if (!hook) return;
  const changes = (typeof raw === 'string' ? JSON.parse(raw) : raw) as BalanceChange[];
  if (changes.length)
    await hook(
      q,
      chainId,
      changes.map((c) => ({ ...c, blockNumber: Number(c.blockNumber) })),
    );
}

/** A transfer entry with its block's time (seconds since the epoch). */
export interface TimedEntry extends TransferEntry {
  ts: number;
}

/**
 * Any other log a step read for the wiring (IndexHooks.logWants): what a webhook listener is told as an
 * EVENT. `contractType` is what the index knows of the contract from its transfers (UNKNOWN: none seen).
 */
export interface TimedLog {
  blockNumber: bigint;
  blockHash: string;
  txHash: string;
  txIndex: number;
  logIndex: number;
  contract: string;
  contractType: string;
  ts: number;
  topics: readonly Hex[];
  data: Hex;
}

/**
 * Told, on the transaction that recorded them, the transfers a step recorded for the first time (a log
 * read again, by a backfill or a retried step, is not told again) and the step's other logs the wiring
 * asked for (`others`: read once per range, by the follower only): the wiring sends them on to the
 * indexer's webhook listeners.
 */
export type TransferHook = (q: Queryable, chainId: number, fresh: TimedEntry[], others?: TimedLog[]) => Promise<void>;

/** A block a reorg took away, with the hash the index had for it. */
export interface RemovedBlock {
  blockNumber: number;
  blockHash: string;
}

/** Told, on the reorg's transaction, the blocks it took away: listeners told of their logs are told they went. */
export type RemovedHook = (q: Queryable, chainId: number, removed: RemovedBlock[]) => Promise<void>;

/** Besides transfers, the logs the wiring wants read: every log of `contracts`, and logs of `topics` on any contract. */
export interface LogWants {
  contracts: string[];
  topics: string[];
}

/** What the wiring is told as transfers are applied or undone, on their transaction (each optional). */
export interface IndexHooks {
  onBalances?: BalanceHook;
  onFresh?: TransferHook;
  onRemoved?: RemovedHook;
  /** Asked each step, before the read: the other logs to read (null: none). */
  logWants?: (q: Queryable, chainId: number) => Promise<LogWants | null>;
}

/** Which of `entries` the `fresh` column (keys of the rows inserted) names. */
function freshOf(entries: TimedEntry[], raw: unknown): TimedEntry[] {
  const keys = (typeof raw === 'string' ? JSON.parse(raw) : raw) as Array<[number | string, number, number]>;
  const inserted = new Set(keys.map(([b, l, p]) => `${b}:${l}:${p}`));
  return entries.filter((e) => inserted.has(`${e.blockNumber}:${e.logIndex}:${e.part}`));
}

// The balance deltas of a set of transfer rows (`src`), one per (contract, account, token id):
// minus for the sender, plus for the receiver; the zero address (mint, burn) holds nothing.
const DELTAS = (src: string, sign: '' | '-') => `
  d AS (
    SELECT contract, from_address AS account, token_id, contract_type, ${sign === '-' ? '' : '-'}amount AS delta, block_number, block_hash
      FROM ${src} WHERE from_address <> '${ZERO_ADDRESS}'
    UNION ALL
    SELECT contract, to_address, token_id, contract_type, ${sign}amount, block_number, block_hash
      FROM ${src} WHERE to_address <> '${ZERO_ADDRESS}'),
  agg AS (
    SELECT contract, account, token_id, max(contract_type) AS contract_type, sum(delta) AS delta,
           max(block_number) AS block_number, (array_agg(block_hash ORDER BY block_number DESC))[1] AS block_hash
      FROM d GROUP BY contract, account, token_id)`;

/**
 * Records transfers and adds them to balances, in one statement (so inside the caller's transaction
 * with the cursor move). Only rows not recorded before count: reading a log twice changes nothing.
 * Balance rows are written in key order, so two workers applying overlapping accounts never deadlock.
 * Returns how many rows were new.
 */
export async function applyTransfers(q: Queryable, chainId: number, entries: TimedEntry[], hooks: IndexHooks = {}, others: TimedLog[] = []): Promise<number> {
  if (!entries.length) {
    if (others.length) await hooks.onFresh?.(q, chainId, [], others);
    return 0;
  }
  const { onBalances: hook, onFresh } = hooks;
  const col = <T>(f: (e: TimedEntry) => T) => entries.map(f);
  const fresh = onFresh ? `, (SELECT coalesce(json_agg(json_build_array(block_number, log_index, part)), '[]'::json) FROM ins) AS fresh` : '';
  const res = await q.query<{ n: string | number; changes?: unknown; fresh?: unknown }>(
    `WITH ins AS (
       INSERT INTO indexer_transfers (chain_id, block_number, log_index, part, block_hash, tx_hash, tx_index, contract, contract_type,
                                      from_address, to_address, token_id, amount, ts)
       SELECT $1, * FROM unnest($2::bigint[], $3::int[], $4::int[], $5::text[], $6::text[], $7::int[], $8::text[], $9::text[],
                                $10::text[], $11::text[], $12::numeric[], $13::numeric[], $14::timestamptz[])
       ON CONFLICT DO NOTHING
       RETURNING contract, contract_type, from_address, to_address, token_id, amount, block_number, block_hash, log_index, part),
     ${DELTAS('ins', '')},
     up AS (
       INSERT INTO indexer_balances AS b (chain_id, contract, account, token_id, contract_type, balance, block_number, block_hash)
       SELECT $1, contract, account, token_id, contract_type, delta, block_number, block_hash FROM agg
        ORDER BY contract, account, token_id
       ON CONFLICT (chain_id, contract, account, token_id) DO UPDATE SET
         balance = b.balance + EXCLUDED.balance,
         block_number = GREATEST(b.block_number, EXCLUDED.block_number),
         block_hash = CASE WHEN EXCLUDED.block_number >= b.block_number THEN EXCLUDED.block_hash ELSE b.block_hash END
       RETURNING ${hook ? UP_ROWS : '1'})
     SELECT (SELECT count(*) FROM ins) AS n, (SELECT count(*) FROM up) AS balances${hook ? `, ${CHANGES} AS changes` : ''}${fresh}`,
    [
      chainId,
      col((e) => e.blockNumber.toString()),
      col((e) => e.logIndex),
      col((e) => e.part),
      col((e) => e.blockHash),
      col((e) => e.txHash),
      col((e) => e.txIndex),
      col((e) => e.contract),
      col((e) => e.type),
      col((e) => e.from),
      col((e) => e.to),
      col((e) => e.tokenId),
      col((e) => e.amount),
      col((e) => new Date(e.ts * 1000).toISOString()),
    ],
  );
  await tell(q, chainId, hook, res.rows[0]?.changes);
  if (onFresh) {
    const told = freshOf(entries, res.rows[0]?.fresh ?? []);
    if (told.length || others.length) await onFresh(q, chainId, told, others);
  }
  return Number(res.rows[0]?.n ?? 0);
}

/**
 * Sets one balance to what the chain says at `b.blockNumber` (SyncBalance), in one statement; returns
 * the balance it held before ('0' when it had no row). A change is told to `hook` on the caller's
 * transaction, as a step's changes are: a subscriber's last word on the holder is the synced balance.
 */
export async function setBalance(q: Queryable, chainId: number, b: BalanceChange, hook?: BalanceHook): Promise<string> {
  const res = await q.query<{ before: string | null; after: string; changes: unknown }>(
    `WITH old AS (
       SELECT balance FROM indexer_balances WHERE chain_id = $1 AND contract = $2 AND account = $3 AND token_id = $4),
     up AS (
       INSERT INTO indexer_balances AS x (chain_id, contract, account, token_id, contract_type, balance, block_number, block_hash)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
       ON CONFLICT (chain_id, contract, account, token_id) DO UPDATE SET balance = EXCLUDED.balance,
         block_number = GREATEST(x.block_number, EXCLUDED.block_number),
         block_hash = CASE WHEN EXCLUDED.block_number >= x.block_number THEN EXCLUDED.block_hash ELSE x.block_hash END
       RETURNING ${UP_ROWS})
     SELECT (SELECT balance::text FROM old) AS before, (SELECT balance::text FROM up) AS after, ${CHANGES} AS changes`,
    [chainId, b.contract, b.account, b.tokenId, b.type, b.balance, b.blockNumber, b.blockHash],
  );
  const row = res.rows[0]!;
  const before = row.before ?? '0';
  if (before !== row.after) await tell(q, chainId, hook, row.changes);
  return before;
}

/**
 * Undoes every transfer above `ancestor` (a reorg replaced those blocks): the rows go and their
 * deltas are taken back from the balances, in one statement. Returns how many rows were undone.
 */
export async function rollbackAbove(q: Queryable, chainId: number, ancestor: bigint, ancestorHash: string, hooks: IndexHooks = {}): Promise<number> {
  const hook = hooks.onBalances;
  const removed = hooks.onRemoved ? `, (SELECT coalesce(json_agg(DISTINCT jsonb_build_array(block_number, block_hash)), '[]'::json) FROM del) AS removed` : '';
  const res = await q.query<{ n: string | number; changes?: unknown; removed?: unknown }>(
    `WITH del AS (
       DELETE FROM indexer_transfers WHERE chain_id = $1 AND block_number > $2
       RETURNING contract, contract_type, from_address, to_address, token_id, amount, block_number, block_hash, log_index),
     ${DELTAS('del', '-')},
     up AS (
       UPDATE indexer_balances b SET balance = b.balance + agg.delta,
              block_number = LEAST(b.block_number, $2), block_hash = CASE WHEN b.block_number > $2 THEN $3 ELSE b.block_hash END
         FROM agg WHERE b.chain_id = $1 AND b.contract = agg.contract AND b.account = agg.account AND b.token_id = agg.token_id
       RETURNING ${
         hook
           ? UP_ROWS.split(', ')
               .map((c) => `b.${c}`)
               .join(', ')
           : '1'
       })
     SELECT (SELECT count(*) FROM del) AS n, (SELECT count(*) FROM up) AS balances${hook ? `, ${CHANGES} AS changes` : ''}${removed}`,
    [chainId, ancestor.toString(), ancestorHash],
  );
  const blocks = await q.query<{ b: string; h: string }>('DELETE FROM indexer_blocks WHERE chain_id = $1 AND block_number > $2 RETURNING block_number::text AS b, block_hash AS h', [
    chainId,
    ancestor.toString(),
  ]);
  await tell(q, chainId, hook, res.rows[0]?.changes);
  if (hooks.onRemoved) {
    const raw = res.rows[0]?.removed ?? [];
    const rows = (typeof raw === 'string' ? JSON.parse(raw) : raw) as Array<[number | string, string]>;
    // The blocks of the transfers undone, and the blocks the index remembered above the fork (those of
    // any other log a listener was told of: the follower remembers every block it read a log in).
    const gone = new Map([...rows.map(([b, h]) => [Number(b), h] as const), ...blocks.rows.map((r) => [Number(r.b), r.h] as const)].map(([b, h]) => [`${b}:${h}`, { blockNumber: b, blockHash: h }]));
    if (gone.size) await hooks.onRemoved(q, chainId, [...gone.values()]);
  }
  return Number(res.rows[0]?.n ?? 0);
}

/** What the index knows of each contract's type, from its latest transfer (one probe of the contract index each). */
export async function contractTypesOf(q: Queryable, chainId: number, contracts: readonly string[]): Promise<Map<string, string>> {
  if (contracts.length === 0) return new Map();
  const r = await q.query<{ contract: string; t: string | null }>(
    `SELECT c.contract, (SELECT contract_type FROM indexer_transfers t WHERE t.chain_id = $1 AND t.contract = c.contract ORDER BY block_number DESC LIMIT 1) AS t
     FROM unnest($2::text[]) AS c(contract)`,
    [chainId, [...contracts]],
  );
  return new Map(r.rows.filter((x) => x.t).map((x) => [x.contract, x.t!]));
}
