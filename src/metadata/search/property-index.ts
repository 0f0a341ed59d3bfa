import type { Queryable } from '../../store/db.ts';

/**
 * Replaces the indexed (name, value) pairs of tokens with those of their stored documents. Runs in
 * the transaction that saves the documents, so the index never disagrees with what is served. The
 * extraction rules live in one place, the SQL function `metarelay_token_pairs` (migration 0012).
 */
export async function reindexTokens(tx: Queryable, chainId: number, contract: string, tokenIds: string[]): Promise<void> {
  if (tokenIds.length === 0) return;
  const params = [chainId, contract, tokenIds];
  await tx.query('DELETE FROM token_properties WHERE chain_id = $1 AND contract_address = $2 AND token_id = ANY($3::text[])', params);
  await tx.query(
    `INSERT INTO token_properties (chain_id, contract_address, token_id, name, name_key, value_text, value_key, value_num, kind)
     SELECT t.chain_id, t.contract_address, t.token_id, p.name, lower(p.name), p.value_text, lower(p.value_text), p.value_num, p.kind
       FROM token_metadata t CROSS JOIN LATERAL metarelay_token_pairs(t.metadata) AS p
      WHERE t.chain_id = $1 AND t.contract_address = $2 AND t.token_id = ANY($3::text[]) AND t.metadata IS NOT NULL
     ON CONFLICT DO NOTHING`,
    params,
  );
}
