import { z } from 'zod';
import type { ChainLayer, ContractType } from './contract-reader.ts';

/** The ContractInfoExtensions of the Sequence schema; every field optional. */
export const Extensions = z
  .object({
    link: z.string().optional(),
    description: z.string().optional(),
    categories: z.array(z.string()).optional(),
    ogImage: z.string().optional(),
    ogName: z.string().optional(),
    originChainId: z.number().int().optional(),
    originAddress: z.string().optional(),
    blacklist: z.boolean().optional(),
    verified: z.boolean().optional(),
    verifiedBy: z.string().optional(),
    featured: z.boolean().optional(),
    featureIndex: z.number().int().optional(),
  })
  .loose();
export type Extensions = z.infer<typeof Extensions>;

/** Contract-level metadata (ERC-7572 / OpenSea contractURI), mapped onto our fields. */
export const UriLayer = z.object({
  name: z.string().optional(),
  description: z.string().optional(),
  image: z.string().optional(),
  link: z.string().optional(),
  ogImage: z.string().optional(),
});
export type UriLayer = z.infer<typeof UriLayer>;

/** One entry of a Uniswap-format token list. */
export const ListLayer = z.object({
  name: z.string().optional(),
  symbol: z.string().optional(),
  decimals: z.number().int().min(0).max(255).optional(),
  logoURI: z.string().optional(),
  extensions: Extensions.optional(),
  list: z.string().optional(),
});
export type ListLayer = z.infer<typeof ListLayer>;

/** An operator's pinned fields (Sequence ContractInfoOverride): they beat every other source. */
export const OverrideLayer = z.object({
  name: z.string().nullish(),
  type: z.string().nullish(),
  symbol: z.string().nullish(),
  decimals: z.number().int().min(0).max(255).nullish(),
  logoURI: z.string().nullish(),
  extensions: Extensions.nullish(),
});
export type OverrideLayer = z.infer<typeof OverrideLayer>;

export interface MergedInfo {
  name: string;
  symbol: string;
  decimals: number | null;
  logoURI: string;
  type: string;
  extensions: Extensions;
  source: string;
  curated: boolean;
}

const first = <T>(...vals: (T | null | undefined)[]): T | undefined => vals.find((v) => v !== null && v !== undefined && v !== '') ?? undefined;

/**
 * The documented precedence:
 * - name, symbol, logo: override > token list > chain (name(), symbol()) > contractURI document;
 * - decimals and type: override > chain > token list;
 * - description, link, ogImage and the other extensions: override > token list > contractURI document.
 */
export function mergeContractInfo(l: { chain?: ChainLayer | null; uri?: UriLayer | null; list?: ListLayer | null; override?: OverrideLayer | null }): MergedInfo {
  const o = l.override ?? undefined;
  const list = l.list ?? undefined;
  const chain = l.chain ?? undefined;
  const uri = l.uri ?? undefined;
  const ext: Extensions = {
    ...(uri?.description ? { description: uri.description } : {}),
    ...(uri?.link ? { link: uri.link } : {}),
    ...(uri?.ogImage ? { ogImage: uri.ogImage } : {}),
    ...(uri?.name ? { ogName: uri.name } : {}),
    ...(list?.extensions ?? {}),
    ...Object.fromEntries(Object.entries(o?.extensions ?? {}).filter(([, v]) => v !== null && v !== undefined)),
  };
  const type: ContractType | string = first(o?.type, chain && chain.type !== 'UNKNOWN' ? chain.type : undefined, list ? 'ERC20' : undefined) ?? 'UNKNOWN';
  const source = o
    ? 'FETCHER_TOKEN_DIRECTORY_ADMIN'
    : list
      ? 'TOKEN_DIRECTORY_PUBLIC_TOKEN_LIST'
      : uri
        ? 'FETCHER_ON_CHAIN_CONTRACT_URI'
        : chain?.type === 'ERC20'
          ? 'FETCHER_ON_CHAIN_ERC20_INTERFACE'
          : chain
            ? 'FETCHER'
            : 'UNKNOWN';
  return {
    name: first(o?.name, list?.name, chain?.name, uri?.name) ?? '',
    symbol: first(o?.symbol, list?.symbol, chain?.symbol) ?? '',
    decimals: first(o?.decimals, chain?.decimals, list?.decimals) ?? null,
    logoURI: first(o?.logoURI, list?.logoURI, uri?.image) ?? '',
    type,
    extensions: ext,
    source,
    curated: !!(o || list || ext.verified || ext.featured),
  };
}

/** Maps an OpenSea / ERC-7572 contract document; unknown shapes give an empty layer, never a throw. */
export function uriLayerFromDocument(doc: Record<string, unknown>, imageUrl: (u: string) => string | null): UriLayer {
  const str = (k: string) => (typeof doc[k] === 'string' && (doc[k] as string).trim() ? (doc[k] as string).trim() : undefined);
  const image = str('image') ?? str('image_url') ?? str('logo');
  const banner = str('banner_image') ?? str('featured_image') ?? str('banner_image_url');
  return {
    name: str('name'),
    description: str('description'),
    image: image ? (imageUrl(image) ?? undefined) : undefined,
    link: str('external_link') ?? str('external_url') ?? str('website'),
    ogImage: banner ? (imageUrl(banner) ?? undefined) : undefined,
  };
}

/** Keeps the extension fields whose type is right; a token list's odd entries never poison a record. */
export function cleanExtensions(raw: unknown): Extensions {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return {};
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(raw)) {
    if (Extensions.safeParse({ [k]: v }).success) out[k] = v;
  }
  return out as Extensions;
}
