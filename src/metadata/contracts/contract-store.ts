import type { Address } from 'viem';
import { z } from 'zod';
import { likeEscape, type Db, type Queryable } from '../../store/db.ts';
import { Extensions, ListLayer, OverrideLayer, UriLayer, mergeContractInfo } from './contract-merge.ts';
import type { ChainLayer } from './contract-reader.ts';

const ts = z.union([z.date(), z.string()]).transform((v) => new Date(v));

const ChainLayerSchema = z.object({
  type: z.enum(['ERC20', 'ERC721', 'ERC1155', 'UNKNOWN']),
  deployed: z.boolean(),
  bytecodeHash: z.string(),
  name: z.string().nullable(),
  symbol: z.string().nullable(),
  decimals: z.number().nullable(),
  totalSupply: z.string().nullable(),
  contractURI: z.string().nullable(),
  implementation: z.string().nullable(),
});

const ContractRowSchema = z.object({
  chain_id: z.coerce.number(),
  address: z.string(),
  type: z.string(),
  name: z.string(),
  symbol: z.string(),
  decimals: z.coerce.number().nullable(),
  logo_uri: z.string(),
  extensions: Extensions,
  source: z.string(),
  deployed: z.boolean(),
  bytecode_hash: z.string(),
  chain_layer: ChainLayerSchema.nullable(),
  uri_layer: UriLayer.nullable(),
  list_layer: ListLayer.nullable(),
  override_layer: OverrideLayer.nullable(),
  info_fetched_at: ts.nullable(),
  info_failure: z.string().nullable(),
  curated: z.boolean(),
  updated_at: ts,
});
export type ContractRow = z.infer<typeof ContractRowSchema>;

/** Layers to write: undefined keeps what is stored, null clears it. */
export interface LayerUpdate {
  address: Address;
  chain?: ChainLayer | null;
  uri?: UriLayer | null;
  list?: ListLayer | null;
  override?: OverrideLayer | null;
  /** Set when the chain layer was just read. */
  fetched?: boolean;
  failure?: string | null;
}

export const CONTRACT_COLUMNS =
  'chain_id, address, type, name, symbol, decimals, logo_uri, extensions, source, deployed, bytecode_hash, chain_layer, uri_layer, list_layer, override_layer, info_fetched_at, info_failure, curated, updated_at';

export interface SearchOptions {
  q: string;
  chainIds: number[] | null;
  types: string[] | null;
  page: number;
  pageSize: number;
  /** Only contracts in the token directory (featured ones only, if asked). */
  directory?: { onlyFeatured: boolean };
}

/** A stored contract row (the columns of CONTRACT_COLUMNS) as the store reads it. */
export const parseContractRow = (row: unknown): ContractRow => ContractRowSchema.parse(row);

/** The stored fields a ContractInfo answer is made of: a write that leaves them all equal changed nothing a client sees. */
const INFO_FIELDS = ['type', 'name', 'symbol', 'decimals', 'logo_uri', 'extensions', 'source', 'deployed', 'bytecode_hash'] as const;

export interface ContractChange {
  chainId: number;
  address: string;
  /** The ContractInfo fields that changed, by their stored names (logo_uri, bytecode_hash…). */
  fields: string[];
  row: ContractRow;
}
/** Called on the transaction that wrote the layers, with the contracts whose stored ContractInfo changed. */
export type ContractChangeHook = (q: Queryable, changes: ContractChange[]) => Promise<void>;

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** Needs a Db, not only a Queryable: layer writes run in transactions. */
export function contractStore(db: Db, opts: { onInfoChanged?: ContractChangeHook } = {}) {
  const parse = (rows: unknown[]) => rows.map(parseContractRow);

  const getManyOn = async (q: Queryable, chainId: number, addresses: string[]): Promise<Map<string, ContractRow>> => {
    if (!addresses.length) return new Map();
    const res = await q.query(`SELECT ${CONTRACT_COLUMNS} FROM contracts WHERE chain_id = $1 AND address = ANY($2::text[])`, [chainId, addresses]);
    return new Map(parse(res.rows).map((r) => [r.address, r]));
  };
  const getMany = (chainId: number, addresses: string[]) => getManyOn(db, chainId, addresses);

  return {
    getMany,

    /** Every chain's record of an address. */
    async findByAddress(addresses: string[]): Promise<ContractRow[]> {
      if (!addresses.length) return [];
      const res = await db.query(`SELECT ${CONTRACT_COLUMNS} FROM contracts WHERE address = ANY($1::text[]) ORDER BY chain_id`, [addresses]);
      return parse(res.rows);
    },

    /**
     * Writes layers and the merged fields recomputed from all of them. Each writer owns one or two
     * layers (the chain reader, a token list import, an operator's override) and they run in
     * different processes, so the read-merge-write happens under row locks: a concurrent writer
     * waits and then merges onto this one's layers instead of dropping them.
     */
    async upsertLayers(chainId: number, updates: LayerUpdate[]): Promise<Map<string, ContractRow>> {
      if (!updates.length) return new Map();
      // One update per address (the later one's defined fields win), in a fixed order so two
      // writers lock rows in the same order and cannot deadlock.
      const byAddress = new Map<string, LayerUpdate>();
      for (const u of updates) {
        const prev = byAddress.get(u.address);
        const defined = Object.fromEntries(Object.entries(u).filter(([, v]) => v !== undefined)) as Partial<LayerUpdate>;
        byAddress.set(u.address, prev ? { ...prev, ...defined, fetched: !!(prev.fetched || u.fetched) } : u);
      }
      const addresses = [...byAddress.keys()].sort();
      return db.transaction(async (tx) => {
        // Missing rows are created first, so there is a row to lock for every address.
        await tx.query(`INSERT INTO contracts (chain_id, address) SELECT $1, a FROM unnest($2::text[]) AS a ORDER BY a ON CONFLICT DO NOTHING`, [chainId, addresses]);
        const locked = await tx.query(`SELECT ${CONTRACT_COLUMNS} FROM contracts WHERE chain_id = $1 AND address = ANY($2::text[]) ORDER BY address FOR UPDATE`, [chainId, addresses]);
        const existing = new Map(parse(locked.rows).map((r) => [r.address, r]));
        const rows = addresses.map((address) => {
          const u = byAddress.get(address)!;
          const prev = existing.get(address);
          const layer = <K extends 'chain' | 'uri' | 'list' | 'override'>(k: K, col: keyof ContractRow) => (u[k] === undefined ? (prev?.[col] ?? null) : u[k]);
          const chain = layer('chain', 'chain_layer') as ChainLayer | null;
          const uri = layer('uri', 'uri_layer') as UriLayer | null;
          const list = layer('list', 'list_layer') as ListLayer | null;
          const override = layer('override', 'override_layer') as OverrideLayer | null;
          const m = mergeContractInfo({ chain, uri, list, override });
          return {
            address,
            type: m.type,
            name: m.name,
            symbol: m.symbol,
            decimals: m.decimals,
            logo_uri: m.logoURI,
            extensions: m.extensions,
            source: m.source,
            deployed: chain?.deployed ?? prev?.deployed ?? false,
            bytecode_hash: chain?.bytecodeHash ?? prev?.bytecode_hash ?? '0x',
            chain_layer: chain,
            uri_layer: uri,
            list_layer: list,
            override_layer: override,
            fetched: !!u.fetched,
            info_failure: u.failure === undefined ? (prev?.info_failure ?? null) : u.failure,
            curated: m.curated,
          };
        });
        await tx.query(
          `UPDATE contracts AS c SET
             type = x.type, name = x.name, symbol = x.symbol, decimals = x.decimals, logo_uri = x.logo_uri,
             extensions = x.extensions, source = x.source, deployed = x.deployed, bytecode_hash = x.bytecode_hash,
             chain_layer = x.chain_layer, uri_layer = x.uri_layer, list_layer = x.list_layer, override_layer = x.override_layer,
             type_checked_at = CASE WHEN x.fetched THEN now() ELSE c.type_checked_at END,
             info_fetched_at = CASE WHEN x.fetched THEN now() ELSE c.info_fetched_at END,
             info_failure = x.info_failure, curated = x.curated, updated_at = now()
           FROM jsonb_to_recordset($2::jsonb) AS x(address text, type text, name text, symbol text, decimals int, logo_uri text,
                extensions jsonb, source text, deployed boolean, bytecode_hash text, chain_layer jsonb, uri_layer jsonb,
                list_layer jsonb, override_layer jsonb, fetched boolean, info_failure text, curated boolean)
           WHERE c.chain_id = $1 AND c.address = x.address`,
          [chainId, JSON.stringify(rows)],
        );
        const after = await getManyOn(tx, chainId, addresses);
        if (opts.onInfoChanged) {
          const changes: ContractChange[] = [];
          for (const [address, row] of after) {
            const prev = existing.get(address);
            const fields = INFO_FIELDS.filter((f) => !prev || !same(prev[f], row[f]));
            if (fields.length) changes.push({ chainId, address, fields, row });
          }
          if (changes.length) await opts.onInfoChanged(tx, changes);
        }
        return after;
      });
    },

    /** Contracts last written before a time on these chains, oldest first, by chain. */
    async updatedBefore(before: Date, max: number, chainIds: number[]): Promise<Map<number, Address[]>> {
      const res = await db.query<{ chain_id: string; address: Address }>(
        `SELECT chain_id, address FROM contracts WHERE updated_at < $1 AND chain_id = ANY($2::bigint[]) ORDER BY updated_at, chain_id, address LIMIT $3`,
        [before, chainIds, max],
      );
      const out = new Map<number, Address[]>();
      for (const r of res.rows) out.set(Number(r.chain_id), [...(out.get(Number(r.chain_id)) ?? []), r.address]);
      return out;
    },

    async listOverrides(chainId: number | null, page: number, pageSize: number): Promise<ContractRow[]> {
      const res = await db.query(
        `SELECT ${CONTRACT_COLUMNS} FROM contracts WHERE override_layer IS NOT NULL AND ($1::bigint IS NULL OR chain_id = $1)
          ORDER BY chain_id, address LIMIT $2 OFFSET $3`,
        [chainId, pageSize, page * pageSize],
      );
      return parse(res.rows);
    },

    /**
     * Ranked search over name and symbol: exact symbol, then exact name, then name prefix, then a
     * word of the name, then similarity (trigram, tolerant of typos); curated contracts first within
     * a tier; a stable tiebreak keeps pages free of duplicates and gaps. A query of one or two
     * characters has no trigrams: it ranks shorter names first within a tier (what similarity to it
     * comes to) and runs as `shortSearch`.
     */
    async search(o: SearchOptions): Promise<{ rows: ContractRow[]; more: boolean }> {
      const q = o.q.trim().toLowerCase();
      const res = q.length >= 3 ? await db.query(...trigramSearch(q, o)) : await db.query(...shortSearch(q, o));
      const rows = parse(res.rows.slice(0, o.pageSize));
      return { rows, more: res.rows.length > o.pageSize };
    },
  };
}

/** The filters every search applies, on parameters $3 (chain ids) and $4 (types). */
function searchFilters(o: SearchOptions): string {
  const directory = o.directory
    ? `AND EXISTS (SELECT 1 FROM token_directory d WHERE d.chain_id = contracts.chain_id AND d.address = contracts.address
                     AND NOT d.removed${o.directory.onlyFeatured ? ' AND d.feature_index > 0' : ''})`
    : '';
  return `(name <> '' OR symbol <> '')
    AND ($3::bigint[] IS NULL OR chain_id = ANY($3::bigint[]))
    AND ($4::text[] IS NULL OR type = ANY($4::text[]))
    ${directory}`;
}

/** Three characters or more: every match found through the indexes, ranked by tier and similarity. */
function trigramSearch(q: string, o: SearchOptions): [string, unknown[]] {
  return [
    `WITH hits AS (
       SELECT ${CONTRACT_COLUMNS},
         CASE WHEN lower(symbol) = $1 THEN 0
              WHEN lower(name) = $1 THEN 1
              WHEN lower(name) LIKE $2 ESCAPE '\\' THEN 2
              WHEN search @@ plainto_tsquery('simple', $1) THEN 3
              ELSE 4 END AS tier,
         greatest(similarity(lower(name), $1), similarity(lower(symbol), $1)) AS sim, word_similarity($1, lower(name)) AS word_sim
       FROM contracts
       WHERE ${searchFilters(o)}
         AND (lower(symbol) = $1 OR lower(name) LIKE $2 ESCAPE '\\' OR search @@ plainto_tsquery('simple', $1)
              OR lower(name) % $1 OR lower(name) %> $1 OR lower(symbol) % $1)
     )
     SELECT * FROM hits ORDER BY tier, curated DESC, sim DESC, word_sim DESC, chain_id, address LIMIT $5 OFFSET $6`,
    [q, `${likeEscape(q)}%`, o.chainIds, o.types, o.pageSize + 1, o.page * o.pageSize],
  ];
}

/**
 * One or two characters: each tier on its own, cut at the end of the page, then merged. The prefix
 * tier is read in rank order from an index on the name's first one or two characters (migration 0056)
 * and stops at the page; read through the other indexes, "ko" matched 3 500 of 100 000 names, every
 * one fetched and sorted for 20 (bench/contract-search.ts: PGlite p50 31 → 5 ms, 30 Nov). The tiers
 * exclude each other as the CASE of the longer search does, so a contract appears once.
 */
function shortSearch(q: string, o: SearchOptions): [string, unknown[]] {
  const head = `left(lower(name), ${q.length})`; // the indexed expression, literally (1 or 2)
  const where = searchFilters(o);
  const rank = 'curated DESC, length(name), lower(name), chain_id, address';
  const tier = (n: number, cond: string) => `(SELECT ${CONTRACT_COLUMNS}, ${n} AS tier FROM contracts WHERE ${cond} AND ${where} ORDER BY ${rank} LIMIT $2::int + $5::int)`;
  return [
    `SELECT * FROM (
       ${tier(0, 'lower(symbol) = $1')}
       UNION ALL ${tier(1, 'lower(name) = $1 AND lower(symbol) <> $1')}
       UNION ALL ${tier(2, `${head} = $1 AND lower(name) <> $1 AND lower(symbol) <> $1`)}
       UNION ALL ${tier(3, `search @@ plainto_tsquery('simple', $1) AND ${head} <> $1 AND lower(symbol) <> $1`)}
     ) hits ORDER BY tier, ${rank} LIMIT $2 OFFSET $5`,
    [q, o.pageSize + 1, o.chainIds, o.types, o.page * o.pageSize],
  ];
}

export type ContractStore = ReturnType<typeof contractStore>;
