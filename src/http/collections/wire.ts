// Sequence's Collections shapes on the wire (Collection, TokenMetadata, Asset, ContractCollection),
// the argument schemas that validate them, and the domain's refusals in the metadata error catalog.

import { z } from 'zod';
import { CollectionError, type Actor, type AssetRecord, type CollectionRecord, type CollectionsService, type ContractLink, type TokenRecord } from '../../collections/index.ts';
import { AuthControlErrors, MetadataErrors, RpcError } from '../core/errors.ts';
import type { RpcContext } from '../core/webrpc.ts';
import { AddressArg, TokenIdArg } from '../core/args.ts';

const Id = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);
export const ProjectIdArg = Id.optional();
export const IdArg = Id;

const Url = z.string().max(4096);
const Text = z.string().max(20_000);
const Json = z.record(z.string(), z.unknown());

export const CollectionMetadataArg = z.object({
  name: z.string().trim().min(1, 'a collection needs a name').max(200),
  description: Text.optional(),
  image: Url.optional(),
  external_link: Url.optional(),
  properties: Json.optional(),
  attributes: z.array(Json).max(1000).optional(),
});

export const CollectionArg = z.object({ id: Id.optional(), projectId: ProjectIdArg, metadata: CollectionMetadataArg, private: z.boolean().optional() });

/** A TokenMetadata as sent to the Collections methods: the document fields (the rest is the service's). */
export const TokenArg = z.object({
  tokenId: TokenIdArg,
  name: z.string().max(1000).optional(),
  description: Text.optional(),
  image: Url.optional(),
  video: Url.optional(),
  audio: Url.optional(),
  properties: Json.optional(),
  attributes: z.array(Json).max(1000).optional(),
  image_data: z.string().max(200_000).optional(),
  external_url: Url.optional(),
  background_color: z.string().max(20).optional(),
  animation_url: Url.optional(),
  decimals: z.number().int().min(0).max(77).optional(),
});

/** A token id, or none (absent or "") for the collection's own asset. */
const AssetTokenArg = z.union([z.literal(''), TokenIdArg]).optional();
const FieldArg = z.string().regex(/^[a-z][a-z0-9_]{0,39}$/, 'a metadata field name: lower case letters, digits and _ (e.g. image, animation_url)');
const FileNameArg = z
  .string()
  .max(200)
  .transform((n) => n.replace(/[^\w.-]/g, '_'));

export const AssetArg = z.object({
  id: Id.optional(),
  collectionId: Id,
  tokenId: AssetTokenArg,
  metadataField: FieldArg,
  name: FileNameArg.optional(),
  filename: FileNameArg.optional(),
});

export const ContractCollectionArg = z.object({ id: Id.optional(), chainId: Id, contractAddress: AddressArg, collectionId: Id });

export function actorOf(ctx: Pick<RpcContext, 'admin' | 'project'>): Actor {
  if (ctx.admin) return { admin: true };
  if (!ctx.project) throw new RpcError(MetadataErrors.Unauthorized, 'a project access key or an admin token is required');
  return { projectId: ctx.project.id };
}

/** The domain's refusals in the metadata error catalog. */
export async function refusals<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (!(err instanceof CollectionError)) throw err;
    const def = {
      not_found: MetadataErrors.NotFound,
      denied: MetadataErrors.PermissionDenied,
      conflict: MetadataErrors.RequestConflict,
      invalid: MetadataErrors.InvalidArgument,
      media: MetadataErrors.InvalidArgument,
      quota: AuthControlErrors.QuotaExceeded,
      rate: MetadataErrors.RateLimited,
    }[err.kind];
    throw new RpcError(def, err.message, err.retryAfterSec ? { 'Retry-After': String(err.retryAfterSec) } : {});
  }
}

export function assetWire(svc: CollectionsService, a: AssetRecord) {
  const url = svc.assetUrl(a);
  const svg = a.blob?.mimeType === 'image/svg+xml';
  return {
    id: a.id,
    collectionId: a.collectionId,
    ...(a.tokenId ? { tokenId: a.tokenId } : {}),
    ...(url ? { url } : {}),
    metadataField: a.metadataField,
    ...(a.filename ? { name: a.filename, filename: a.filename } : {}),
    ...(a.blob
      ? {
          // SVG is only ever served rasterised (1024 px wide WebP).
          mimeType: svg ? 'image/webp' : a.blob.mimeType,
          ...(svg ? {} : { filesize: a.blob.filesize }),
          ...(a.blob.width ? { width: svg ? 1024 : a.blob.width } : {}),
          ...(a.blob.width && a.blob.height ? { height: svg ? Math.round((a.blob.height * 1024) / a.blob.width) : a.blob.height } : {}),
        }
      : {}),
    updatedAt: a.updatedAt.toISOString(),
  };
}

export function collectionWire(svc: CollectionsService, c: CollectionRecord, assets: AssetRecord[] = []) {
  return {
    id: c.id,
    projectId: c.projectId,
    metadata: c.metadata,
    private: c.private,
    ...(c.revealKey ? { revealKey: c.revealKey } : {}),
    tokenCount: c.tokenCount ?? 0,
    createdAt: c.createdAt.toISOString(),
    updatedAt: c.updatedAt.toISOString(),
    baseURIs: svc.baseURIs(c),
    assets: assets.map((a) => assetWire(svc, a)),
  };
}

export function tokenWire(svc: CollectionsService, t: TokenRecord, assets: AssetRecord[]) {
  const doc = svc.document(t.metadata, assets);
  return {
    tokenId: t.tokenId,
    source: 'SEQUENCE_BUILDER_COLLECTIONS',
    ...doc,
    name: typeof doc.name === 'string' ? doc.name : '',
    attributes: Array.isArray(doc.attributes) ? doc.attributes : [],
    status: 'AVAILABLE',
    private: t.private,
    updatedAt: t.updatedAt.toISOString(),
    assets: assets.map((a) => assetWire(svc, a)),
  };
}

export function linkWire(l: ContractLink) {
  return { id: l.id, chainId: l.chainId, contractAddress: l.contractAddress, collectionId: l.collectionId };
}
