import type { Address } from 'viem';
import { z } from 'zod';
import type { Db, Queryable } from '../../store/db.ts';
import { reindexTokens } from '../search/property-index.ts';

/** The normalised fields served for a token; `raw` keeps the origin's document untouched. */
export const StoredMetadataSchema = z.record(z.string(), z.unknown());

const ts = z.union([z.date(), z.string()]).transform((v) => new Date(v));

const TokenRowSchema = z.object({
  chain_id: z.coerce.number(),
  contract_address: z.string(),
  token_id: z.string(),
  source: z.string(),
  token_uri: z.string().nullable(),
  metadata: StoredMetadataSchema.nullable(),
  raw: z.unknown().nullable(),
  failure_reason: z.string().nullable(),
  failure_message: z.string().nullable(),
  retry_after: ts.nullable(),
  trace: z.unknown().nullable(),
  fetch_count: z.coerce.number(),
  last_fetched: ts.nullable(),
  last_attempt: ts.nullable(),
  updated_at: ts,
});

export interface TokenRecord {
  chainId: number;
  contract: string;
  tokenId: string;
  source: string;
  tokenUri: string | null;
  metadata: Record<string, unknown> | null;
  raw: unknown;
  failureReason: string | null;
  failureMessage: string | null;
  retryAfter: Date | null;
  trace: unknown;
  fetchCount: number;
  lastFetched: Date | null;
  lastAttempt: Date | null;
  updatedAt: Date;
}

/**
 * A stored token without its raw document and resolution trace: what answers built from many tokens
 * (searches) need, read with SUMMARY_COLUMNS at half the parsing of whole rows.
 */
export type TokenSummary = Omit<TokenRecord, 'raw' | 'trace'>;
const SUMMARY_COLUMNS = [
  'chain_id',
  'contract_address',
  'token_id',
  'source',
  'token_uri',
  'metadata',
  'failure_reason',
  'failure_message',
  'retry_after',
  'fetch_count',
  'last_fetched',
  'last_attempt',
  'updated_at',
];
/** SUMMARY_COLUMNS of the table aliased `alias`, for a select list. */
export const summaryColumns = (alias: string) => SUMMARY_COLUMNS.map((c) => `${alias}.${c}`).join(', ');
const when = (v: unknown): Date | null => (v === null || v === undefined ? null : v instanceof Date ? v : new Date(String(v)));
const textOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));

/**
 * A summary from a row of SUMMARY_COLUMNS. Checked by hand, not by TokenRowSchema: zod's parse
 * copies every row's document, and on a page of 100 tokens that doubled the garbage a search made
 * and the young-generation pauses in its slowest answers (bench/token-search.ts).
 */
export function toSummary(row: Record<string, unknown>): TokenSummary {
  const m = row.metadata;
  if (m !== null && (typeof m !== 'object' || Array.isArray(m))) throw new Error(`token ${String(row.token_id)}: stored metadata is not an object`);
  return {
    chainId: Number(row.chain_id),
    contract: String(row.contract_address),
    tokenId: String(row.token_id),
    source: String(row.source),
    tokenUri: textOrNull(row.token_uri),
    metadata: m as Record<string, unknown> | null,
    failureReason: textOrNull(row.failure_reason),
    failureMessage: textOrNull(row.failure_message),
    retryAfter: when(row.retry_after),
    fetchCount: Number(row.fetch_count),
    lastFetched: when(row.last_fetched),
    lastAttempt: when(row.last_attempt),
    updatedAt: when(row.updated_at)!,
  };
}

/** A whole stored token, its row checked by TokenRowSchema; the fields are toSummary's, with the raw document and trace. */
export function toRecord(row: unknown): TokenRecord {
  const r = TokenRowSchema.parse(row);
  return { ...toSummary(r), raw: r.raw, trace: r.trace };
}

/** The outcome of one resolution attempt of one token. */
export type Resolution =
  | { ok: true; tokenUri: string | null; metadata: Record<string, unknown>; raw: unknown; trace: unknown; source: string }
  | { ok: false; tokenUri: string | null; reason: string; message: string; retryAfter: Date | null; trace: unknown; withdrawn?: boolean };

const ContractRowSchema = z.object({
  type: z.string(),
  id_variant: z.coerce.number().nullable(),
  type_checked_at: ts.nullable(),
});

export interface ContractKind {
  type: string;
  idVariant: number | null;
  typeCheckedAt: Date | null;
}

/** One token's row for the upsert, serialised on its own so that one bad document fails alone. */
interface SaveRow {
  tokenId: string;
  tokenUri: string | null;
  trace: unknown;
  json: string;
  /** The failure says the document is gone for good (FetchFailure.withdrawn): the stored one is dropped. */
  withdrawn: boolean;
}

function serialiseRow(tokenId: string, r: Resolution, retryUnstorable: Date): SaveRow {
  const trace = r.trace ?? null;
  try {
    const json = JSON.stringify({
      token_id: tokenId,
      ok: r.ok,
      source: r.ok ? r.source : null,
      token_uri: r.tokenUri,
      metadata: r.ok ? r.metadata : null,
      raw: r.ok ? r.raw : null,
      failure_reason: r.ok ? null : r.reason,
      failure_message: r.ok ? null : r.message,
      retry_after: r.ok || !r.retryAfter ? null : r.retryAfter.toISOString(),
      trace,
    });
    return { tokenId, tokenUri: r.tokenUri, trace, json, withdrawn: !r.ok && r.withdrawn === true };
  } catch (err) {
    return unstorable(tokenId, r.tokenUri, trace, err, retryUnstorable);
  }
}

/** A failure row without the document, for a token whose document could not be stored. */
function unstorable(tokenId: string, tokenUri: string | null, trace: unknown, err: unknown, retryAfter: Date): SaveRow {
  const message = `the document could not be stored: ${(err as Error)?.message ?? String(err)}`.slice(0, 500);
  const row = (t: unknown) =>
    JSON.stringify({
      token_id: tokenId,
      ok: false,
      source: null,
      token_uri: tokenUri,
      metadata: null,
      raw: null,
      failure_reason: 'UNSTORABLE',
      failure_message: message,
      retry_after: retryAfter.toISOString(),
      trace: t,
    });
  let json: string;
  try {
    json = row(trace);
  } catch {
    json = row(null);
  }
  return { tokenId, tokenUri, trace, json, withdrawn: false };
}

async function upsert(db: Queryable, chainId: number, contract: string, rows: SaveRow[]): Promise<Map<string, TokenRecord>> {
  const res = await db.query(
    `INSERT INTO token_metadata AS t (chain_id, contract_address, token_id, source, token_uri, metadata, raw,
                                      failure_reason, failure_message, retry_after, trace, fetch_count,
                                      last_fetched, last_attempt, updated_at)
     SELECT $1, $2, x.token_id, COALESCE(x.source, 'FETCHER_ON_CHAIN_TOKEN_URI'), x.token_uri, x.metadata, x.raw,
            x.failure_reason, x.failure_message, x.retry_after, x.trace, 1,
            CASE WHEN x.ok THEN now() END, now(), now()
       FROM jsonb_to_recordset($3::jsonb) AS x(token_id text, ok boolean, source text, token_uri text, metadata jsonb,
            raw jsonb, failure_reason text, failure_message text, retry_after timestamptz, trace jsonb)
     ON CONFLICT (chain_id, contract_address, token_id) DO UPDATE SET
       token_uri       = EXCLUDED.token_uri,
       source          = CASE WHEN EXCLUDED.last_fetched IS NOT NULL THEN EXCLUDED.source ELSE t.source END,
       metadata        = CASE WHEN EXCLUDED.last_fetched IS NOT NULL THEN EXCLUDED.metadata ELSE t.metadata END,
       raw             = CASE WHEN EXCLUDED.last_fetched IS NOT NULL THEN EXCLUDED.raw ELSE t.raw END,
       last_fetched    = COALESCE(EXCLUDED.last_fetched, t.last_fetched),
       updated_at      = CASE WHEN EXCLUDED.last_fetched IS NOT NULL THEN now() ELSE t.updated_at END,
       failure_reason  = EXCLUDED.failure_reason,
       failure_message = EXCLUDED.failure_message,
       retry_after     = EXCLUDED.retry_after,
       trace           = EXCLUDED.trace,
       fetch_count     = t.fetch_count + 1,
       last_attempt    = now()
     RETURNING *`,
    [chainId, contract, `[${rows.map((r) => r.json).join(',')}]`],
  );
  return new Map(
    res.rows.map((row) => {
      const rec = toRecord(row);
      return [rec.tokenId, rec];
    }),
  );
}

/** A token whose stored document's content changed (hashes: SHA-256 of the canonical jsonb text; old null: first document). */
export interface DocumentChange {
  chainId: number;
  contract: string;
  tokenId: string;
  oldHash: string | null;
  newHash: string;
  metadata: Record<string, unknown>;
}

/** Called on the transaction that stored the changed documents (the events outbox records them there). */
export type DocumentHook = (q: Queryable, changes: DocumentChange[]) => Promise<void>;

const CONTENT_HASH = `encode(sha256(convert_to(metadata::text, 'UTF8')), 'hex')`;

async function contentHashes(q: Queryable, chainId: number, contract: string, ids: string[]): Promise<Map<string, string | null>> {
  const r = await q.query<{ token_id: string; h: string | null }>(
    `SELECT token_id, CASE WHEN metadata IS NULL THEN NULL ELSE ${CONTENT_HASH} END AS h FROM token_metadata
     WHERE chain_id = $1 AND contract_address = $2 AND token_id = ANY($3::text[]) FOR UPDATE`,
    [chainId, contract, ids],
  );
  return new Map(r.rows.map((x) => [x.token_id, x.h]));
}

export function tokenStore(db: Db, opts: { onDocumentChanged?: DocumentHook } = {}) {
  const hook = opts.onDocumentChanged;
  /** Upserts rows and, in the same transaction, re-indexes the resolved (and withdrawn) tokens' search entries. */
  const write = (chainId: number, contract: string, rows: SaveRow[], resolved: ReadonlySet<string>) =>
    db.transaction(async (tx) => {
      const withdrawn = rows.filter((r) => r.withdrawn).map((r) => r.tokenId);
      const ids = rows.filter((r) => resolved.has(r.tokenId) || r.withdrawn).map((r) => r.tokenId);
      // Read (and lock) the documents' hashes before the write, so only a real change is reported.
      const before = hook && ids.length ? await contentHashes(tx, chainId, contract, ids) : undefined;
      const saved = await upsert(tx, chainId, contract, rows);
      if (withdrawn.length) {
        // The upsert keeps the last good document of a failure; a withdrawn one must stop being served
        // (and searched: the re-index below drops its entries).
        const gone = await tx.query(
          'UPDATE token_metadata SET metadata = NULL, raw = NULL, updated_at = now() WHERE chain_id = $1 AND contract_address = $2 AND token_id = ANY($3::text[]) RETURNING *',
          [chainId, contract, withdrawn],
        );
        for (const row of gone.rows) {
          const rec = toRecord(row);
          saved.set(rec.tokenId, rec);
        }
      }
      await reindexTokens(tx, chainId, contract, ids);
      if (hook && before) {
        const after = await contentHashes(tx, chainId, contract, ids);
        const changes: DocumentChange[] = [];
        for (const id of ids) {
          const newHash = after.get(id);
          const rec = saved.get(id);
          if (newHash && newHash !== (before.get(id) ?? null) && rec?.metadata) {
            changes.push({ chainId, contract, tokenId: id, oldHash: before.get(id) ?? null, newHash, metadata: rec.metadata as Record<string, unknown> });
          }
        }
        if (changes.length) await hook(tx, changes);
      }
      return saved;
    });
  return {
    async get(chainId: number, contract: string, tokenIds: string[]): Promise<Map<string, TokenRecord>> {
      if (tokenIds.length === 0) return new Map();
      const res = await db.query(`SELECT * FROM token_metadata WHERE chain_id = $1 AND contract_address = $2 AND token_id = ANY($3::text[])`, [chainId, contract, tokenIds]);
      return new Map(
        res.rows.map((row) => {
          const rec = toRecord(row);
          return [rec.tokenId, rec];
        }),
      );
    },

    /**
     * Records attempts: a success replaces the document and, in the same transaction, the token's
     * search index entries; a failure only records its reason and keeps the last good document (and
     * its index entries), unless it is a withdrawal (`withdrawn`: our own unpublished collection),
     * which drops them. Returns the records as stored after the write.
     *
     * Each token is saved on its own terms: one statement for the batch when every row goes in, and
     * when it does not (a document that cannot be serialised, or one the database refuses, such as a
     * string holding \u0000 in jsonb), a statement per token, so one bad document fails alone and is
     * recorded as UNSTORABLE (to be tried again from `retryUnstorable` on, not on every request)
     * instead of costing the whole batch.
     */
    async save(chainId: number, contract: string, results: Map<string, Resolution>, retryUnstorable: Date): Promise<Map<string, TokenRecord>> {
      if (results.size === 0) return new Map();
      const rows = [...results].map(([tokenId, r]) => serialiseRow(tokenId, r, retryUnstorable));
      const resolved = new Set([...results].filter(([, r]) => r.ok).map(([id]) => id));
      try {
        return await write(chainId, contract, rows, resolved);
      } catch {
        // Some row was refused: find it by saving them one at a time.
      }
      const saved = new Map<string, TokenRecord>();
      for (const row of rows) {
        let stored: Map<string, TokenRecord>;
        try {
          stored = await write(chainId, contract, [row], resolved);
        } catch (err) {
          // This row has no document: if the database refuses it too, the database is down, not the row.
          stored = await write(chainId, contract, [unstorable(row.tokenId, row.tokenUri, row.trace, err, retryUnstorable)], new Set());
        }
        for (const [id, rec] of stored) saved.set(id, rec);
      }
      return saved;
    },

    /** Drops everything cached about a chain: used when a dev chain is started anew. */
    /** Tokens last written before a time on these chains, oldest first, grouped by contract. */
    async updatedBefore(before: Date, max: number, chainIds: number[]): Promise<{ chainId: number; contract: Address; tokenIds: string[] }[]> {
      const res = await db.query<{ chain_id: string; contract_address: Address; token_id: string }>(
        `SELECT chain_id, contract_address, token_id FROM token_metadata
          WHERE updated_at < $1 AND chain_id = ANY($2::bigint[]) ORDER BY updated_at, chain_id, contract_address, token_id LIMIT $3`,
        [before, chainIds, max],
      );
      const groups = new Map<string, { chainId: number; contract: Address; tokenIds: string[] }>();
      for (const r of res.rows) {
        const k = `${r.chain_id}:${r.contract_address}`;
        const g = groups.get(k) ?? { chainId: Number(r.chain_id), contract: r.contract_address, tokenIds: [] };
        g.tokenIds.push(r.token_id);
        groups.set(k, g);
      }
      return [...groups.values()];
    },

    async forgetChain(chainId: number): Promise<void> {
      await db.query('DELETE FROM token_metadata WHERE chain_id = $1', [chainId]);
      // The search counts are kept beside the pairs (which go with their tokens).
      await db.query('DELETE FROM token_property_values WHERE chain_id = $1', [chainId]);
      await db.query('DELETE FROM token_property_names WHERE chain_id = $1', [chainId]);
      await db.query('DELETE FROM token_words WHERE chain_id = $1', [chainId]);
      await db.query('DELETE FROM token_text_words WHERE chain_id = $1', [chainId]);
      // Processes holding this chain's posting lists drop them when the version is gone (migration 0029).
      await db.query('DELETE FROM token_index_changes WHERE chain_id = $1', [chainId]);
      await db.query('DELETE FROM token_index_versions WHERE chain_id = $1', [chainId]);
      await db.query('DELETE FROM contracts WHERE chain_id = $1', [chainId]);
      await db.query('DELETE FROM token_directory WHERE chain_id = $1', [chainId]);
      await db.query('DELETE FROM tasks WHERE chain_id = $1', [chainId]);
      await db.query('DELETE FROM chain_cursors WHERE chain_id = $1', [chainId]);
    },

    async contractKind(chainId: number, address: string): Promise<ContractKind | null> {
      const res = await db.query('SELECT type, id_variant, type_checked_at FROM contracts WHERE chain_id = $1 AND address = $2', [chainId, address]);
      if (!res.rows[0]) return null;
      const r = ContractRowSchema.parse(res.rows[0]);
      return { type: r.type, idVariant: r.id_variant, typeCheckedAt: r.type_checked_at };
    },

    async saveContractKind(chainId: number, address: string, type: string): Promise<void> {
      await db.query(
        `INSERT INTO contracts (chain_id, address, type, type_checked_at) VALUES ($1, $2, $3, now())
         ON CONFLICT (chain_id, address) DO UPDATE SET
           -- UNKNOWN only says "no token URIs": it never hides what contract info learned (ERC20).
           type = CASE WHEN EXCLUDED.type = 'UNKNOWN' THEN contracts.type ELSE EXCLUDED.type END,
           type_checked_at = now(), updated_at = now()`,
        [chainId, address, type],
      );
    },

    async saveIdVariant(chainId: number, address: string, variant: number): Promise<void> {
      await db.query(
        `INSERT INTO contracts (chain_id, address, id_variant) VALUES ($1, $2, $3)
         ON CONFLICT (chain_id, address) DO UPDATE SET id_variant = EXCLUDED.id_variant, updated_at = now()`,
        [chainId, address, variant],
      );
    },
  };
}
export type TokenStore = ReturnType<typeof tokenStore>;
