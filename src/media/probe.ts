// Establishes what a fetched file really is from its bytes (never the extension or the
// Content-Type), and checks that an image can be decoded within the pixel and frame limits
// before anything is stored.

import { fileTypeFromBuffer } from 'file-type';
import sharp, { type Metadata, type SharpOptions } from 'sharp';
import { looksLikeSvg, prepareSvgForRaster } from './svg-raster.ts';
import { errorText } from '../util/error.ts';

export type MediaKind = 'image' | 'svg' | 'video' | 'audio' | 'model';

export type ProbeLimits = { maxInputPixels: number; maxFrames: number };

export type Probed = {
  ok: true;
  kind: MediaKind;
  mimeType: string;
  /** What is stored: the original bytes, or for SVG the sanitised document. */
  bytes: Buffer;
  width: number | null;
  height: number | null;
  frames: number;
};

export type MediaFailureReason = 'UNSUPPORTED_TYPE' | 'UNDECODABLE' | 'TOO_MANY_PIXELS' | 'TOO_MANY_FRAMES' | 'SVG_ENTITIES' | 'SVG_INVALID';

export type ProbeFailure = { ok: false; reason: MediaFailureReason; message: string };

const RASTER = new Set(['image/png', 'image/apng', 'image/jpeg', 'image/gif', 'image/webp', 'image/avif', 'image/heic', 'image/tiff']);
const PASSTHROUGH: Record<string, MediaKind> = {
  'video/mp4': 'video',
  'video/webm': 'video',
  'video/quicktime': 'video',
  'video/ogg': 'video',
  'audio/mpeg': 'audio',
  'audio/ogg': 'audio',
  'audio/wav': 'audio',
  'audio/x-wav': 'audio',
  'audio/flac': 'audio',
  'audio/x-flac': 'audio',
  'audio/aac': 'audio',
  'audio/x-m4a': 'audio',
  'audio/mp4': 'audio',
  'model/gltf-binary': 'model',
};

/** sharp options every decode of untrusted input uses. */
export function decodeOptions(limits: ProbeLimits, extra: SharpOptions = {}): SharpOptions {
  return { limitInputPixels: limits.maxInputPixels, failOn: 'error', ...extra };
}

/** What sharp said, on one line. */
const said = (err: unknown) => errorText(err).split('\n')[0].slice(0, 200);

async function probeRaster(bytes: Buffer, mimeType: string, kind: 'image' | 'svg', limits: ProbeLimits): Promise<Probed | ProbeFailure> {
  let meta: Metadata;
  try {
    // Reads the header only: dimensions and frame count before any pixel is decoded. The pixel
    // limit is checked below, with the frames counted, so a bomb gets its own reason.
    meta = await sharp(bytes, decodeOptions(limits, { animated: true, limitInputPixels: false })).metadata();
  } catch (err) {
    return { ok: false, reason: 'UNDECODABLE', message: said(err) };
  }
  const width = meta.width ?? 0;
  const frames = meta.pages ?? 1;
  const height = meta.pageHeight ?? meta.height ?? 0;
  if (!width || !height) return { ok: false, reason: 'UNDECODABLE', message: 'no dimensions' };
  if (frames > limits.maxFrames) return { ok: false, reason: 'TOO_MANY_FRAMES', message: `${frames} frames (limit ${limits.maxFrames})` };
  if (width * height * frames > limits.maxInputPixels) {
    return { ok: false, reason: 'TOO_MANY_PIXELS', message: `${width}×${height}×${frames} pixels (limit ${limits.maxInputPixels})` };
  }
  try {
    // One full decode of the first frame: a truncated or corrupt file fails here, not when served.
    await sharp(bytes, decodeOptions(limits)).resize({ width: 16, withoutEnlargement: true }).raw().toBuffer();
  } catch (err) {
    const text = said(err);
    return { ok: false, reason: /pixel limit/i.test(text) ? 'TOO_MANY_PIXELS' : 'UNDECODABLE', message: text };
  }
  return { ok: true, kind, mimeType, bytes, width, height: height, frames };
}

export async function probeMedia(bytes: Buffer, limits: ProbeLimits): Promise<Probed | ProbeFailure> {
  const detected = await fileTypeFromBuffer(bytes).catch(() => undefined);
  if (detected && RASTER.has(detected.mime)) return probeRaster(bytes, detected.mime, 'image', limits);
  if (detected && PASSTHROUGH[detected.mime]) {
    return { ok: true, kind: PASSTHROUGH[detected.mime], mimeType: detected.mime, bytes, width: null, height: null, frames: 1 };
  }
  // file-type reads SVG with an XML declaration as XML (and otherwise not at all).
  if ((!detected || detected.mime === 'application/xml') && looksLikeSvg(bytes)) {
    const prepared = prepareSvgForRaster(bytes);
    if (!prepared.ok) return prepared;
    return probeRaster(prepared.svg, 'image/svg+xml', 'svg', limits);
  }
  const what = detected ? detected.mime : 'unrecognised bytes';
  return { ok: false, reason: 'UNSUPPORTED_TYPE', message: `not a supported image, video or audio file (${what})` };
}
