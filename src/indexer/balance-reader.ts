import type { Db } from '../store/db.ts';
import type { TokenType } from './decode.ts';

export interface BalanceRow {
  contract: string;
  account: string;
  tokenId: string;
  type: TokenType;
  balance: string;
  blockNumber: number;
  blockHash: string;
}

export interface BalanceQuery {
  accounts?: string[];
  contracts?: string[];
  /** Contracts left out. */
  excludeContracts?: string[];
  tokenIds?: string[];
  types?: TokenType[];
  offset: number;
  limit: number;
}

interface Row {
  contract: string;
  account: string;
  token_id: string;
  contract_type: string;
  balance: string;
  b: string;
  block_hash: string;
}

const toBalance = (r: Row): BalanceRow => ({
  contract: r.contract,
  account: r.account,
  tokenId: r.token_id,
  type: r.contract_type as TokenType,
  balance: r.balance,
  blockNumber: Number(r.b),
  blockHash: r.block_hash,
});

/** Builds `WHERE` conditions over indexer_balances with numbered parameters. */
function conditions(chainId: number, q: Omit<BalanceQuery, 'offset' | 'limit'>) {
  const params: unknown[] = [chainId];
  const where = ['chain_id = $1'];
  const add = (sql: (n: number) => string, v: unknown) => {
    params.push(v);
    where.push(sql(params.length));
  };
  // One value is compared as one: with `= ANY(array)` PostgreSQL may walk the whole chain's index in
  // order and filter (the plan it chose for a 1 000-token holder once the table was analysed).
  const oneOrAny = (col: string, v: string[], type: string) => (v.length === 1 ? add((n) => `${col} = $${n}::${type}`, v[0]) : add((n) => `${col} = ANY($${n}::${type}[])`, v));
  if (q.accounts) oneOrAny('account', q.accounts, 'text');
  if (q.contracts) oneOrAny('contract', q.contracts, 'text');
  if (q.excludeContracts?.length) add((n) => `NOT (contract = ANY($${n}::text[]))`, q.excludeContracts);
  if (q.tokenIds) add((n) => `token_id = ANY($${n}::numeric[])`, q.tokenIds);
  if (q.types) add((n) => `contract_type = ANY($${n}::text[])`, q.types);
  return { params, where: where.join(' AND ') };
}

/** Reads of what the indexer holds: balances, supplies, updates, history. */
export function balanceReader(db: Db, chainId: number) {
  return {
    /** Positive balances, by account, contract and token id. */
    async balances(q: BalanceQuery): Promise<BalanceRow[]> {
      const { params, where } = conditions(chainId, q);
      params.push(q.limit, q.offset);
      const res = await db.query<Row>(
        // Ordered by the table's columns: the output's token_id is text, and ordering by it would both
        // sort ids as strings ("10" before "2") and stop the index from giving the order.
        `SELECT contract, account, token_id::text AS token_id, contract_type, balance::text AS balance, block_number::text AS b, block_hash
           FROM indexer_balances t WHERE ${where} AND balance > 0
          ORDER BY t.account, t.contract, t.token_id LIMIT $${params.length - 1} OFFSET $${params.length}`,
        params,
      );
      return res.rows.map(toBalance);
    },

    /**
     * One row per (account, contract): an ERC20's balance, or for collectibles the sum of the
     * account's tokens and how many distinct ids it holds.
     */
    async summary(q: BalanceQuery): Promise<Array<BalanceRow & { unique: number }>> {
      const { params, where } = conditions(chainId, q);
      params.push(q.limit, q.offset);
      const res = await db.query<Row & { n: string | number }>(
        `SELECT contract, account, '0' AS token_id, max(contract_type) AS contract_type, sum(balance)::text AS balance,
                max(block_number)::text AS b, (array_agg(block_hash ORDER BY block_number DESC))[1] AS block_hash, count(*) AS n
           FROM indexer_balances WHERE ${where} AND balance > 0
          GROUP BY account, contract ORDER BY account, contract LIMIT $${params.length - 1} OFFSET $${params.length}`,
        params,
      );
      return res.rows.map((r) => ({ ...toBalance(r), unique: Number(r.n) }));
    },

    /** Balances of a contract changed after a block, oldest change first (zero balances included: a holder that sold out). */
    async updatesSince(contract: string, afterBlock: number, offset: number, limit: number): Promise<BalanceRow[]> {
      const res = await db.query<Row>(
        `SELECT contract, account, token_id::text AS token_id, contract_type, balance::text AS balance, block_number::text AS b, block_hash
           FROM indexer_balances t WHERE chain_id = $1 AND contract = $2 AND block_number > $3
          ORDER BY t.block_number, t.account, t.token_id LIMIT $4 OFFSET $5`,
        [chainId, contract, afterBlock, limit, offset],
      );
      return res.rows.map(toBalance);
    },

    /** Per token id of a contract, the sum held by accounts (burnt tokens are held by nobody). */
    async supplies(contract: string, ids: string[] | undefined, offset: number, limit: number): Promise<Array<{ tokenId: string; supply: string; type: TokenType }>> {
      const res = await db.query<{ token_id: string; supply: string; contract_type: string }>(
        `SELECT token_id::text AS token_id, sum(balance)::text AS supply, max(contract_type) AS contract_type
           FROM indexer_balances t WHERE chain_id = $1 AND contract = $2 AND ($3::numeric[] IS NULL OR token_id = ANY($3::numeric[]))
          GROUP BY t.token_id HAVING sum(balance) > 0 ORDER BY t.token_id LIMIT $4 OFFSET $5`,
        [chainId, contract, ids ?? null, limit, offset],
      );
      return res.rows.map((r) => ({ tokenId: r.token_id, supply: r.supply, type: r.contract_type as TokenType }));
    },

    /**
     * GetTokenIDRanges: the contract's held token ids (supply above zero, as GetTokenIDs lists them) after
     * `after`, as runs of consecutive ids, lowest first; at most `limit` runs. One statement: the
     * gaps-and-islands grouping (an id minus its rank is constant along a run).
     */
    async idRanges(contract: string, after: string | null, limit: number): Promise<Array<{ start: string; end: string }>> {
      const res = await db.query<{ start: string; end: string }>(
        `WITH held AS (
           SELECT token_id FROM indexer_balances WHERE chain_id = $1 AND contract = $2 AND ($3::numeric IS NULL OR token_id > $3::numeric)
            GROUP BY token_id HAVING sum(balance) > 0),
         runs AS (SELECT token_id, token_id - row_number() OVER (ORDER BY token_id) AS run FROM held)
         SELECT min(token_id)::text AS start, max(token_id)::text AS "end" FROM runs GROUP BY run ORDER BY min(token_id) LIMIT $4`,
        [chainId, contract, after, limit],
      );
      return res.rows;
    },

    /** The token standard the indexer has seen a contract use; null when it has no transfer of it. */
    async contractType(contract: string): Promise<TokenType | null> {
      const res = await db.query<{ contract_type: string }>('SELECT contract_type FROM indexer_transfers WHERE chain_id = $1 AND contract = $2 LIMIT 1', [chainId, contract]);
      return (res.rows[0]?.contract_type as TokenType | undefined) ?? null;
    },

    /** The hash the indexer recorded for a block, if it recorded one. */
    async blockHash(block: number): Promise<string | null> {
      const res = await db.query<{ block_hash: string }>(
        `SELECT block_hash FROM indexer_blocks WHERE chain_id = $1 AND block_number = $2
         UNION ALL SELECT block_hash FROM indexer_transfers WHERE chain_id = $1 AND block_number = $2 LIMIT 1`,
        [chainId, block],
      );
      return res.rows[0]?.block_hash ?? null;
    },
  };
}

export type BalanceReader = ReturnType<typeof balanceReader>;
