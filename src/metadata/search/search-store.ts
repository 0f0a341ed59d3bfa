import { likeEscape, type Queryable } from '../../store/db.ts';
import { summaryColumns, toRecord, toSummary, type TokenRecord, type TokenSummary } from '../tokens/token-store.ts';
import { formatRankCursor, parseRankCursor } from './cursor.ts';
import { numbersOf, valueKeysOf, type PropertyCondition, type TokenFilter } from './filter.ts';

/** Collects positional parameters while a statement is assembled; values never enter the SQL text. */
class Params {
  readonly values: unknown[] = [];
  add(v: unknown): string {
    this.values.push(v);
    return `$${this.values.length}`;
  }
  /** The placeholder of a value already added (at(-1): the last one). */
  at(i: number): string {
    return `$${i < 0 ? this.values.length + 1 + i : i + 1}`;
  }
}

const NAME = `lower(t.metadata->>'name')`;
const DESCRIPTION = `lower(t.metadata->>'description')`;

/**
 * The text part of a search across contracts (SearchTokenMetadataByQuery): what matches, and how it ranks. Exact name, name prefix, name
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
 * The text tiers of a search, best first: exact name, name prefix, name substring, description
 * substring, then (text of three characters or more) trigram similarity for typos. Each tier's
 * condition excludes the tiers before it, so a token is in one tier only. Tiers 0-3 go in token
 * order, so each is read from the token-order index (stopping at the page's end) or from the
 * trigram indexes (when it is rare); the typo tier ranks by similarity.
 */
function textTiers(text: string, p: Params): { tiers: string[]; fuzzy: string | null; sim: string } {
  const q = text.trim().toLowerCase();
  const $q = p.add(q);
  const $prefix = p.add(`${likeEscape(q)}%`);
  const $contains = p.add(`%${likeEscape(q)}%`);
  const inName = `coalesce(${NAME} LIKE ${$contains} ESCAPE '\\', false)`;
  const inDescription = `coalesce(${DESCRIPTION} LIKE ${$contains} ESCAPE '\\', false)`;
  const prefix = `${NAME} LIKE ${$prefix} ESCAPE '\\'`;
  return {
    tiers: [`${NAME} = ${$q}`, `${prefix} AND ${NAME} <> ${$q}`, `${NAME} LIKE ${$contains} ESCAPE '\\' AND NOT ${prefix}`, `${DESCRIPTION} LIKE ${$contains} ESCAPE '\\' AND NOT ${inName}`],
    // Typos are looked for word by word (typoWords); a token already in a substring tier is not again.
    fuzzy: typoWords(q).length ? `NOT ${inName} AND NOT ${inDescription}` : null,
    sim: `greatest(similarity(${NAME}, ${$q}), word_similarity(${$q}, ${NAME}), word_similarity(${$q}, coalesce(${DESCRIPTION}, '')))`,
  };
}

/**
 * The words of a search text that may be misspelt: as migration 0026 splits names and descriptions
 * (three characters or more, with a letter), at most 8.
 */
export function typoWords(text: string): string[] {
  const words = text
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter((w) => w.length >= 3 && w.length <= 64 && /\p{L}/u.test(w));
  return [...new Set(words)].slice(0, 8);
}

/** How many of a contract's words, nearest first, stand for one word of the text in the typo tier. */
const NEAREST_WORDS = 5;

/** Where the typo tier's branch goes, once the near words are known (see byFilter). */
const TYPOS = '/*typos*/';

/** How many typo-only matches (the first, in token order) the typo tier ranks: it bounds the tier's work. */
export const TYPO_CANDIDATES = 1000;

/**
 * The condition that a token_properties row (alias `a`) is a pair with this property name whose
 * value is one of `values` and within [min, max].
 */
function pairSql(c: PropertyCondition, p: Params, a: string): string {
  const parts = [`${a}.name_key = ${p.add(c.name.toLowerCase())}`];
  if (c.values) {
    const keys = valueKeysOf(c);
    const nums = numbersOf(c);
    parts.push(`(${a}.value_key = ANY(${p.add(keys)}::text[])${nums.length ? ` OR ${a}.value_num = ANY(${p.add(nums)}::numeric[])` : ''})`);
  }
  if (c.min !== null) parts.push(`${a}.value_num >= ${p.add(String(c.min))}::numeric`);
  if (c.max !== null) parts.push(`${a}.value_num <= ${p.add(String(c.max))}::numeric`);
  return parts.join(' AND ');
}

/**
 * A test of one token (its id in `idCol`) against a property: one descent of the probe index
 * (chain, contract, token, name). Written as a scalar subquery so the planner keeps it a per-row
 * test in the order given (the rarest property first) instead of turning it into a join over
 * every token having the property.
 */
function probeSql(c: PropertyCondition, p: Params, $chain: string, $contract: string, idCol: string): string {
  return `(SELECT true FROM token_properties x WHERE x.chain_id = ${$chain} AND x.contract_address = ${$contract} AND x.token_id = ${idCol} AND ${pairSql(c, p, 'x')} LIMIT 1)`;
}

/** Token ids are canonical decimals: by length, then text, is numeric order. */
const TOKEN_ORDER = 'length(t.token_id), t.token_id';
const after = (col: string, $id: string) => `(length(${col}), ${col}) > (length(${$id}::text), ${$id}::text)`;

export interface SearchPage {
  page: number;
  pageSize: number;
  /**
   * Keyset cursor: the previous page's last token id (searches in token order), or its rank
   * cursor (`tier:similarity:tokenId`, searches with text, see cursor.ts); `page` is then ignored.
   */
  after?: string | null;
}

/** How many tokens have each property of a filter, from the counts (an upper bound when values are ORed). */
interface Selectivity {
  total: number;
  counts: number[];
}

/**
 * The plan of a search without text, by the counts: walking the tokens in order tests about
 * need / (product of the properties' shares) tokens, one probe each for most; starting from the
 * rarest property's ids reads all of them (cheap index entries, but each tested against the other
 * properties when there are some) and sorts them.
 */
function walkCost(s: Selectivity, need: number): number {
  const share = s.counts.reduce((a, n) => a * Math.min(1, n / Math.max(1, s.total)), 1);
  return Math.min(s.total, need / Math.max(share, 1e-9));
}
function setCost(s: Selectivity): number {
  const rarest = Math.min(...s.counts);
  return s.counts.length === 1 ? rarest / 10 : rarest;
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
    /**
     * Tokens of one contract matching the filter, ranked when there is text, in token order
     * otherwise; `cursor` starts the next page (see SearchPage.after).
     */
    async byFilter(chainId: number, contract: string, f: TokenFilter, page: SearchPage, idsOnly: boolean): Promise<{ rows: TokenSummary[] | string[]; more: boolean; cursor: string | null }> {
      // The properties, rarest first: the first decides where a search starts, and each token is
      // tested against the rarest first (most tokens fail there).
      let props = f.properties;
      let sel: Selectivity | null = null;
      if (props.length) {
        sel = await this.selectivity(chainId, contract, props);
        // A property no token has (with such a value): nothing matches, and no row need be read.
        if (sel.counts.some((n) => n === 0)) return { rows: [], more: false, cursor: null };
        const order = props.map((_, i) => i).sort((a, b) => sel!.counts[a]! - sel!.counts[b]!);
        props = order.map((i) => props[i]!);
        sel = { total: sel.total, counts: order.map((i) => sel!.counts[i]!) };
      }
      const p = new Params();
      const $chain = p.add(chainId);
      const $contract = p.add(contract);
      const cols = idsOnly ? 't.token_id' : summaryColumns('t');
      const rank = f.text !== null && page.after != null ? parseRankCursor(page.after) : null;
      const $after = f.text === null && page.after != null ? p.add(page.after) : null;
      const cursorAt = rank !== null || $after !== null;
      // A cursor starts the page right after the previous page's last token: no rows are read and
      // skipped, however deep the page.
      const offset = cursorAt ? 0 : page.page * page.pageSize;
      const need = offset + page.pageSize + 1;
      const $limit = p.add(page.pageSize + 1);
      const $offset = p.add(offset);
      const base = [`t.chain_id = ${$chain}`, `t.contract_address = ${$contract}`, 't.metadata IS NOT NULL'];
      let sql: string;
      let typoBranch: ((walk: string, also: string) => string) | null = null;
      if (f.text === null) {
        const walk = sel === null || walkCost(sel, need) <= setCost(sel);
        if (walk) {
          // Common properties: walk the tokens in order (token-order index) and test each; the
          // page is full after about need / selectivity tokens.
          const where = [...base, ...props.map((c) => probeSql(c, p, $chain, $contract, 't.token_id'))];
          if ($after !== null) where.push(after('t.token_id', $after));
          sql = `SELECT ${cols} FROM token_metadata t WHERE ${where.join(' AND ')} ORDER BY ${TOKEN_ORDER} LIMIT ${$limit} OFFSET ${$offset}`;
        } else {
          // A rare property: its ids (from its index alone) are few; test them against the others,
          // page them, and only then read the page's rows.
          const [first, ...rest] = props;
          const where = rest.map((c) => probeSql(c, p, $chain, $contract, 'm.token_id'));
          if ($after !== null) where.push(after('m.token_id', $after));
          sql = `WITH page AS (
                   SELECT m.token_id FROM (SELECT DISTINCT a.token_id FROM token_properties a
                                            WHERE a.chain_id = ${$chain} AND a.contract_address = ${$contract} AND ${pairSql(first!, p, 'a')}) AS m
                    WHERE ${where.length ? where.join(' AND ') : 'true'}
                    ORDER BY length(m.token_id), m.token_id LIMIT ${$limit} OFFSET ${$offset})
                 SELECT ${cols} FROM page JOIN token_metadata t ON t.chain_id = ${$chain} AND t.contract_address = ${$contract} AND t.token_id = page.token_id
                  WHERE t.metadata IS NOT NULL ORDER BY ${TOKEN_ORDER}`;
        }
      } else {
        // Text: one branch per tier, each bounded to the rows the page can need, in rank order.
        const tt = textTiers(f.text, p);
        const probes = props.map((c) => probeSql(c, p, $chain, $contract, 't.token_id'));
        const $need = p.add(need);
        const branches: string[] = [];
        for (const [tier, cond] of tt.tiers.entries()) {
          const where = [...base, cond, ...probes];
          // Tiers before the cursor's are done (kept as an empty branch: their parameters stay typed).
          if (rank && tier < rank.tier) where.push('false');
          if (rank && tier === rank.tier) where.push(after('t.token_id', p.add(rank.tokenId)));
          branches.push(`(SELECT t.token_id AS id, ${tier} AS tier, 0::real AS sim FROM token_metadata t WHERE ${where.join(' AND ')}
                           ORDER BY ${TOKEN_ORDER} LIMIT ${$need})`);
        }
        const fuzzy = tt.fuzzy;
        if (fuzzy !== null) {
          // The typo tier: tokens having, for every word of the text, one of the contract's words
          // nearest to it (filled in below, only when the substring tiers leave room), its first
          // TYPO_CANDIDATES in token order ranked by similarity. The tokens of the rarest word's near
          // words are walked in token order from the word index and stop at TYPO_CANDIDATES, so a word
          // every token has costs no more than that; the other words are tested per token. Built only
          // when it is read: a parameter a statement does not use could not be typed.
          typoBranch = (walk: string, also: string) => {
            const cursor = rank && rank.tier === 4 ? `WHERE c.sim < ${p.add(rank.sim)}::real OR (c.sim = ${p.at(-1)}::real AND ${after('c.id', p.add(rank.tokenId))})` : '';
            return `(SELECT c.id, 4 AS tier, c.sim FROM (
                       SELECT t.token_id AS id, ${tt.sim}::real AS sim
                         FROM (SELECT DISTINCT x.token_id FROM unnest(${walk}::text[]) AS near(word) CROSS JOIN LATERAL (
                                 SELECT w.token_id FROM token_words w
                                   JOIN token_metadata t ON t.chain_id = w.chain_id AND t.contract_address = w.contract_address AND t.token_id = w.token_id
                                  WHERE w.chain_id = ${$chain} AND w.contract_address = ${$contract} AND w.word = near.word
                                    AND ${[...base, fuzzy, ...probes, also].join(' AND ')}
                                  ORDER BY length(w.token_id), w.token_id LIMIT ${TYPO_CANDIDATES}) AS x) AS ids
                         JOIN token_metadata t ON t.chain_id = ${$chain} AND t.contract_address = ${$contract} AND t.token_id = ids.token_id
                        ORDER BY ${TOKEN_ORDER} LIMIT ${TYPO_CANDIDATES}) AS c
                      ${cursor} ORDER BY c.sim DESC, length(c.id), c.id LIMIT ${$need})`;
          };
        }
        sql = `SELECT ${cols}, r.tier AS rank_tier, r.sim AS rank_sim
                 FROM (${branches.join(' UNION ALL ')}${TYPOS}) AS r
                 JOIN token_metadata t ON t.chain_id = ${$chain} AND t.contract_address = ${$contract} AND t.token_id = r.id
                ORDER BY r.tier, r.sim DESC, ${TOKEN_ORDER} LIMIT ${$limit} OFFSET ${$offset}`;
      }
      // The typo tier is read only when the substring tiers do not fill the page: it needs the
      // contract's words nearest to the text's first (one more statement).
      let res = await db.query(sql.replace(TYPOS, ''), p.values);
      if (typoBranch !== null && res.rows.length <= page.pageSize) {
        const groups = await this.nearestWords(chainId, contract, typoWords(f.text!));
        // Every word of the text must have a near word in the contract, or no token has them all.
        if (groups.length && groups.every((g) => g.words.length)) {
          const [walk, ...also] = [...groups].sort((a, b) => a.tokens - b.tokens);
          const tests = also.map(
            (g) => `EXISTS (SELECT 1 FROM token_words v WHERE v.chain_id = ${$chain} AND v.contract_address = ${$contract} AND v.token_id = t.token_id AND v.word = ANY(${p.add(g.words)}::text[]))`,
          );
          const branch = (typoBranch as (walk: string, also: string) => string)(p.add(walk!.words), tests.length ? tests.join(' AND ') : 'true');
          res = await db.query(sql.replace(TYPOS, ` UNION ALL ${branch}`), p.values);
        }
      }
      const more = res.rows.length > page.pageSize;
      const rows = res.rows.slice(0, page.pageSize);
      const last = rows.at(-1);
      const cursor = !last ? null : f.text === null ? String(last.token_id) : formatRankCursor({ tier: Number(last.rank_tier), sim: Number(last.rank_sim), tokenId: String(last.token_id) });
      return { rows: idsOnly ? rows.map((r) => String(r.token_id)) : rows.map(toSummary), more, cursor };
    },

    /**
     * For each of `words`, the contract's words nearest to it by trigram similarity (at least pg_trgm's
     * threshold, NEAREST_WORDS at most; only the word itself when the contract has it) and how many
     * tokens have one of them (an upper bound).
     */
    async nearestWords(chainId: number, contract: string, words: string[]): Promise<Array<{ word: string; words: string[]; tokens: number }>> {
      if (words.length === 0) return [];
      const res = await db.query<{ q: string; word: string; tokens: number | string }>(
        `SELECT q.w AS q, n.word, n.tokens FROM unnest($3::text[]) AS q(w) CROSS JOIN LATERAL (
           SELECT word, tokens FROM token_text_words
            WHERE chain_id = $1 AND contract_address = $2 AND word % q.w
            ORDER BY similarity(word, q.w) DESC, word LIMIT ${NEAREST_WORDS}) AS n`,
        [chainId, contract, words],
      );
      return words.map((w) => {
        const near = res.rows.filter((r) => r.q === w);
        const exact = near.find((r) => r.word === w);
        const chosen = exact ? [exact] : near;
        return { word: w, words: chosen.map((r) => r.word), tokens: chosen.reduce((a, r) => a + Number(r.tokens), 0) };
      });
    },

    /** How many tokens have each property (upper bounds), and about how many tokens the contract has. */
    async selectivity(chainId: number, contract: string, props: PropertyCondition[]): Promise<Selectivity> {
      const p = new Params();
      const $chain = p.add(chainId);
      const $contract = p.add(contract);
      const num = `CASE WHEN v.has_num THEN v.value_key::numeric END`;
      const counts = props.map((c) => {
        const $name = p.add(c.name.toLowerCase());
        if (!c.values && c.min === null && c.max === null) {
          return `(SELECT coalesce(max(tokens), 0) FROM token_property_names WHERE chain_id = ${$chain} AND contract_address = ${$contract} AND name_key = ${$name})`;
        }
        const parts = [`v.chain_id = ${$chain}`, `v.contract_address = ${$contract}`, `v.name_key = ${$name}`];
        if (c.values) {
          const nums = numbersOf(c);
          parts.push(`(v.value_key = ANY(${p.add(valueKeysOf(c))}::text[])${nums.length ? ` OR ${num} = ANY(${p.add(nums)}::numeric[])` : ''})`);
        }
        if (c.min !== null) parts.push(`${num} >= ${p.add(String(c.min))}::numeric`);
        if (c.max !== null) parts.push(`${num} <= ${p.add(String(c.max))}::numeric`);
        return `(SELECT coalesce(sum(v.tokens), 0) FROM token_property_values v WHERE ${parts.join(' AND ')})`;
      });
      const res = await db.query<Record<string, string | number>>(
        `SELECT (SELECT coalesce(max(tokens), 0) FROM token_property_names WHERE chain_id = ${$chain} AND contract_address = ${$contract}) AS total,
                ${counts.map((c, i) => `${c} AS c${i}`).join(', ')}`,
        p.values,
      );
      const r = res.rows[0]!;
      return { total: Number(r.total), counts: props.map((_, i) => Number(r[`c${i}`])) };
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
      // Read from the counts kept as tokens are indexed (migration 0025), not from every pair.
      const res = await db.query<Record<string, unknown>>(
        `WITH v AS (
           SELECT *, CASE WHEN has_num THEN value_key::numeric END AS value_num FROM token_property_values
            WHERE chain_id = $1 AND contract_address = $2 AND tokens > 0 AND NOT (name_key = ANY($3::text[]))
         ), names AS (
           SELECT v.name_key, n.tokens, min(v.name) AS name, bool_or(v.kind = 'array') AS in_array,
                  bool_and(v.kind = 'number') AS all_num, bool_and(v.kind = 'string') AS all_str,
                  min(v.value_num) AS min_num, max(v.value_num) AS max_num, count(DISTINCT v.value_key) AS distinct_values
             FROM v JOIN token_property_names n ON n.chain_id = $1 AND n.contract_address = $2 AND n.name_key = v.name_key
            GROUP BY v.name_key, n.tokens ORDER BY n.tokens DESC, v.name_key LIMIT $5
         ), vals AS (
           SELECT v.name_key, v.value_key, min(v.value_text) AS value_text, min(v.value_num) AS value_num,
                  bool_and(v.kind = 'boolean') AS is_bool, sum(v.tokens) AS n
             FROM v JOIN names USING (name_key) GROUP BY v.name_key, v.value_key
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
