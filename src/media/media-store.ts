// The media tables: which blob each token field points at, and what each blob is.

import { z } from 'zod';
import type { Db, Queryable } from '../store/db.ts';

const ts = z.union([z.date(), z.string()]).transform((v) => new Date(v));

export type AssetKey = { chainId: number; contract: string; tokenId: string; field: MediaField | ContractMediaField };
export const MEDIA_FIELDS = ['image', 'image_data', 'animation_url'] as const;
export type MediaField = (typeof MEDIA_FIELDS)[number];
/** A contract's media (ContractInfo logoURI, extensions.ogImage): stored beside token media with token id ''. */
export const CONTRACT_MEDIA_FIELDS = ['logo', 'og_image'] as const;
export type ContractMediaField = (typeof CONTRACT_MEDIA_FIELDS)[number];
export const CONTRACT_TOKEN_ID = '';

const BlobRow = z.object({
  sha256: z.string(),
  mime_type: z.string(),
  filesize: z.coerce.number(),
  width: z.number().nullable(),
  height: z.number().nullable(),
  frames: z.number(),
});

const AssetRow = z.object({
  id: z.coerce.number(),
  chain_id: z.coerce.number(),
  contract: z.string(),
  token_id: z.string(),
  field: z.enum([...MEDIA_FIELDS, ...CONTRACT_MEDIA_FIELDS]),
  source_url: z.string(),
  status: z.enum(['READY', 'FAILED']),
  sha256: z.string().nullable(),
  failure_reason: z.string().nullable(),
  failure_message: z.string().nullable(),
  retry_after: ts.nullable(),
  updated_at: ts,
  mime_type: z.string().nullable(),
  filesize: z.coerce.number().nullable(),
  width: z.number().nullable(),
  height: z.number().nullable(),
  frames: z.number().nullable(),
});

export type BlobInfo = { sha256: string; mimeType: string; filesize: number; width: number | null; height: number | null; frames: number };

export type MediaAsset = {
  id: number;
  key: AssetKey;
  sourceUrl: string;
  status: 'READY' | 'FAILED';
  blob: BlobInfo | null;
  failureReason: string | null;
  failureMessage: string | null;
  retryAfter: Date | null;
  updatedAt: Date;
};

function toBlob(r: z.infer<typeof BlobRow>): BlobInfo {
  return { sha256: r.sha256, mimeType: r.mime_type, filesize: r.filesize, width: r.width, height: r.height, frames: r.frames };
}

function toAsset(r: z.infer<typeof AssetRow>): MediaAsset {
  return {
    id: r.id,
    key: { chainId: r.chain_id, contract: r.contract, tokenId: r.token_id, field: r.field },
    sourceUrl: r.source_url,
    status: r.status,
    blob: r.sha256 && r.mime_type ? toBlob({ sha256: r.sha256, mime_type: r.mime_type, filesize: r.filesize ?? 0, width: r.width, height: r.height, frames: r.frames ?? 1 }) : null,
    failureReason: r.failure_reason,
    failureMessage: r.failure_message,
    retryAfter: r.retry_after,
    updatedAt: r.updated_at,
  };
}

const SELECT_ASSET = `SELECT a.*, b.mime_type, b.filesize, b.width, b.height, b.frames
  FROM media_assets a LEFT JOIN media_blobs b ON b.sha256 = a.sha256`;

/** A blob row `b` nothing points at: no token or contract field, no collection asset (collections/store.ts writes those). */
const UNREFERENCED = `NOT EXISTS (SELECT 1 FROM media_assets a WHERE a.sha256 = b.sha256)
  AND NOT EXISTS (SELECT 1 FROM collection_assets c WHERE c.sha256 = b.sha256)`;

export function mediaStore(db: Db) {
  return {
    async asset(k: AssetKey): Promise<MediaAsset | undefined> {
      const { rows } = await db.query(`${SELECT_ASSET} WHERE a.chain_id = $1 AND a.contract = $2 AND a.token_id = $3 AND a.field = $4`, [k.chainId, k.contract, k.tokenId, k.field]);
      return rows[0] ? toAsset(AssetRow.parse(rows[0])) : undefined;
    },

    /** Fields whose bytes the blob store refused and whose retry is due, oldest due first (media_assets_store_failed). */
    async dueStoreFailures(limit: number): Promise<MediaAsset[]> {
      const { rows } = await db.query(`${SELECT_ASSET} WHERE a.status = 'FAILED' AND a.failure_reason = 'STORE_FAILED' AND a.retry_after <= now() ORDER BY a.retry_after LIMIT $1`, [limit]);
      return rows.map((r) => toAsset(AssetRow.parse(r)));
    },

    /** Every asset of these tokens, READY or not. */
    async assetsOf(chainId: number, contract: string, tokenIds: string[]): Promise<MediaAsset[]> {
      if (!tokenIds.length) return [];
      const { rows } = await db.query(`${SELECT_ASSET} WHERE a.chain_id = $1 AND a.contract = $2 AND a.token_id = ANY($3::text[]) ORDER BY a.token_id, a.field`, [chainId, contract, tokenIds]);
      return rows.map((r) => toAsset(AssetRow.parse(r)));
    },

    /** The media assets of these contracts (token id ''). */
    async contractAssets(chainId: number, contracts: string[]): Promise<MediaAsset[]> {
      if (!contracts.length) return [];
      const { rows } = await db.query(`${SELECT_ASSET} WHERE a.chain_id = $1 AND a.contract = ANY($2::text[]) AND a.token_id = '' ORDER BY a.contract, a.field`, [chainId, contracts]);
      return rows.map((r) => toAsset(AssetRow.parse(r)));
    },

    async blob(sha256: string): Promise<BlobInfo | undefined> {
      const { rows } = await db.query('SELECT sha256, mime_type, filesize, width, height, frames FROM media_blobs WHERE sha256 = $1', [sha256]);
      return rows[0] ? toBlob(BlobRow.parse(rows[0])) : undefined;
    },

    /**
     * Points the field at a blob (READY), creating the blob's row, and returns the hash it pointed at
     * before, if different. The blob row is locked first and `ensureBytes` runs under that lock: a
     * collection of the same hash either finished before (its bytes are gone, and `ensureBytes` puts
     * them back) or waits until this asset references the blob (and then keeps it).
     */
    async saveReady(k: AssetKey, sourceUrl: string, b: BlobInfo, ensureBytes: () => Promise<void>): Promise<string | null> {
      return db.transaction(async (tx) => {
        // DO UPDATE, not DO NOTHING: only an update takes the row lock a concurrent collection waits on.
        await tx.query(
          `INSERT INTO media_blobs (sha256, mime_type, filesize, width, height, frames) VALUES ($1, $2, $3, $4, $5, $6)
           ON CONFLICT (sha256) DO UPDATE SET sha256 = excluded.sha256`,
          [b.sha256, b.mimeType, b.filesize, b.width, b.height, b.frames],
        );
        await ensureBytes();
        const prev = await tx.query<{ sha256: string | null }>('SELECT sha256 FROM media_assets WHERE chain_id = $1 AND contract = $2 AND token_id = $3 AND field = $4 FOR UPDATE', [
          k.chainId,
          k.contract,
          k.tokenId,
          k.field,
        ]);
        await tx.query(
          `INSERT INTO media_assets (chain_id, contract, token_id, field, source_url, status, sha256, updated_at)
           VALUES ($1, $2, $3, $4, $5, 'READY', $6, now())
           ON CONFLICT (chain_id, contract, token_id, field) DO UPDATE SET source_url = excluded.source_url, status = 'READY',
             sha256 = excluded.sha256, failure_reason = NULL, failure_message = NULL, retry_after = NULL, updated_at = now()`,
          [k.chainId, k.contract, k.tokenId, k.field, sourceUrl, b.sha256],
        );
        const old = prev.rows[0]?.sha256 ?? null;
        return old && old !== b.sha256 ? old : null;
      });
    },

    /**
     * An uploaded file (a collection's asset): the blob row created or locked as in `saveReady`, the
     * bytes checked under that lock, then `link` points the uploader's row at the hash on the same
     * transaction and returns the hash it pointed at before (released by the caller when different).
     */
    async saveUpload(b: BlobInfo, ensureBytes: () => Promise<void>, link: (tx: Queryable) => Promise<string | null>): Promise<string | null> {
      return db.transaction(async (tx) => {
        await tx.query(
          `INSERT INTO media_blobs (sha256, mime_type, filesize, width, height, frames) VALUES ($1, $2, $3, $4, $5, $6)
           ON CONFLICT (sha256) DO UPDATE SET sha256 = excluded.sha256`,
          [b.sha256, b.mimeType, b.filesize, b.width, b.height, b.frames],
        );
        await ensureBytes();
        const old = await link(tx);
        return old && old !== b.sha256 ? old : null;
      });
    },

    /** Records why the field has no media; the previous blob, if any, is released (returned). */
    async saveFailed(k: AssetKey, sourceUrl: string, reason: string, message: string, retryAfter: Date): Promise<string | null> {
      return db.transaction(async (tx) => {
        const prev = await tx.query<{ sha256: string | null }>('SELECT sha256 FROM media_assets WHERE chain_id = $1 AND contract = $2 AND token_id = $3 AND field = $4 FOR UPDATE', [
          k.chainId,
          k.contract,
          k.tokenId,
          k.field,
        ]);
        await tx.query(
          `INSERT INTO media_assets (chain_id, contract, token_id, field, source_url, status, failure_reason, failure_message, retry_after, updated_at)
           VALUES ($1, $2, $3, $4, $5, 'FAILED', $6, $7, $8, now())
           ON CONFLICT (chain_id, contract, token_id, field) DO UPDATE SET source_url = excluded.source_url, status = 'FAILED', sha256 = NULL,
             failure_reason = excluded.failure_reason, failure_message = excluded.failure_message, retry_after = excluded.retry_after, updated_at = now()`,
          [k.chainId, k.contract, k.tokenId, k.field, sourceUrl, reason, message.slice(0, 500), retryAfter],
        );
        return prev.rows[0]?.sha256 ?? null;
      });
    },

    /** A field no longer in the document: its row goes, and the blob it pointed at is returned. */
    async remove(k: AssetKey): Promise<string | null> {
      const { rows } = await db.query<{ sha256: string | null }>('DELETE FROM media_assets WHERE chain_id = $1 AND contract = $2 AND token_id = $3 AND field = $4 RETURNING sha256', [
        k.chainId,
        k.contract,
        k.tokenId,
        k.field,
      ]);
      return rows[0]?.sha256 ?? null;
    },

    /** Every asset of a chain goes (a new dev chain reuses the id); the hashes they held are returned. */
    async forgetChain(chainId: number): Promise<string[]> {
      const { rows } = await db.query<{ sha256: string | null }>('DELETE FROM media_assets WHERE chain_id = $1 RETURNING sha256', [chainId]);
      return [...new Set(rows.map((r) => r.sha256).filter((x): x is string => x !== null))];
    },

    /**
     * Deletes the blob row when no asset references it any more, running `dropBytes` inside the
     * same transaction so an ingest of the same hash (which inserts the row first) waits for it.
     */
    async collect(sha256: string, dropBytes: () => Promise<void>): Promise<boolean> {
      return db.transaction(async (tx) => {
        // Lock first, look for references second: an ingest holding the row (saveReady) commits its
        // reference before this statement reads, so a blob that became referenced again is kept.
        await tx.query('SELECT 1 FROM media_blobs WHERE sha256 = $1 FOR UPDATE', [sha256]);
        const { rows } = await tx.query(`DELETE FROM media_blobs b WHERE b.sha256 = $1 AND ${UNREFERENCED} RETURNING sha256`, [sha256]);
        if (!rows.length) return false;
        await dropBytes();
        return true;
      });
    },

    /** Blob rows no asset references (an asset let go of them, and the process stopped before collecting). */
    async unreferencedBlobs(limit: number): Promise<string[]> {
      const { rows } = await db.query<{ sha256: string }>(`SELECT b.sha256 FROM media_blobs b WHERE ${UNREFERENCED} ORDER BY b.created_at LIMIT $1`, [limit]);
      return rows.map((r) => r.sha256);
    },

    /** Which of these hashes have a blob row. */
    async knownBlobs(sha256s: string[]): Promise<Set<string>> {
      if (!sha256s.length) return new Set();
      const { rows } = await db.query<{ sha256: string }>('SELECT sha256 FROM media_blobs WHERE sha256 = ANY($1::text[])', [sha256s]);
      return new Set(rows.map((r) => r.sha256));
    },

    /**
     * Drops bytes stored under a hash that has no blob row, unless an ingest is claiming it right now.
     * A placeholder row is inserted first: an ingest's own insert (saveReady) either committed before
     * (then nothing is inserted here and the bytes stay) or waits on this one until the bytes are gone
     * and the placeholder deleted, and then puts the bytes back itself (ensureBytes).
     */
    async dropUnclaimed(sha256: string, dropBytes: () => Promise<void>): Promise<boolean> {
      return db.transaction(async (tx) => {
        const { rows } = await tx.query(`INSERT INTO media_blobs (sha256, mime_type, filesize) VALUES ($1, 'application/octet-stream', 0) ON CONFLICT (sha256) DO NOTHING RETURNING sha256`, [sha256]);
        if (!rows.length) return false;
        await dropBytes();
        await tx.query('DELETE FROM media_blobs WHERE sha256 = $1', [sha256]);
        return true;
      });
    },
  };
}
export type MediaStore = ReturnType<typeof mediaStore>;
