// What a hosted document may hold. The public document at /projects/<p>/collections/<c>/tokens/<id> is
// read by wallets and marketplaces as it is, so it keeps to what GetTokenMetadata would answer for the
// same token: links a browser may load or follow safely, and SVG markup through the same sanitiser.

import { sanitizeSvg } from '../untrusted/svg-sanitize.ts';

/** Document fields that are links a wallet or marketplace loads or follows. */
const LINK_FIELDS = ['image', 'video', 'audio', 'animation_url', 'external_url', 'external_link'] as const;
/**
 * http(s), and ipfs:// (a content address wallets resolve through their gateway, as GetTokenMetadata
 * does through its own): never javascript:, data: (a file is an uploaded asset; SVG goes in
 * image_data) or anything else a browser would run or render inline.
 */
const LINK = /^(?:https?:\/\/[^\s]+|ipfs:\/\/[^\s]+)$/i;

const isLink = (v: unknown): v is string => typeof v === 'string' && LINK.test(v.trim());

/**
 * The document as it is stored: links checked (a refusal names the field), `image_data` through the SVG
 * sanitiser (scripts, event handlers and external references removed), refused when no SVG is left.
 * A string: why it is refused.
 */
export function storedDocument(doc: Record<string, unknown>): Record<string, unknown> | string {
  const out = { ...doc };
  for (const f of LINK_FIELDS) {
    const v = out[f];
    if (v === undefined || v === null || v === '') continue;
    if (!isLink(v)) {
      return `${f}: only http(s) and ipfs:// links are kept (got "${String(v).slice(0, 40)}"); a file is uploaded as an asset, SVG markup goes in image_data`;
    }
    out[f] = v.trim();
  }
  if (out.image_data !== undefined && out.image_data !== null) {
    const svg = typeof out.image_data === 'string' ? sanitizeSvg(out.image_data) : '';
    if (!/<svg[\s>]/i.test(svg)) return 'image_data: must be SVG markup (<svg …>…</svg>)';
    out.image_data = svg;
  }
  return out;
}

/**
 * The document as it is served: a link that is not one is left out and `image_data` sanitised again,
 * so a row stored before these rules (or by hand) is served as safely as a new one.
 */
export function servedDocument(doc: Record<string, unknown>): Record<string, unknown> {
  const out = { ...doc };
  for (const f of LINK_FIELDS) if (out[f] !== undefined && !isLink(out[f])) delete out[f];
  if (out.image_data !== undefined) {
    const svg = typeof out.image_data === 'string' ? sanitizeSvg(out.image_data) : '';
    if (/<svg[\s>]/i.test(svg)) out.image_data = svg;
    else delete out.image_data;
  }
  return out;
}
