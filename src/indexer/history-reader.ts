import type { Db } from '../store/db.ts';
import type { TokenType } from './decode.ts';

export interface HistoryQuery {
  accounts?: string[];
  contracts?: string[];
  /** Contracts left out. */
  excludeContracts?: string[];
  txHashes?: string[];
  fromBlock?: number;
  toBlock?: number;
  tokenId?: string;
  offset: number;
  limit: number;
}

export interface HistoryTransfer {
  contract: string;
  type: TokenType;
  from: string;
  to: string;
  logIndex: number;
  tokenIds: string[];
  amounts: string[];
}

export interface HistoryTxn {
  txHash: string;
  blockNumber: number;
  blockHash: string;
  ts: Date;
  transfers: HistoryTransfer[];
}

/**
 * Transactions that moved tokens, newest first, each with its transfers that match the query (a
 * TransferBatch is one transfer with several ids). One statement: the page of transactions, then
 * their matching rows.
 */
export async function readHistory(db: Db, chainId: number, q: HistoryQuery): Promise<HistoryTxn[]> {
  const params: unknown[] = [chainId];
  const conds: Array<(t: string) => string> = [(t) => `${t}chain_id = $1`];
  const add = (sql: (t: string, n: number) => string, v: unknown) => {
    params.push(v);
    const n = params.length;
    conds.push((t) => sql(t, n));
  };
  if (q.accounts) add((t, n) => `(${t}from_address = ANY($${n}::text[]) OR ${t}to_address = ANY($${n}::text[]))`, q.accounts);
  if (q.contracts) add((t, n) => `${t}contract = ANY($${n}::text[])`, q.contracts);
  if (q.excludeContracts?.length) add((t, n) => `NOT (${t}contract = ANY($${n}::text[]))`, q.excludeContracts);
  if (q.txHashes) add((t, n) => `${t}tx_hash = ANY($${n}::text[])`, q.txHashes);
  if (q.fromBlock !== undefined) add((t, n) => `${t}block_number >= $${n}`, q.fromBlock);
  if (q.toBlock !== undefined) add((t, n) => `${t}block_number <= $${n}`, q.toBlock);
  if (q.tokenId !== undefined) add((t, n) => `${t}token_id = $${n}::numeric`, q.tokenId);
  /** The same conditions, on the bare table or on the alias `t.`. */
  const where = (alias: string) => conds.map((c) => c(alias)).join(' AND ');
  params.push(q.limit, q.offset);
  const res = await db.query<{
    tx_hash: string;
    b: string;
    block_hash: string;
    tx_index: number;
    ts: Date | string;
    log_index: number;
    part: number;
    contract: string;
    contract_type: string;
    from_address: string;
    to_address: string;
    token_id: string;
    amount: string;
  }>(
    `WITH page AS (
       SELECT tx_hash, max(block_number) AS bn, max(tx_index) AS ti FROM indexer_transfers WHERE ${where('')}
        GROUP BY tx_hash ORDER BY bn DESC, ti DESC LIMIT $${params.length - 1} OFFSET $${params.length})
     SELECT t.tx_hash, t.block_number::text AS b, t.block_hash, t.tx_index, t.ts, t.log_index, t.part, t.contract, t.contract_type,
            t.from_address, t.to_address, t.token_id::text AS token_id, t.amount::text AS amount
       FROM indexer_transfers t JOIN page p ON p.tx_hash = t.tx_hash AND p.bn = t.block_number
      WHERE ${where('t.')}
      ORDER BY p.bn DESC, p.ti DESC, t.log_index, t.part`,
    params,
  );
  const out: HistoryTxn[] = [];
  const byTx = new Map<string, HistoryTxn>();
  const byLog = new Map<string, HistoryTransfer>();
  for (const r of res.rows) {
    let tx = byTx.get(r.tx_hash);
    if (!tx) {
      tx = { txHash: r.tx_hash, blockNumber: Number(r.b), blockHash: r.block_hash, ts: new Date(r.ts), transfers: [] };
      byTx.set(r.tx_hash, tx);
      out.push(tx);
    }
    const key = `${r.tx_hash}:${r.log_index}`;
    let tr = byLog.get(key);
    if (!tr) {
      tr = { contract: r.contract, type: r.contract_type as TokenType, from: r.from_address, to: r.to_address, logIndex: r.log_index, tokenIds: [], amounts: [] };
      byLog.set(key, tr);
      tx.transfers.push(tr);
    }
    tr.tokenIds.push(r.token_id);
    tr.amounts.push(r.amount);
  }
  return out;
}
