import { z } from 'zod';
import { AddressArg, ChainArg, MetadataErrors, type MethodDef, RpcError, TokenIdArg, chainFor, metadataErrorMap, method, type ChainArgDeps } from '../../http/index.ts';
import { isImage, type MediaAsset, type MediaService } from '../../media/index.ts';
import type { ConsoleDeps } from '../deps.ts';
import type { Services } from '../../services.ts';

/** What the media methods use: the media service, contracts and tokens, and the chain lookup. */
export type MediaServices = ChainArgDeps & Pick<Services, 'contracts' | 'media' | 'tokens'>;

/*
 * The pictures of the console's token and directory pages. The page cannot use a token's own image
 * URL (its CSP allows images from this origin only, and an on-chain SVG would arrive as a wall of
 * base64), nor wait for the eager media queue: these methods put the field through the media pipeline
 * now (fetched by the guarded fetcher, typed from its bytes, an SVG sanitised and rasterised) and
 * answer the same-origin paths of its thumbnail and original. The browser's first request of a
 * rendition renders it.
 */

/** A field's picture as the page shows it: same-origin paths, or why there is none. */
function pictureWire(field: string, a: MediaAsset | null) {
  if (a?.status !== 'READY' || !a.blob) {
    return {
      field,
      ready: false,
      failureReason: a?.failureReason ?? 'NO_MEDIA',
      failureMessage: a?.failureMessage ?? null,
      mimeType: null,
      width: null,
      height: null,
      thumbnail: null,
      original: null,
    };
  }
  return blobPicture(field, a.blob);
}

/** A stored blob's picture (a fetched token field, or a file uploaded to a collection): same-origin paths of its renditions. */
export function blobPicture(field: string, b: { sha256: string; mimeType: string; width: number | null; height: number | null }) {
  const svg = b.mimeType === 'image/svg+xml';
  return {
    field,
    ready: true,
    failureReason: null,
    failureMessage: null,
    mimeType: b.mimeType,
    width: b.width,
    height: b.height,
    // An image's 256 px rendition; SVG only ever as a raster (its original is not served).
    thumbnail: isImage(b.mimeType) ? `/media/b/${b.sha256}/256.webp` : null,
    large: isImage(b.mimeType) ? `/media/b/${b.sha256}/1024.webp` : null,
    original: svg ? null : `/media/b/${b.sha256}/original`,
  };
}

const need = (media: MediaService | undefined): MediaService => {
  if (!media) throw new RpcError(MetadataErrors.Fail, 'media caching is off (media.enabled is false)');
  return media;
};

export function mediaMethods({ s }: ConsoleDeps<MediaServices>): Record<string, MethodDef<any>> {
  return {
    /** A token's image, inline SVG and animation through the media pipeline now: paths to show, or why not. */
    TokenPictures: method({
      input: z.object({ chainID: ChainArg, contractAddress: AddressArg, tokenID: TokenIdArg }),
      handler: async (a) => {
        const media = need(s.media);
        const chain = chainFor(s, a.chainID, metadataErrorMap);
        const token = (await s.tokens.getTokens(chain, a.contractAddress, [a.tokenID])).tokens[0];
        if (!token || token.status === 'NOT_AVAILABLE') return { pictures: [] };
        const sources: [string, string | undefined][] = [
          ['image', token.image],
          ['image_data', token.image_data ? `data:image/svg+xml;base64,${Buffer.from(token.image_data, 'utf8').toString('base64')}` : undefined],
          ['animation_url', token.animation_url],
        ];
        const pictures = await Promise.all(
          sources
            .filter((x): x is [string, string] => !!x[1])
            .map(async ([field, source]) => {
              const key = { chainId: chain.chainId, contract: a.contractAddress, tokenId: a.tokenID, field: field as 'image' };
              // With media.rewriteImage the image is already our own URL: the stored asset is the one.
              const asset = source.startsWith(`${media.publicUrl}/media/`) ? await media.asset(key) : await media.ensure(key, source);
              return pictureWire(field, asset ?? null);
            }),
        );
        return { pictures };
      },
    }),
    /** A directory entry's logo through the media pipeline now. */
    ContractLogo: method({
      input: z.object({ chainID: ChainArg, contractAddress: AddressArg }),
      handler: async (a) => {
        const media = need(s.media);
        const chain = chainFor(s, a.chainID, metadataErrorMap);
        const info = (await s.contracts.get(chain, [a.contractAddress])).infos.get(a.contractAddress);
        if (!info?.logoURI) return { logo: pictureWire('logo', null) };
        return { logo: pictureWire('logo', await media.ensureContract(chain.chainId, a.contractAddress, 'logo', info.logoURI)) };
      },
    }),
  };
}
