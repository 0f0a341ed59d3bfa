import type { Queryable } from '../../store/db.ts';

/** The class of the advisory lock that serialises the count updates of one contract (two-key form). */
const COUNTS_LOCK = 727_025;

/**
 * Changes kept per contract for processes catching up their posting lists (migration 0029); one
 * further behind reloads the contract, which costs about what reading that many changes would.
 */
export const KEPT_CHANGES = 64;

/**
 * Replaces the indexed (name, value) pairs of tokens with those of their stored documents, and
 * keeps the per-value and per-property token counts (migration 0025) in step. Runs in the
 * transaction that saves the documents, so neither ever disagrees with what is served. The
 * extraction rules live in one place, the SQL function `metarelay_token_pairs` (migration 0012).
 */
export async function reindexTokens(tx: Queryable, chainId: number, contract: string, tokenIds: string[]): Promise<void> {
  if (tokenIds.length === 0) return;
  const params = [chainId, contract, tokenIds];
  // Saves of one contract touch the same count rows: taking this lock last (it is held to commit)
  // makes them queue instead of deadlocking on rows updated in different orders.
  await tx.query('SELECT pg_advisory_xact_lock($1, hashtext($2::text || $3))', [COUNTS_LOCK, String(chainId), contract]);
  await tx.query(
    `WITH gone AS (
       DELETE FROM token_properties WHERE chain_id = $1 AND contract_address = $2 AND token_id = ANY($3::text[])
       RETURNING token_id, name_key, value_key, name, value_text, kind, value_num IS NOT NULL AS has_num
     ), v AS (
       UPDATE token_property_values c SET tokens = c.tokens - g.n
         FROM (SELECT name_key, value_key, name, value_text, kind, has_num, count(*) AS n FROM gone GROUP BY 1, 2, 3, 4, 5, 6) g
        WHERE c.chain_id = $1 AND c.contract_address = $2 AND c.name_key = g.name_key AND c.value_key = g.value_key
          AND c.name = g.name AND c.value_text = g.value_text AND c.kind = g.kind AND c.has_num = g.has_num
     )
     UPDATE token_property_names c SET tokens = c.tokens - g.n
       FROM (SELECT name_key, count(DISTINCT token_id) AS n FROM gone GROUP BY name_key) g
      WHERE c.chain_id = $1 AND c.contract_address = $2 AND c.name_key = g.name_key`,
    params,
  );
  await tx.query(
    `WITH added AS (
       INSERT INTO token_properties (chain_id, contract_address, token_id, name, name_key, value_text, value_key, value_num, kind)
       SELECT t.chain_id, t.contract_address, t.token_id, p.name, lower(p.name), p.value_text, lower(p.value_text), p.value_num, p.kind
         FROM token_metadata t CROSS JOIN LATERAL metarelay_token_pairs(t.metadata) AS p
        WHERE t.chain_id = $1 AND t.contract_address = $2 AND t.token_id = ANY($3::text[]) AND t.metadata IS NOT NULL
       ON CONFLICT DO NOTHING
       RETURNING token_id, name_key, value_key, name, value_text, kind, value_num IS NOT NULL AS has_num
     ), v AS (
       INSERT INTO token_property_values AS c (chain_id, contract_address, name_key, value_key, name, value_text, kind, has_num, tokens)
       SELECT $1::bigint, $2::text, name_key, value_key, name, value_text, kind, has_num, count(*) FROM added GROUP BY 3, 4, 5, 6, 7, 8
       ON CONFLICT (chain_id, contract_address, name_key, value_key, name, value_text, kind, has_num) DO UPDATE SET tokens = c.tokens + EXCLUDED.tokens
     )
     INSERT INTO token_property_names AS c (chain_id, contract_address, name_key, tokens)
     SELECT $1::bigint, $2::text, name_key, count(DISTINCT token_id) FROM added GROUP BY name_key
     ON CONFLICT (chain_id, contract_address, name_key) DO UPDATE SET tokens = c.tokens + EXCLUDED.tokens`,
    params,
  );
  // Values and properties no token has any more are not listed (nor kept).
  await tx.query('DELETE FROM token_property_values WHERE chain_id = $1 AND contract_address = $2 AND tokens <= 0', [chainId, contract]);
  await tx.query('DELETE FROM token_property_names WHERE chain_id = $1 AND contract_address = $2 AND tokens <= 0', [chainId, contract]);
  await reindexWords(tx, chainId, contract, tokenIds);
  await bumpVersion(tx, chainId, contract, tokenIds);
}

/**
 * A new version of the contract's index, listing the tokens it changed (migration 0029), and the
 * oldest changes pruned. Under the counts lock: versions of one contract commit in their order.
 */
async function bumpVersion(tx: Queryable, chainId: number, contract: string, tokenIds: string[]): Promise<void> {
  await tx.query(
    `WITH n AS (SELECT nextval('token_index_version_seq') AS v), ver AS (
       INSERT INTO token_index_versions AS c (chain_id, contract_address, version, floor)
       SELECT $1, $2, v, v FROM n
       ON CONFLICT (chain_id, contract_address) DO UPDATE SET version = EXCLUDED.version
     )
     INSERT INTO token_index_changes (chain_id, contract_address, version, token_ids) SELECT $1, $2, v, $3 FROM n`,
    [chainId, contract, tokenIds],
  );
  await tx.query(
    `WITH gone AS (
       DELETE FROM token_index_changes WHERE chain_id = $1 AND contract_address = $2
          AND version <= (SELECT version FROM token_index_changes WHERE chain_id = $1 AND contract_address = $2
                           ORDER BY version DESC OFFSET ${KEPT_CHANGES} LIMIT 1)
       RETURNING version
     )
     UPDATE token_index_versions SET floor = greatest(floor, (SELECT max(version) FROM gone))
      WHERE chain_id = $1 AND contract_address = $2 AND EXISTS (SELECT 1 FROM gone)`,
    [chainId, contract],
  );
}

/**
 * The words of the tokens' names and descriptions (migration 0026), for typo search, and the
 * contract's word list with counts; under the same lock and in the same transaction as the pairs.
 */
async function reindexWords(tx: Queryable, chainId: number, contract: string, tokenIds: string[]): Promise<void> {
  const params = [chainId, contract, tokenIds];
  await tx.query(
    `WITH gone AS (
       DELETE FROM token_words WHERE chain_id = $1 AND contract_address = $2 AND token_id = ANY($3::text[]) RETURNING word
     )
     UPDATE token_text_words c SET tokens = c.tokens - g.n
       FROM (SELECT word, count(*) AS n FROM gone GROUP BY word) g
      WHERE c.chain_id = $1 AND c.contract_address = $2 AND c.word = g.word`,
    params,
  );
  await tx.query(
    `WITH added AS (
       INSERT INTO token_words (chain_id, contract_address, word, token_id)
       SELECT t.chain_id, t.contract_address, w, t.token_id
         FROM token_metadata t CROSS JOIN LATERAL metarelay_token_words(t.metadata) AS w
        WHERE t.chain_id = $1 AND t.contract_address = $2 AND t.token_id = ANY($3::text[]) AND t.metadata IS NOT NULL
       RETURNING word
     )
     INSERT INTO token_text_words AS c (chain_id, contract_address, word, tokens)
     SELECT $1::bigint, $2::text, word, count(*) FROM added GROUP BY word
     ON CONFLICT (chain_id, contract_address, word) DO UPDATE SET tokens = c.tokens + EXCLUDED.tokens`,
    params,
  );
  await tx.query('DELETE FROM token_text_words WHERE chain_id = $1 AND contract_address = $2 AND tokens <= 0', [chainId, contract]);
}
