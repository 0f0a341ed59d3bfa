import { z } from 'zod';
import type { TokenRecord, TokenSummary } from './token-store.ts';

export type ResourceStatus = 'NOT_AVAILABLE' | 'REFRESHING' | 'AVAILABLE';

/** The stored normalised document, checked when read back from the database. */
export const StoredTokenMetadata = z.object({
  name: z.string(),
  description: z.string(),
  image: z.string().nullable(),
  imageOriginal: z.string().nullable().optional(),
  imageData: z.string().nullable().optional(),
  animationUrl: z.string().nullable().optional(),
  animationUrlOriginal: z.string().nullable().optional(),
  externalUrl: z.string().nullable().optional(),
  backgroundColor: z.string().nullable().optional(),
  youtubeUrl: z.string().nullable().optional(),
  decimals: z.number().nullable().optional(),
  attributes: z.unknown().optional(),
  properties: z.unknown().optional(),
});

/** The Sequence TokenMetadata wire shape (snake_case keys where the ERC metadata standard has them). */
export const TokenMetadataWire = z.object({
  chainId: z.number().int(),
  contractAddress: z.string(),
  tokenId: z.string(),
  source: z.string(),
  name: z.string(),
  description: z.string(),
  image: z.string(),
  image_data: z.string().optional(),
  animation_url: z.string().optional(),
  external_url: z.string().optional(),
  background_color: z.string().optional(),
  youtube_url: z.string().optional(),
  properties: z.record(z.string(), z.unknown()).nullable(),
  attributes: z.array(z.unknown()).nullable(),
  decimals: z.number().int(),
  status: z.enum(['NOT_AVAILABLE', 'REFRESHING', 'AVAILABLE']),
  updatedAt: z.string(),
  queuedAt: z.string().nullable(),
  lastFetched: z.string().optional(),
  assets: z.array(z.record(z.string(), z.unknown())).optional().describe('cached media of the token (Sequence Asset shape)'),
  failureReason: z.string().optional().describe('why the token has no metadata (metarelay extension)'),
  failureMessage: z.string().optional(),
});
export type TokenMetadataWire = z.infer<typeof TokenMetadataWire>;

const opt = <K extends string>(key: K, v: string | null | undefined): Partial<Record<K, string>> => (v ? ({ [key]: v } as Record<K, string>) : {});

/**
 * The status of a stored token, as GetTokenMetadata gives it: AVAILABLE with metadata, REFRESHING
 * once it is stale (`staleAfterSec` past its last fetch) and due for the re-read that staleness
 * starts, NOT_AVAILABLE without metadata.
 */
export function storedStatus(rec: Pick<TokenRecord, 'metadata' | 'lastFetched' | 'retryAfter'>, staleAfterSec: number, now: number): ResourceStatus {
  if (!rec.metadata) return 'NOT_AVAILABLE';
  const staleAt = rec.lastFetched ? rec.lastFetched.getTime() + staleAfterSec * 1000 : 0;
  const due = !rec.retryAfter || rec.retryAfter.getTime() <= now;
  return now > staleAt && due ? 'REFRESHING' : 'AVAILABLE';
}

export function toWire(chainId: number, contract: string, tokenId: string, rec: TokenSummary | undefined, status: ResourceStatus, queuedAt: Date | null): TokenMetadataWire {
  const parsed = rec?.metadata ? StoredTokenMetadata.safeParse(rec.metadata) : undefined;
  const m = parsed?.success ? parsed.data : undefined;
  const props = m?.properties;
  const attrs = m?.attributes;
  return {
    chainId,
    contractAddress: contract,
    tokenId,
    source: rec?.source ?? 'FETCHER_ON_CHAIN_TOKEN_URI',
    name: m?.name ?? '',
    description: m?.description ?? '',
    image: m?.image ?? '',
    ...opt('image_data', m?.imageData),
    ...opt('animation_url', m?.animationUrl),
    ...opt('external_url', m?.externalUrl),
    ...opt('background_color', m?.backgroundColor),
    ...opt('youtube_url', m?.youtubeUrl),
    // Passed through as the document has them; a shape other than the standard one is wrapped, not dropped.
    properties: props == null ? null : typeof props === 'object' && !Array.isArray(props) ? (props as Record<string, unknown>) : { value: props },
    // The schema's attributes is a list, never null: a document without them has none.
    attributes: attrs == null ? [] : Array.isArray(attrs) ? attrs : [attrs],
    decimals: typeof m?.decimals === 'number' && Number.isInteger(m.decimals) && m.decimals >= 0 ? m.decimals : 0,
    status: m ? status : 'NOT_AVAILABLE',
    updatedAt: (rec?.updatedAt ?? new Date()).toISOString(),
    queuedAt: queuedAt ? queuedAt.toISOString() : null,
    ...(rec?.lastFetched ? { lastFetched: rec.lastFetched.toISOString() } : {}),
    ...(!m && rec?.failureReason ? { failureReason: rec.failureReason, failureMessage: rec.failureMessage ?? '' } : {}),
  };
}
