// Maps the untyped documents found in the wild onto one predictable shape.
// Pure: no I/O, and the raw document is returned untouched beside the result.

import { parseDataUri } from '../fetch/data-uri.ts';
import type { TokenDocument } from './document.ts';
import { sanitizeSvg } from '../../untrusted/svg-sanitize.ts';
import { toHttpMediaUrl, type UriOptions } from '../fetch/uri.ts';

export { sanitizeSvg } from '../../untrusted/svg-sanitize.ts';

export type NormalizeOptions = UriOptions;

export type NormalizedTokenMetadata = {
  name: string;
  description: string;
  /** Loadable URL: http(s) through the first configured gateway, or a data: URI (SVG sanitised). */
  image: string | null;
  /** The image reference exactly as the document spelled it. */
  imageOriginal: string | null;
  /** Inline SVG markup, sanitised. */
  imageData: string | null;
  /** Loadable URL like `image`. data:text/html animations are passed through: render them sandboxed. */
  animationUrl: string | null;
  animationUrlOriginal: string | null;
  externalUrl: string | null;
  /** Six or three lower-case hex digits without "#". */
  backgroundColor: string | null;
  youtubeUrl: string | null;
  decimals: number | null;
  /** Passed through exactly as found (array, object map, whatever); null when absent. */
  attributes: unknown;
  properties: unknown;
};

export type NormalizedDocument = { metadata: NormalizedTokenMetadata; raw: TokenDocument };

const IMAGE_KEYS = ['image', 'image_url', 'imageUrl', 'image_uri', 'imageUri', 'imageURI'];
const IMAGE_DATA_KEYS = ['image_data', 'imageData'];
const ANIMATION_KEYS = ['animation_url', 'animationUrl', 'animation_uri'];
const EXTERNAL_KEYS = ['external_url', 'externalUrl', 'external_link'];
const YOUTUBE_KEYS = ['youtube_url', 'youtubeUrl'];

const SVG_DATA_URI = /^data:image\/svg\+xml[;,]/i;

function own(doc: TokenDocument, key: string): unknown {
  return Object.hasOwn(doc, key) ? doc[key] : undefined;
}

function asText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return '';
}

function firstString(doc: TokenDocument, keys: readonly string[]): string | null {
  for (const key of keys) {
    const value = asText(own(doc, key)).trim();
    if (value !== '') return value;
  }
  return null;
}

function svgToDataUri(svg: string): string {
  return `data:image/svg+xml;base64,${Buffer.from(sanitizeSvg(svg), 'utf8').toString('base64')}`;
}

function mediaUrl(reference: string | null, opts: NormalizeOptions, allowNonImageData: boolean): string | null {
  if (reference === null) return null;
  const url = toHttpMediaUrl(reference, opts);
  if (url === null || !url.startsWith('data:')) return url;
  if (SVG_DATA_URI.test(url)) {
    const data = parseDataUri(url);
    return data ? svgToDataUri(data.text) : null;
  }
  return allowNonImageData || /^data:image\//i.test(url) ? url : null;
}

function linkUrl(reference: string | null, opts: NormalizeOptions): string | null {
  if (reference === null) return null;
  const url = toHttpMediaUrl(reference, opts);
  return url !== null && /^https?:\/\//i.test(url) ? url : null;
}

function imageData(doc: TokenDocument): string | null {
  const value = firstString(doc, IMAGE_DATA_KEYS);
  if (value === null) return null;
  if (SVG_DATA_URI.test(value)) {
    const data = parseDataUri(value);
    return data ? sanitizeSvg(data.text) : null;
  }
  return sanitizeSvg(value);
}

function decimals(doc: TokenDocument): number | null {
  const properties = own(doc, 'properties');
  const nested = properties !== null && typeof properties === 'object' && !Array.isArray(properties) ? own(properties as TokenDocument, 'decimals') : undefined;
  for (const value of [own(doc, 'decimals'), nested]) {
    const n = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value.trim()) : NaN;
    if (Number.isInteger(n) && n >= 0 && n <= 255) return n;
  }
  return null;
}

function backgroundColor(doc: TokenDocument): string | null {
  const value = firstString(doc, ['background_color', 'backgroundColor']);
  const hex = value?.replace(/^#/, '').toLowerCase();
  return hex !== undefined && /^(?:[0-9a-f]{6}|[0-9a-f]{3})$/.test(hex) ? hex : null;
}

export function normalizeTokenDocument(doc: TokenDocument, opts: NormalizeOptions): NormalizedDocument {
  const imageOriginal = firstString(doc, IMAGE_KEYS);
  const animationUrlOriginal = firstString(doc, ANIMATION_KEYS);
  const metadata: NormalizedTokenMetadata = {
    name: asText(own(doc, 'name')),
    description: asText(own(doc, 'description')),
    image: mediaUrl(imageOriginal, opts, false),
    imageOriginal,
    imageData: imageData(doc),
    animationUrl: mediaUrl(animationUrlOriginal, opts, true),
    animationUrlOriginal,
    externalUrl: linkUrl(firstString(doc, EXTERNAL_KEYS), opts),
    backgroundColor: backgroundColor(doc),
    youtubeUrl: linkUrl(firstString(doc, YOUTUBE_KEYS), opts),
    decimals: decimals(doc),
    attributes: own(doc, 'attributes') ?? null,
    properties: own(doc, 'properties') ?? null,
  };
  return { metadata, raw: doc };
}
