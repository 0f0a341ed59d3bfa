// Prepares untrusted SVG for rasterisation by librsvg (inside sharp). The metadata sanitiser
// already drops scripts, event handlers, script URLs, foreignObject and the DOCTYPE; for a
// raster nothing outside the document may be reached either, so every reference that is not a
// fragment of the document itself (or an inline raster image) is removed too. SVG with entity
// declarations is refused outright: expansion ("billion laughs") is a denial of service.

import { sanitizeSvg } from '../untrusted/svg-sanitize.ts';

export type SvgVerdict = { ok: true; svg: Buffer } | { ok: false; reason: 'SVG_ENTITIES' | 'SVG_INVALID'; message: string };

const INLINE_RASTER = /^data:image\/(png|jpeg|gif|webp);/i;
const PREDEFINED = new Set(['amp', 'lt', 'gt', 'quot', 'apos']);

function keepReference(value: string): boolean {
  const v = value.trim();
  return v.startsWith('#') || INLINE_RASTER.test(v);
}

export function prepareSvgForRaster(bytes: Buffer): SvgVerdict {
  const text = bytes.toString('utf8');
  if (/<!ENTITY/i.test(text)) return { ok: false, reason: 'SVG_ENTITIES', message: 'SVG declares XML entities (refused: entity expansion)' };
  let svg = sanitizeSvg(text);
  // href / xlink:href / src to anything but the document itself.
  svg = svg.replace(/\s([\w:-]*(?:href|src))\s*=\s*"([^"]*)"/gi, (all, _name: string, value: string) => (keepReference(value) ? all : ''));
  // url(...) in attributes and style sheets: only fragment references survive.
  svg = svg.replace(/url\(\s*(['"]?)([^)'"]*)\1\s*\)/gi, (all, _q: string, value: string) => (value.trim().startsWith('#') ? all : 'none'));
  svg = svg.replace(/@import[^;]*;?/gi, '');
  // Entity references the sanitiser let through have no declaration left: drop them rather than
  // let the parser fail half-way.
  svg = svg.replace(/&([A-Za-z][\w.-]*);/g, (all, name: string) => (PREDEFINED.has(name) ? all : ''));
  if (!/<svg[\s>]/i.test(svg)) return { ok: false, reason: 'SVG_INVALID', message: 'no <svg> element left after sanitising' };
  return { ok: true, svg: Buffer.from(svg, 'utf8') };
}

/** SVG is text, so file-type cannot see it: the first element decides. */
export function looksLikeSvg(bytes: Buffer): boolean {
  let head = bytes
    .subarray(0, 4096)
    .toString('utf8')
    .replace(/^\uFEFF/, '');
  // Skip the XML declaration, comments, processing instructions and a DOCTYPE before the root.
  for (;;) {
    head = head.trimStart();
    const skip = /^(<\?[\s\S]*?\?>|<!--[\s\S]*?-->|<!DOCTYPE[^[>]*(\[[\s\S]*?\])?\s*>)/i.exec(head);
    if (!skip) break;
    head = head.slice(skip[0].length);
  }
  return /^<svg[\s>]/i.test(head) || /^<[\w-]+:svg[\s>]/i.test(head);
}
