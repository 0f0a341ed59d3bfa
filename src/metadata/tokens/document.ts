// Turns fetched bytes into a JSON object. The body is untrusted: servers lie
// about content types in both directions, so we sniff and let zod decide.

import { z } from 'zod';
import { decodeText } from '../fetch/data-uri.ts';
import type { FetchFailureReason } from '../errors.ts';
import { nestsDeeperThan } from './json-depth.ts';

export type TokenDocument = Record<string, unknown>;

export type DocumentResult = { ok: true; document: TokenDocument } | { ok: false; reason: Extract<FetchFailureReason, 'INVALID_JSON' | 'NOT_AN_OBJECT' | 'TOO_DEEP'>; message: string };

/**
 * The deepest nesting of arrays and objects a token or contract document may have (the document
 * object itself is level 1). Real metadata stays under 10 levels; 64 leaves room for odd but honest
 * documents and keeps every recursive step after parsing (serialising the save batch, jsonb, the
 * wire answer) far from the stack limit.
 */
export const MAX_DOCUMENT_DEPTH = 64;

// zod's record output is a fresh object built without prototype-bearing keys,
// so a "__proto__" member in the document cannot leak into anything downstream.
const documentSchema = z.record(z.string(), z.unknown());

const HTML_TYPES = new Set(['text/html', 'application/xhtml+xml']);

export function mediaTypeOf(contentType: string | undefined): string {
  return (contentType ?? '').split(';', 1)[0].trim().toLowerCase();
}

function charsetOf(contentType: string | undefined): string {
  const match = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? '');
  return match ? match[1].toLowerCase() : 'utf-8';
}

export function bodyText(body: Buffer, contentType: string | undefined): string {
  // A UTF-16 BOM beats a wrong or missing charset label.
  if (body[0] === 0xff && body[1] === 0xfe) return decodeText(body, 'utf-16le');
  if (body[0] === 0xfe && body[1] === 0xff) return decodeText(body, 'utf-16be');
  return decodeText(body, charsetOf(contentType));
}

// The content type is only a hint: misconfigured hosts serve JSON as text/html
// or octet-stream, so what decides is whether the body parses.
export function parseDocument(text: string, contentType: string | undefined): DocumentResult {
  const trimmed = text.replace(/^[\s\u0000\ufeff]+|[\s\u0000]+$/g, '');
  if (trimmed.startsWith('<')) {
    return { ok: false, reason: 'INVALID_JSON', message: 'got HTML/XML markup instead of JSON' };
  }
  if (nestsDeeperThan(trimmed, MAX_DOCUMENT_DEPTH)) {
    return { ok: false, reason: 'TOO_DEEP', message: `document nests arrays/objects deeper than ${MAX_DOCUMENT_DEPTH} levels` };
  }
  let value: unknown;
  try {
    value = JSON.parse(trimmed);
  } catch (err) {
    const served = HTML_TYPES.has(mediaTypeOf(contentType)) ? ' (served as HTML)' : '';
    return { ok: false, reason: 'INVALID_JSON', message: `not JSON${served}: ${(err as Error).message}` };
  }
  const parsed = documentSchema.safeParse(value);
  if (!parsed.success || Array.isArray(value)) {
    const kind = value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value;
    return { ok: false, reason: 'NOT_AN_OBJECT', message: `document is a JSON ${kind}, not an object` };
  }
  return { ok: true, document: parsed.data };
}
