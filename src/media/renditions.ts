// Renditions: fixed widths so the set of derived files per original is small and cacheable
// forever under the original's hash. WebP by default; PNG and JPEG for clients that do not take
// WebP. Animated originals keep their animation in WebP; "-still" asks for the first frame.

import sharp, { type SharpOptions } from 'sharp';
import { decodeOptions, type ProbeLimits } from './probe.ts';

// Memory stays flat over many images: libvips' operation cache would otherwise hold decoded
// pixels of recent inputs.
sharp.cache(false);

export const WIDTHS = [64, 256, 512, 1024] as const;
export type Format = 'webp' | 'png' | 'jpg';
export type Rendition = { width: number; format: Format; still: boolean };

export const FORMAT_TYPES: Record<Format, string> = { webp: 'image/webp', png: 'image/png', jpg: 'image/jpeg' };

const NAME = /^(64|256|512|1024)(-still)?\.(webp|png|jpg)$/;

/** "256.webp", "64-still.png": undefined for anything else. */
export function parseRendition(name: string): Rendition | undefined {
  const m = NAME.exec(name);
  if (!m) return undefined;
  return { width: Number(m[1]), still: m[2] !== undefined, format: m[3] as Format };
}

export function renditionName(r: Rendition): string {
  return `${r.width}${r.still ? '-still' : ''}.${r.format}`;
}

/** The smallest fixed width at least as wide as asked (the largest for anything wider). */
export function snapWidth(w: number): number {
  return WIDTHS.find((x) => x >= w) ?? WIDTHS[WIDTHS.length - 1];
}

/** The format an Accept header prefers among ours: WebP unless the client names only PNG/JPEG. */
export function formatFor(accept: string | undefined): Format {
  const a = (accept ?? '').toLowerCase();
  if (a.includes('image/webp')) return 'webp';
  if (a.includes('image/png')) return 'png';
  if (a.includes('image/jpeg')) return 'jpg';
  return 'webp';
}

export type RenderSource = { bytes: Buffer; mimeType: string; width: number | null; frames: number };

export async function render(source: RenderSource, r: Rendition, limits: ProbeLimits): Promise<Buffer> {
  const animated = source.frames > 1 && !r.still && r.format === 'webp';
  const extra: SharpOptions = animated ? { animated: true } : {};
  const svg = source.mimeType === 'image/svg+xml';
  // Vector input is drawn at the asked width (not scaled up from its nominal size, which would blur).
  if (svg && source.width) extra.density = Math.min(2400, Math.max(1, (72 * r.width) / source.width));
  let img = sharp(source.bytes, decodeOptions(limits, extra)).rotate().resize({ width: r.width, withoutEnlargement: !svg });
  if (r.format === 'webp') img = img.webp({ quality: 80, effort: 2 });
  else if (r.format === 'png') img = img.png({ compressionLevel: 6 });
  else img = img.flatten({ background: '#ffffff' }).jpeg({ quality: 82, mozjpeg: true });
  return img.toBuffer();
}
