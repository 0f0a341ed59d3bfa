// The collections tables (collections, collection_tokens, collection_assets, contract_collections):
// every statement that reads or writes them. Rows become camelCase records here.

import { z } from 'zod';
import type { Db, Queryable } from '../store/db.ts';

const ts = z.union([z.date(), z.string()]).transform((v) => new Date(v));
const json = z.union([z.record(z.string(), z.unknown()), z.string().transform((s) => JSON.parse(s) as Record<string, unknown>)]);

const CollectionRow = z.object({
  id: z.coerce.number(),
  project_id: z.coerce.number(),
  metadata: json,
  private: z.boolean(),
  reveal_key: z.string().nullable(),
  created_at: ts,
  updated_at: ts,
  token_count: z.coerce.number().optional(),
});
const TokenRow = z.object({ collection_id: z.coerce.number(), token_id: z.string(), metadata: json, private: z.boolean(), updated_at: ts });
const AssetRow = z.object({
  id: z.coerce.number(),
  collection_id: z.coerce.number(),
  token_id: z.string(),
  metadata_field: z.string(),
  filename: z.string().nullable(),
  sha256: z.string().nullable(),
  updated_at: ts,
  mime_type: z.string().nullable(),
  filesize: z.coerce.number().nullable(),
  width: z.number().nullable(),
  height: z.number().nullable(),
  frames: z.number().nullable(),
});
const LinkRow = z.object({ id: z.coerce.number(), project_id: z.coerce.number(), chain_id: z.coerce.number(), contract_address: z.string(), collection_id: z.coerce.number() });

export type CollectionRecord = {
  id: number;
  projectId: number;
  metadata: Record<string, unknown>;
  private: boolean;
  revealKey: string | null;
  createdAt: Date;
  updatedAt: Date;
  tokenCount?: number;
};
export type TokenRecord = { collectionId: number; tokenId: string; metadata: Record<string, unknown>; private: boolean; updatedAt: Date };
export type AssetBlob = { sha256: string; mimeType: string; filesize: number; width: number | null; height: number | null; frames: number };
export type AssetRecord = { id: number; collectionId: number; tokenId: string; metadataField: string; filename: string | null; blob: AssetBlob | null; updatedAt: Date };
export type ContractLink = { id: number; projectId: number; chainId: number; contractAddress: string; collectionId: number };

const toCollection = (r: z.infer<typeof CollectionRow>): CollectionRecord => ({
  id: r.id,
  projectId: r.project_id,
  metadata: r.metadata,
  private: r.private,
  revealKey: r.reveal_key,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  ...(r.token_count !== undefined ? { tokenCount: r.token_count } : {}),
});
const toToken = (r: z.infer<typeof TokenRow>): TokenRecord => ({ collectionId: r.collection_id, tokenId: r.token_id, metadata: r.metadata, private: r.private, updatedAt: r.updated_at });
const toAsset = (r: z.infer<typeof AssetRow>): AssetRecord => ({
  id: r.id,
  collectionId: r.collection_id,
  tokenId: r.token_id,
  metadataField: r.metadata_field,
  filename: r.filename,
  blob: r.sha256 && r.mime_type ? { sha256: r.sha256, mimeType: r.mime_type, filesize: r.filesize ?? 0, width: r.width, height: r.height, frames: r.frames ?? 1 } : null,
  updatedAt: r.updated_at,
});
const toLink = (r: z.infer<typeof LinkRow>): ContractLink => ({ id: r.id, projectId: r.project_id, chainId: r.chain_id, contractAddress: r.contract_address, collectionId: r.collection_id });

const SELECT_COLLECTION = `SELECT c.*, (SELECT count(*) FROM collection_tokens t WHERE t.collection_id = c.id) AS token_count FROM collections c`;
const SELECT_ASSET = `SELECT a.*, b.mime_type, b.filesize, b.width, b.height, b.frames FROM collection_assets a LEFT JOIN media_blobs b ON b.sha256 = a.sha256`;
const LINK_COLUMNS = 'id, project_id, chain_id, contract_address, collection_id';

/** A write that names a row another already holds (a token id, a linked contract). */
export class DuplicateError extends Error {}

const isUniqueViolation = (err: unknown) => (err as { code?: string })?.code === '23505';

/** What a project holds (CollectionStore.usage). */
export interface ProjectUsage {
  collections: number;
  tokens: number;
  assets: number;
  links: number;
  bytes: number;
}

export function collectionStore(db: Db) {
  const shasOf = (rows: Array<{ sha256: string | null }>) => rows.map((r) => r.sha256).filter((x): x is string => x !== null);
  return {
    async createCollection(projectId: number, metadata: Record<string, unknown>, priv: boolean): Promise<CollectionRecord> {
      const { rows } = await db.query('INSERT INTO collections (project_id, metadata, private) VALUES ($1, $2::jsonb, $3) RETURNING *, 0 AS token_count', [projectId, JSON.stringify(metadata), priv]);
      return toCollection(CollectionRow.parse(rows[0]));
    },

    async collection(id: number): Promise<CollectionRecord | undefined> {
      const { rows } = await db.query(`${SELECT_COLLECTION} WHERE c.id = $1`, [id]);
      return rows[0] ? toCollection(CollectionRow.parse(rows[0])) : undefined;
    },

    /** A project's collections by id, or every project's (null: the operator's view). */
    async collections(projectId: number | null, offset: number, limit: number): Promise<CollectionRecord[]> {
      const { rows } = await db.query(`${SELECT_COLLECTION} WHERE ($1::bigint IS NULL OR c.project_id = $1) ORDER BY c.id LIMIT $2 OFFSET $3`, [projectId, limit, offset]);
      return rows.map((r) => toCollection(CollectionRow.parse(r)));
    },

    /**
     * A project's collections newest first, before a collection id (the console's cursor), and how many
     * the project has: a keyset page, so a collection created meanwhile does not shift the next one.
     */
    async collectionsBefore(projectId: number, before: number | null, limit: number): Promise<{ rows: CollectionRecord[]; total: number }> {
      const [page, count] = await Promise.all([
        db.query(`${SELECT_COLLECTION} WHERE c.project_id = $1 AND ($2::bigint IS NULL OR c.id < $2) ORDER BY c.id DESC LIMIT $3`, [projectId, before, limit]),
        db.query<{ n: string | number }>('SELECT count(*) AS n FROM collections WHERE project_id = $1', [projectId]),
      ]);
      return { rows: page.rows.map((r) => toCollection(CollectionRow.parse(r))), total: Number(count.rows[0]?.n ?? 0) };
    },

    async updateCollection(id: number, change: { metadata?: Record<string, unknown>; private?: boolean }): Promise<void> {
      await db.query('UPDATE collections SET metadata = COALESCE($2::jsonb, metadata), private = COALESCE($3, private), updated_at = now() WHERE id = $1', [
        id,
        change.metadata ? JSON.stringify(change.metadata) : null,
        change.private ?? null,
      ]);
    },

    /** Publishing (private false) or hiding; `tokensToo` sets every token's flag the same way. */
    async setPrivate(id: number, priv: boolean, tokensToo: boolean): Promise<void> {
      await db.transaction(async (tx) => {
        await tx.query('UPDATE collections SET private = $2, updated_at = now() WHERE id = $1', [id, priv]);
        if (tokensToo) await tx.query('UPDATE collection_tokens SET private = $2, updated_at = now() WHERE collection_id = $1', [id, priv]);
      });
    },

    /** The collection, its tokens, assets and contract links go; the blobs its assets held are returned. */
    async deleteCollection(id: number): Promise<string[]> {
      return db.transaction(async (tx) => {
        const { rows } = await tx.query<{ sha256: string | null }>('DELETE FROM collection_assets WHERE collection_id = $1 RETURNING sha256', [id]);
        await tx.query('DELETE FROM collections WHERE id = $1', [id]);
        return shasOf(rows);
      });
    },

    async createToken(collectionId: number, tokenId: string, metadata: Record<string, unknown>, priv: boolean): Promise<TokenRecord> {
      try {
        const { rows } = await db.query('INSERT INTO collection_tokens (collection_id, token_id, metadata, private) VALUES ($1, $2, $3::jsonb, $4) RETURNING *', [
          collectionId,
          tokenId,
          JSON.stringify(metadata),
          priv,
        ]);
        return toToken(TokenRow.parse(rows[0]));
      } catch (err) {
        if (isUniqueViolation(err)) throw new DuplicateError(`token ${tokenId} is already in collection ${collectionId}: use UpdateToken`);
        throw err;
      }
    },

    async token(collectionId: number, tokenId: string): Promise<TokenRecord | undefined> {
      const { rows } = await db.query('SELECT * FROM collection_tokens WHERE collection_id = $1 AND token_id = $2', [collectionId, tokenId]);
      return rows[0] ? toToken(TokenRow.parse(rows[0])) : undefined;
    },

    /** Tokens in id order (numeric: "10" after "9"). */
    async tokens(collectionId: number, offset: number, limit: number): Promise<TokenRecord[]> {
      const { rows } = await db.query('SELECT * FROM collection_tokens WHERE collection_id = $1 ORDER BY length(token_id), token_id LIMIT $2 OFFSET $3', [collectionId, limit, offset]);
      return rows.map((r) => toToken(TokenRow.parse(r)));
    },

    /** Tokens in id order after a token id (the console's cursor): `(length, text)` is numeric order for canonical decimals. */
    async tokensAfter(collectionId: number, after: string | null, limit: number): Promise<TokenRecord[]> {
      const { rows } = await db.query(
        'SELECT * FROM collection_tokens WHERE collection_id = $1 AND ($2::text IS NULL OR (length(token_id), token_id) > (length($2::text), $2::text)) ORDER BY length(token_id), token_id LIMIT $3',
        [collectionId, after, limit],
      );
      return rows.map((r) => toToken(TokenRow.parse(r)));
    },

    /**
     * Sets the document fields of `set` and removes those of `unset`, keeping every other field as it
     * is (a partial update), in one statement: two partial updates at once each keep the other's fields.
     */
    async updateToken(collectionId: number, tokenId: string, set: Record<string, unknown>, unset: string[], priv: boolean | undefined): Promise<TokenRecord | undefined> {
      const { rows } = await db.query(
        'UPDATE collection_tokens SET metadata = (metadata || $3::jsonb) - $5::text[], private = COALESCE($4, private), updated_at = now() WHERE collection_id = $1 AND token_id = $2 RETURNING *',
        [collectionId, tokenId, JSON.stringify(set), priv ?? null, unset],
      );
      return rows[0] ? toToken(TokenRow.parse(rows[0])) : undefined;
    },

    /** The token and its assets go; null when there was no such token, else the blobs its assets held. */
    async deleteToken(collectionId: number, tokenId: string): Promise<string[] | null> {
      return db.transaction(async (tx) => {
        const gone = await tx.query('DELETE FROM collection_tokens WHERE collection_id = $1 AND token_id = $2 RETURNING token_id', [collectionId, tokenId]);
        if (!gone.rows.length) return null;
        const { rows } = await tx.query<{ sha256: string | null }>('DELETE FROM collection_assets WHERE collection_id = $1 AND token_id = $2 RETURNING sha256', [collectionId, tokenId]);
        return shasOf(rows);
      });
    },

    async createAsset(collectionId: number, tokenId: string, field: string, filename: string | null): Promise<AssetRecord> {
      try {
        const { rows } = await db.query('INSERT INTO collection_assets (collection_id, token_id, metadata_field, filename) VALUES ($1, $2, $3, $4) RETURNING id', [
          collectionId,
          tokenId,
          field,
          filename,
        ]);
        return (await this.asset(Number((rows[0] as { id: number | string }).id)))!;
      } catch (err) {
        if (isUniqueViolation(err)) throw new DuplicateError(`${tokenId ? `token ${tokenId}` : 'the collection'} already has a "${field}" asset: use UpdateAsset or upload to it`);
        throw err;
      }
    },

    async asset(id: number): Promise<AssetRecord | undefined> {
      const { rows } = await db.query(`${SELECT_ASSET} WHERE a.id = $1`, [id]);
      return rows[0] ? toAsset(AssetRow.parse(rows[0])) : undefined;
    },

    /** Assets of these tokens of a collection ('' for the collection's own). */
    async assetsOf(collectionId: number, tokenIds: string[]): Promise<AssetRecord[]> {
      if (!tokenIds.length) return [];
      const { rows } = await db.query(`${SELECT_ASSET} WHERE a.collection_id = $1 AND a.token_id = ANY($2::text[]) ORDER BY a.token_id, a.metadata_field`, [collectionId, tokenIds]);
      return rows.map((r) => toAsset(AssetRow.parse(r)));
    },

    async updateAsset(id: number, change: { metadataField?: string; filename?: string | null; tokenId?: string }): Promise<void> {
      try {
        await db.query(
          'UPDATE collection_assets SET metadata_field = COALESCE($2, metadata_field), filename = COALESCE($3, filename), token_id = COALESCE($4, token_id), updated_at = now() WHERE id = $1',
          [id, change.metadataField ?? null, change.filename ?? null, change.tokenId ?? null],
        );
      } catch (err) {
        if (isUniqueViolation(err)) throw new DuplicateError('another asset already holds that field of that token');
        throw err;
      }
    },

    /** Returns the blob the asset held (null: none), or undefined when there was no such asset. */
    async deleteAsset(id: number): Promise<string | null | undefined> {
      const { rows } = await db.query<{ sha256: string | null }>('DELETE FROM collection_assets WHERE id = $1 RETURNING sha256', [id]);
      return rows.length ? (rows[0].sha256 ?? null) : undefined;
    },

    /** On the upload's transaction (media-store saveUpload): points the asset at its blob; returns the one it held. */
    async pointAsset(tx: Queryable, id: number, sha256: string, filename: string | null): Promise<string | null> {
      const prev = await tx.query<{ sha256: string | null }>('SELECT sha256 FROM collection_assets WHERE id = $1 FOR UPDATE', [id]);
      await tx.query('UPDATE collection_assets SET sha256 = $2, filename = COALESCE($3, filename), updated_at = now() WHERE id = $1', [id, sha256, filename]);
      return prev.rows[0]?.sha256 ?? null;
    },

    async createLink(projectId: number, chainId: number, contractAddress: string, collectionId: number): Promise<ContractLink> {
      try {
        const { rows } = await db.query(`INSERT INTO contract_collections (project_id, chain_id, contract_address, collection_id) VALUES ($1, $2, $3, $4) RETURNING ${LINK_COLUMNS}`, [
          projectId,
          chainId,
          contractAddress,
          collectionId,
        ]);
        return toLink(LinkRow.parse(rows[0]));
      } catch (err) {
        if (isUniqueViolation(err)) throw new DuplicateError(`contract ${contractAddress} on chain ${chainId} is already linked to a collection`);
        throw err;
      }
    },

    /**
     * What a project holds, for its quotas: collections, tokens, assets, contract links, and the bytes of
     * the uploaded files its assets point at (each file once, however many assets share it).
     */
    async usage(projectId: number): Promise<ProjectUsage> {
      const { rows } = await db.query<Record<keyof ProjectUsage, string>>(
        `SELECT (SELECT count(*) FROM collections WHERE project_id = $1)::text AS collections,
                (SELECT count(*) FROM collection_tokens t JOIN collections c ON c.id = t.collection_id WHERE c.project_id = $1)::text AS tokens,
                (SELECT count(*) FROM collection_assets a JOIN collections c ON c.id = a.collection_id WHERE c.project_id = $1)::text AS assets,
                (SELECT count(*) FROM contract_collections WHERE project_id = $1)::text AS links,
                (SELECT COALESCE(sum(b.filesize), 0) FROM media_blobs b WHERE b.sha256 IN (
                   SELECT a.sha256 FROM collection_assets a JOIN collections c ON c.id = a.collection_id WHERE c.project_id = $1 AND a.sha256 IS NOT NULL))::text AS bytes`,
        [projectId],
      );
      const r = rows[0]!;
      return { collections: Number(r.collections), tokens: Number(r.tokens), assets: Number(r.assets), links: Number(r.links), bytes: Number(r.bytes) };
    },

    async link(chainId: number, contractAddress: string): Promise<ContractLink | undefined> {
      const { rows } = await db.query(`SELECT ${LINK_COLUMNS} FROM contract_collections WHERE chain_id = $1 AND contract_address = $2`, [chainId, contractAddress]);
      return rows[0] ? toLink(LinkRow.parse(rows[0])) : undefined;
    },

    async links(projectId: number | null, collectionId: number | null, offset: number, limit: number): Promise<ContractLink[]> {
      const { rows } = await db.query(
        `SELECT ${LINK_COLUMNS} FROM contract_collections WHERE ($1::bigint IS NULL OR project_id = $1) AND ($2::bigint IS NULL OR collection_id = $2) ORDER BY id LIMIT $3 OFFSET $4`,
        [projectId, collectionId, limit, offset],
      );
      return rows.map((r) => toLink(LinkRow.parse(r)));
    },

    /** The contract links of these collections, in link order. */
    async linksOf(collectionIds: number[]): Promise<ContractLink[]> {
      if (!collectionIds.length) return [];
      const { rows } = await db.query(`SELECT ${LINK_COLUMNS} FROM contract_collections WHERE collection_id = ANY($1::bigint[]) ORDER BY id`, [collectionIds]);
      return rows.map((r) => toLink(LinkRow.parse(r)));
    },

    async relink(id: number, collectionId: number): Promise<void> {
      await db.query('UPDATE contract_collections SET collection_id = $2 WHERE id = $1', [id, collectionId]);
    },

    /** Every link on a chain goes (a new dev chain reuses the chain id and the deploy addresses). */
    async forgetChain(chainId: number): Promise<void> {
      await db.query('DELETE FROM contract_collections WHERE chain_id = $1', [chainId]);
    },

    async unlink(id: number): Promise<void> {
      await db.query('DELETE FROM contract_collections WHERE id = $1', [id]);
    },
  };
}
export type CollectionStore = ReturnType<typeof collectionStore>;
