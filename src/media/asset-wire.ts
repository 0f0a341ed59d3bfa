// An asset as the wire carries it (Sequence's Asset): the file name and type a client sees for a
// stored blob, SVG announced as the raster it is served as.
import type { BlobInfo, MediaAsset } from './media-store.ts';

/** Sequence's Asset, with both `filename` (what the Go server emits) and `name` (what the TS clients read). */
export type AssetWire = {
  id: number;
  collectionId: number;
  tokenId: string;
  url: string;
  metadataField: string;
  filename: string;
  name: string;
  mimeType: string;
  filesize?: number;
  width?: number;
  height?: number;
  updatedAt: string;
};

const EXTENSIONS: Record<string, string> = {
  'image/png': 'png',
  'image/apng': 'png',
  'image/jpeg': 'jpg',
  'image/gif': 'gif',
  'image/webp': 'webp',
  'image/avif': 'avif',
  'image/svg+xml': 'svg',
  'video/mp4': 'mp4',
  'video/webm': 'webm',
  'audio/mpeg': 'mp3',
  'audio/ogg': 'ogg',
  'audio/wav': 'wav',
};

export function toWire(urlOf: (b: BlobInfo) => string, a: MediaAsset, b: BlobInfo): AssetWire {
  const svg = b.mimeType === 'image/svg+xml';
  const filename = fileNameOf(a.sourceUrl, a.key.field, svg ? 'webp' : (EXTENSIONS[b.mimeType] ?? 'bin'));
  return {
    id: a.id,
    collectionId: 0,
    tokenId: a.key.tokenId,
    url: urlOf(b),
    metadataField: a.key.field,
    filename,
    name: filename,
    mimeType: svg ? 'image/webp' : b.mimeType,
    ...(svg ? {} : { filesize: b.filesize }),
    // SVG is served rasterised at 1024 px wide.
    ...(b.width ? { width: svg ? 1024 : b.width } : {}),
    ...(b.height && b.width ? { height: svg ? Math.round((b.height * 1024) / b.width) : b.height } : {}),
    updatedAt: a.updatedAt.toISOString(),
  };
}

function fileNameOf(url: string, field: string, ext: string): string {
  if (!url.startsWith('data:')) {
    try {
      const last = decodeURIComponent(new URL(url).pathname.split('/').pop() ?? '');
      const clean = last.replace(/[^\w.-]/g, '_').slice(0, 100);
      if (clean && clean !== '_') return clean.replace(/\.svg$/i, `.${ext}`);
    } catch {
      // Not a URL we can name from: fall through to the field's name.
    }
  }
  return `${field}.${ext}`;
}
