import type { Queryable } from '../../store/db.ts';
import { summaryColumns, toSummary, type TokenSummary } from '../tokens/token-store.ts';
import type { PostingToken } from './postings.ts';

export interface IndexVersion {
  version: number;
  /** The oldest version a holder may catch up from (migration 0029). */
  floor: number;
  /** About how many tokens the contract has indexed (the most common property's count). */
  tokens: number;
}

/** The database side of the posting lists held in memory: versions, changes, and what a holder loads. */
export function postingsStore(db: Queryable) {
  return {
    async version(chainId: number, contract: string): Promise<IndexVersion | null> {
      const res = await db.query<{ version: string; floor: string; tokens: string | number }>(
        `SELECT v.version, v.floor,
                (SELECT coalesce(max(tokens), 0) FROM token_property_names n WHERE n.chain_id = $1 AND n.contract_address = $2) AS tokens
           FROM token_index_versions v WHERE v.chain_id = $1 AND v.contract_address = $2`,
        [chainId, contract],
      );
      const r = res.rows[0];
      return r ? { version: Number(r.version), floor: Number(r.floor), tokens: Number(r.tokens) } : null;
    },

    /** The tokens changed by the versions after `since` up to `upTo`, or null when some of those changes were pruned. */
    async changedSince(chainId: number, contract: string, since: number, upTo: number): Promise<string[] | null> {
      const res = await db.query<{ floor: string | null; ids: string[] | null }>(
        `SELECT (SELECT floor FROM token_index_versions WHERE chain_id = $1 AND contract_address = $2) AS floor,
                (SELECT array_agg(DISTINCT id) FROM token_index_changes c CROSS JOIN LATERAL unnest(c.token_ids) AS id
                  WHERE c.chain_id = $1 AND c.contract_address = $2 AND c.version > $3 AND c.version <= $4) AS ids`,
        [chainId, contract, since, upTo],
      );
      const r = res.rows[0]!;
      if (r.floor === null || since < Number(r.floor)) return null;
      return r.ids ?? [];
    },

    /** The tokens (all, or those listed) with their pairs and lower-cased name and description. */
    async tokens(chainId: number, contract: string, ids: string[] | null): Promise<PostingToken[]> {
      const only = ids ? 'AND t.token_id = ANY($3::text[])' : '';
      const onlyPairs = ids ? 'AND p.token_id = ANY($3::text[])' : '';
      const res = await db.query<{ id: string; name: string | null; description: string | null; pairs: Array<[string, string, string | null]> | null }>(
        `SELECT t.token_id AS id, lower(t.metadata->>'name') AS name, lower(t.metadata->>'description') AS description, p.pairs
           FROM token_metadata t
           LEFT JOIN (SELECT p.token_id, json_agg(json_build_array(p.name_key, p.value_key, p.value_num::text)) AS pairs
                        FROM token_properties p WHERE p.chain_id = $1 AND p.contract_address = $2 ${onlyPairs}
                       GROUP BY p.token_id) p ON p.token_id = t.token_id
          WHERE t.chain_id = $1 AND t.contract_address = $2 AND t.metadata IS NOT NULL ${only}`,
        ids ? [chainId, contract, ids] : [chainId, contract],
      );
      return res.rows.map((r) => ({ id: r.id, name: r.name, description: r.description, pairs: r.pairs ?? [] }));
    },

    /** Which tokens have each of `words` in their name or description (token_words, migration 0026). */
    async words(chainId: number, contract: string, words: string[]): Promise<Array<{ word: string; tokenId: string }>> {
      const res = await db.query<{ word: string; token_id: string }>('SELECT word, token_id FROM token_words WHERE chain_id = $1 AND contract_address = $2 AND word = ANY($3::text[])', [
        chainId,
        contract,
        words,
      ]);
      return res.rows.map((r) => ({ word: r.word, tokenId: r.token_id }));
    },

    /**
     * The typo tier's similarity of each candidate to the text, by pg_trgm itself (the same measure the
     * search without posting lists ranks by): the names and descriptions are sent, no row is read, and
     * a description many tokens share is measured once.
     */
    async similarity(q: string, candidates: Array<{ id: string; name: string | null; description: string | null }>): Promise<Map<string, number>> {
      const descriptions = [...new Set(candidates.map((c) => c.description ?? ''))];
      const res = await db.query<{ id: string; sim: number }>(
        `WITH d AS (SELECT x.description, word_similarity($1, x.description) AS sim FROM unnest($5::text[]) AS x(description))
         SELECT x.id, greatest(similarity(x.name, $1), word_similarity($1, x.name), d.sim)::real AS sim
           FROM unnest($2::text[], $3::text[], $4::text[]) AS x(id, name, description) JOIN d ON d.description = x.description`,
        [q, candidates.map((c) => c.id), candidates.map((c) => c.name), candidates.map((c) => c.description ?? ''), descriptions],
      );
      return new Map(res.rows.map((r) => [r.id, Number(r.sim)]));
    },

    /** The stored tokens of `ids` (those still resolved), in the order given, without raw documents and traces. */
    async rows(chainId: number, contract: string, ids: string[]): Promise<TokenSummary[]> {
      if (ids.length === 0) return [];
      const res = await db.query<Record<string, unknown>>(
        `SELECT ${summaryColumns('t')} FROM token_metadata t WHERE t.chain_id = $1 AND t.contract_address = $2 AND t.token_id = ANY($3::text[]) AND t.metadata IS NOT NULL`,
        [chainId, contract, ids],
      );
      const byId = new Map(res.rows.map((r) => [String(r.token_id), r]));
      return ids.flatMap((id) => {
        const r = byId.get(id);
        return r ? [toSummary(r)] : [];
      });
    },
  };
}
export type PostingsStore = ReturnType<typeof postingsStore>;
