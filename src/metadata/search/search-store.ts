import type { Queryable } from '../../store/db.ts';
import { toRecord, type TokenRecord } from '../tokens/token-store.ts';
import type { PropertyCondition, TokenFilter } from './filter.ts';

/** Collects positional parameters while a statement is assembled; values never enter the SQL text. */
class Params {
  readonly values: unknown[] = [];
  add(v: unknown): string {
    this.values.push(v);
    return `$${this.values.length}`;
  }
}

const likeEscape = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);
const NAME = `lower(t.metadata->>'name')`;
const DESCRIPTION = `lower(t.metadata->>'description')`;

/**
 * The text part of a search: what matches, and how it ranks. Exact name, name prefix, name
 * substring, description substring, then trigram similarity (typos), as contract search does.
 */
function textSql(text: string, p: Params): { where: string; order: string } {
  const q = text.trim().toLowerCase();
  const $q = p.add(q);
  const $prefix = p.add(`${likeEscape(q)}%`);
  const $contains = p.add(`%${likeEscape(q)}%`);
  // Trigrams need three characters: shorter text matches by substring only.
  const fuzzy = q.length >= 3 ? ` OR ${NAME} % ${$q} OR ${NAME} %> ${$q} OR ${DESCRIPTION} %> ${$q}` : '';
  const tier = `CASE WHEN ${NAME} = ${$q} THEN 0 WHEN ${NAME} LIKE ${$prefix} ESCAPE '\\' THEN 1
                WHEN ${NAME} LIKE ${$contains} ESCAPE '\\' THEN 2 WHEN ${DESCRIPTION} LIKE ${$contains} ESCAPE '\\' THEN 3 ELSE 4 END`;
  const sim = `greatest(similarity(${NAME}, ${$q}), word_similarity(${$q}, ${NAME}), word_similarity(${$q}, coalesce(${DESCRIPTION}, '')))`;
  return {
    where: `(${NAME} LIKE ${$contains} ESCAPE '\\' OR ${DESCRIPTION} LIKE ${$contains} ESCAPE '\\'${fuzzy})`,
    order: q.length >= 3 ? `${tier}, ${sim} DESC` : tier,
  };
}

/**
 * The ids of the tokens that have a pair with this property name whose value is one of `values` and
 * within [min, max]: an index-only read of token_properties (its key, or the numeric index).
 */
function propertyIdsSql(c: PropertyCondition, p: Params, $chain: string, $contract: string): string {
  const parts = [`chain_id = ${$chain}`, `contract_address = ${$contract}`, `name_key = ${p.add(c.name.toLowerCase())}`];
  if (c.values) {
    const keys = c.values.map((v) => String(v).trim().toLowerCase());
    const nums = c.values.flatMap((v) => (typeof v === 'number' ? [String(v)] : typeof v === 'string' && /^\s*-?\d+(\.\d+)?\s*$/.test(v) ? [v.trim()] : []));
    parts.push(`(value_key = ANY(${p.add(keys)}::text[])${nums.length ? ` OR value_num = ANY(${p.add(nums)}::numeric[])` : ''})`);
  }
  if (c.min !== null) parts.push(`value_num >= ${p.add(String(c.min))}::numeric`);
  if (c.max !== null) parts.push(`value_num <= ${p.add(String(c.max))}::numeric`);
  return `SELECT token_id FROM token_properties WHERE ${parts.join(' AND ')}`;
}

/** Token ids are canonical decimals: by length, then text, is numeric order. */
const TOKEN_ORDER = 'length(t.token_id), t.token_id';

export interface SearchPage {
  page: number;
  pageSize: number;
  /** Keyset cursor (searches in token order only): the last token id of the previous page; `page` is then ignored. */
  after?: string | null;
}

export interface PropertyStat {
  name: string;
  nameKey: string;
  type: 'INT' | 'STRING' | 'ARRAY' | 'GENERIC';
  min: number | null;
  max: number | null;
  /** How many tokens have the property. */
  tokens: number;
  /** Distinct values of the property (values beyond the limit are left out of `values`). */
  distinctValues: number;
  values: Array<{ value: string | number | boolean; count: number }>;
}

export interface EnumerationState {
  contractType: string | null;
  /** A refreshAll of the contract finished: its tokens were all listed and read. */
  done: boolean;
  /** A refreshAll of the contract is queued or running (by any project). */
  running: boolean;
  /** The caller's own refreshAll of the contract that is queued or running. */
  ownTask: number | null;
}

export function searchStore(db: Queryable) {
  return {
    /** Tokens of one contract matching the filter, ranked when there is text, in token order otherwise. */
    async byFilter(chainId: number, contract: string, f: TokenFilter, page: SearchPage, idsOnly: boolean): Promise<{ rows: TokenRecord[] | string[]; more: boolean }> {
      const p = new Params();
      const $chain = p.add(chainId);
      const $contract = p.add(contract);
      const cols = idsOnly ? 't.token_id' : 't.*';
      // Properties are ANDed: the intersection of each one's ids, read from the index alone.
      const ids = f.properties.length ? f.properties.map((c) => propertyIdsSql(c, p, $chain, $contract)).join(' INTERSECT ') : null;
      let sql: string;
      // A cursor starts the page right after the previous page's last token, in token order: no rows
      // are read and skipped, however deep the page.
      const after = f.text === null && page.after != null ? p.add(page.after) : null;
      const offset = after !== null ? '0' : p.add(page.page * page.pageSize);
      const afterCond = (col: string) => (after !== null ? `(length(${col}), ${col}) > (length(${after}::text), ${after}::text)` : 'true');
      if (f.text === null && ids !== null) {
        // Page the (small) id set first, then read only that page's rows: walking the tokens in order
        // and testing each against the set reads every row when the match is rare.
        sql = `WITH page AS (SELECT token_id FROM (${ids}) AS m WHERE ${afterCond('token_id')} ORDER BY length(token_id), token_id
                              LIMIT ${p.add(page.pageSize + 1)} OFFSET ${offset})
               SELECT ${cols} FROM page JOIN token_metadata t ON t.chain_id = ${$chain} AND t.contract_address = ${$contract} AND t.token_id = page.token_id
                WHERE t.metadata IS NOT NULL ORDER BY ${TOKEN_ORDER}`;
      } else {
        const where = [`t.chain_id = ${$chain}`, `t.contract_address = ${$contract}`, 't.metadata IS NOT NULL'];
        let order = TOKEN_ORDER;
        if (f.text !== null) {
          const t = textSql(f.text, p);
          where.push(t.where);
          order = `${t.order}, ${TOKEN_ORDER}`;
        }
        if (ids !== null) where.push(`t.token_id IN (${ids})`);
        if (after !== null) where.push(afterCond('t.token_id'));
        sql = `SELECT ${cols} FROM token_metadata t WHERE ${where.join(' AND ')}
                ORDER BY ${order} LIMIT ${p.add(page.pageSize + 1)} OFFSET ${offset}`;
      }
      const res = await db.query(sql, p.values);
      const more = res.rows.length > page.pageSize;
      const rows = res.rows.slice(0, page.pageSize);
      return { rows: idsOnly ? rows.map((r) => String(r.token_id)) : rows.map(toRecord), more };
    },

    /** Free text across chains (or some), optionally one contract: ranked, then by chain, contract and token. */
    async byQuery(q: string, chainIds: number[] | null, contract: string | null, page: SearchPage): Promise<{ rows: TokenRecord[]; more: boolean }> {
      const p = new Params();
      const t = textSql(q, p);
      const where = ['t.metadata IS NOT NULL', t.where];
      if (chainIds) where.push(`t.chain_id = ANY(${p.add(chainIds)}::bigint[])`);
      if (contract) where.push(`t.contract_address = ${p.add(contract)}`);
      const res = await db.query(
        `SELECT t.* FROM token_metadata t WHERE ${where.join(' AND ')}
          ORDER BY ${t.order}, t.chain_id, t.contract_address, ${TOKEN_ORDER}
          LIMIT ${p.add(page.pageSize + 1)} OFFSET ${p.add(page.page * page.pageSize)}`,
        p.values,
      );
      return { rows: res.rows.slice(0, page.pageSize).map(toRecord), more: res.rows.length > page.pageSize };
    },

    /**
     * Every indexed property of a contract with its type, numeric range and most common values
     * (at most `maxValues` each, with their token counts), `maxProperties` most common properties.
     */
    async propertyStats(chainId: number, contract: string, exclude: string[], maxValues: number, maxProperties: number): Promise<PropertyStat[]> {
      const res = await db.query<Record<string, unknown>>(
        `WITH base AS (
           SELECT * FROM token_properties
            WHERE chain_id = $1 AND contract_address = $2 AND NOT (name_key = ANY($3::text[]))
         ), names AS (
           SELECT name_key, count(DISTINCT token_id) AS tokens, min(name) AS name, bool_or(kind = 'array') AS in_array,
                  bool_and(kind = 'number') AS all_num, bool_and(kind = 'string') AS all_str,
                  min(value_num) AS min_num, max(value_num) AS max_num, count(DISTINCT value_key) AS distinct_values
             FROM base GROUP BY name_key ORDER BY tokens DESC, name_key LIMIT $5
         ), vals AS (
           SELECT b.name_key, b.value_key, min(b.value_text) AS value_text, min(b.value_num) AS value_num,
                  bool_and(b.kind = 'boolean') AS is_bool, count(*) AS n
             FROM base b JOIN names USING (name_key) GROUP BY b.name_key, b.value_key
         ), ranked AS (
           SELECT vals.*, row_number() OVER (PARTITION BY name_key ORDER BY n DESC, value_key) AS rn FROM vals
         )
         SELECT names.*, r.value_text, r.value_num, r.is_bool, r.n
           FROM names LEFT JOIN ranked r ON r.name_key = names.name_key AND r.rn <= $4
          ORDER BY names.name_key, r.rn`,
        [chainId, contract, exclude.map((e) => e.trim().toLowerCase()), maxValues, maxProperties],
      );
      const out = new Map<string, PropertyStat>();
      for (const r of res.rows) {
        const key = String(r.name_key);
        let stat = out.get(key);
        if (!stat) {
          const type = r.in_array ? 'ARRAY' : r.all_num ? 'INT' : r.all_str ? 'STRING' : 'GENERIC';
          stat = {
            name: String(r.name),
            nameKey: key,
            type,
            min: type === 'INT' && r.min_num !== null ? Number(r.min_num) : null,
            max: type === 'INT' && r.max_num !== null ? Number(r.max_num) : null,
            tokens: Number(r.tokens),
            distinctValues: Number(r.distinct_values),
            values: [],
          };
          out.set(key, stat);
        }
        if (r.value_text === null || r.value_text === undefined) continue;
        const value = r.value_num !== null ? Number(r.value_num) : r.is_bool ? r.value_text === 'true' : String(r.value_text);
        stat.values.push({ value, count: Number(r.n) });
      }
      return [...out.values()];
    },

    /** Whether the contract's tokens were ever listed (a refreshAll), and the caller's own one in progress. */
    async enumeration(chainId: number, contract: string, projectId: number | null): Promise<EnumerationState> {
      const res = await db.query<{ type: string | null; done: boolean; running: boolean; own: string | number | null }>(
        `SELECT (SELECT type FROM contracts WHERE chain_id = $1 AND address = $2) AS type,
                EXISTS (SELECT 1 FROM tasks WHERE chain_id = $1 AND contract_address = $2 AND refresh_all AND NOT only_new
                          AND NOT cancelled AND status = 'DONE') AS done,
                EXISTS (SELECT 1 FROM tasks WHERE chain_id = $1 AND contract_address = $2 AND refresh_all AND NOT only_new
                          AND NOT cancelled AND status = 'QUEUED') AS running,
                (SELECT max(id) FROM tasks WHERE chain_id = $1 AND contract_address = $2 AND refresh_all AND NOT only_new
                   AND NOT cancelled AND status = 'QUEUED' AND project_id IS NOT DISTINCT FROM $3) AS own`,
        [chainId, contract, projectId],
      );
      const r = res.rows[0]!;
      return { contractType: r.type, done: !!r.done, running: !!r.running, ownTask: r.own === null ? null : Number(r.own) };
    },
  };
}
export type SearchStore = ReturnType<typeof searchStore>;
