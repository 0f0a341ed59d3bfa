import { z } from 'zod';
import { Extensions } from './contract-merge.ts';
import type { ContractRow } from './contract-store.ts';
import type { ResourceStatus } from '../tokens/token-view.ts';

/** The Sequence ContractInfo wire shape. */
export const ContractInfoWire = z.object({
  chainId: z.number().int(),
  address: z.string(),
  source: z.string(),
  name: z.string(),
  type: z.string(),
  symbol: z.string(),
  decimals: z.number().int().optional(),
  logoURI: z.string(),
  deployed: z.boolean(),
  bytecodeHash: z.string(),
  extensions: Extensions,
  updatedAt: z.string(),
  queuedAt: z.string().nullable(),
  status: z.enum(['NOT_AVAILABLE', 'REFRESHING', 'AVAILABLE']),
  /** metarelay extra: the logo and og:image as cached and served by this origin, once stored (the Sequence fields keep the source's). */
  cachedMedia: z.object({ logo: z.string().optional(), ogImage: z.string().optional() }).optional(),
});
export type ContractInfoWire = z.infer<typeof ContractInfoWire>;

/**
 * Cached media URLs of contracts, by address, from the media pipeline; with `eager` (a read with an
 * access key, or the curated directory) it also queues what is not stored yet. A keyless read never
 * queues media: anyone may deploy a contract whose logo never finishes loading.
 */
export type ContractMediaLookup = (
  chainId: number,
  items: { address: string; logo: string | null; ogImage: string | null }[],
  eager: boolean,
) => Promise<Map<string, { logo?: string; ogImage?: string }>>;

/** Adds the cachedMedia extra to answers whose logo or og:image is stored; a lookup that fails leaves the answers as they are. */
export async function withCachedMedia(lookup: ContractMediaLookup | undefined, chainId: number, infos: ContractInfoWire[], eager: boolean): Promise<void> {
  if (!lookup || !infos.length) return;
  const items = infos.map((i) => ({ address: i.address, logo: i.logoURI || null, ogImage: typeof i.extensions.ogImage === 'string' && i.extensions.ogImage ? i.extensions.ogImage : null }));
  const urls = await lookup(chainId, items, eager).catch(() => new Map<string, { logo?: string; ogImage?: string }>());
  for (const i of infos) {
    const u = urls.get(i.address);
    if (u && (u.logo || u.ogImage)) i.cachedMedia = u;
  }
}

/** Turns a stored media URI (ipfs://, ar://, a gateway URL) into one a browser loads; null when it cannot. */
export type MediaUrl = (uri: string) => string | null;

/**
 * Logos are stored as their source wrote them (token lists often say ipfs://) and served as HTTP
 * URLs through the configured gateways, like contractURI images; one that cannot be turned stays as stored.
 */
export function contractToWire(chainId: number, address: string, row: ContractRow | undefined, status: ResourceStatus, queuedAt: Date | null, media?: MediaUrl): ContractInfoWire {
  const logo = row?.logo_uri ?? '';
  return {
    chainId,
    address,
    source: row?.source ?? 'UNKNOWN',
    name: row?.name ?? '',
    type: row?.type ?? 'UNKNOWN',
    symbol: row?.symbol ?? '',
    ...(row?.decimals != null ? { decimals: row.decimals } : {}),
    logoURI: logo && media ? (media(logo) ?? logo) : logo,
    deployed: row?.deployed ?? false,
    bytecodeHash: row?.bytecode_hash ?? '0x',
    extensions: row?.extensions ?? {},
    updatedAt: (row?.updated_at ?? new Date()).toISOString(),
    queuedAt: queuedAt ? queuedAt.toISOString() : null,
    status,
  };
}
