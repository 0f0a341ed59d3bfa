// RFC 2397 data: URIs as they appear on chain, which is looser than the RFC:
// `;utf8` pseudo-parameters, raw unencoded JSON, percent-encoded base64,
// URL-safe base64 and missing padding all occur in deployed contracts.

export type DataUri = { mediaType: string; text: string };

const BASE64_BODY = /^[A-Za-z0-9+/_-]*={0,2}$/;

export function parseDataUri(raw: string): DataUri | null {
  if (!/^data:/i.test(raw)) return null;
  const comma = raw.indexOf(',');
  if (comma === -1) return null;
  const header = raw.slice(5, comma);
  const payload = raw.slice(comma + 1);

  let mediaType = 'text/plain';
  let charset = 'utf-8';
  let base64 = false;
  header.split(';').forEach((segment, index) => {
    const part = segment.trim();
    const lower = part.toLowerCase();
    if (index === 0 && lower.includes('/')) {
      mediaType = lower;
    } else if (lower === 'base64') {
      base64 = true;
    } else if (lower === 'utf8' || lower === 'utf-8') {
      charset = 'utf-8';
    } else if (lower.startsWith('charset=')) {
      charset = lower.slice('charset='.length).replace(/^"|"$/g, '') || 'utf-8';
    }
  });

  if (base64) {
    const compact = (payload.includes('%') ? percentDecodeLenient(payload) : payload).replace(/\s+/g, '');
    if (!BASE64_BODY.test(compact)) return null;
    return { mediaType, text: decodeText(Buffer.from(compact, 'base64'), charset) };
  }
  return { mediaType, text: decodePercentText(payload, charset) };
}

// Percent-decoding is attempted strictly first; contracts that embed raw JSON
// containing a literal "%" (e.g. "100% on-chain") fall back to the raw text.
function decodePercentText(payload: string, charset: string): string {
  if (!payload.includes('%')) return payload;
  const bytes = percentDecodeStrict(payload);
  if (bytes === null) return payload;
  if (isUtf8(charset)) {
    try {
      return stripBom(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
    } catch {
      return payload;
    }
  }
  return decodeText(bytes, charset);
}

function percentDecodeStrict(text: string): Uint8Array | null {
  const parts: Buffer[] = [];
  for (const [token] of text.matchAll(/(?:%[0-9a-fA-F]{2})+|%|[^%]+/g)) {
    if (token === '%') return null;
    parts.push(token.startsWith('%') ? Buffer.from(token.replaceAll('%', ''), 'hex') : Buffer.from(token, 'utf8'));
  }
  return Buffer.concat(parts);
}

function percentDecodeLenient(text: string): string {
  return text.replace(/%([0-9a-fA-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}

function isUtf8(charset: string): boolean {
  return charset === 'utf-8' || charset === 'utf8';
}

export function decodeText(bytes: Uint8Array, charset: string): string {
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(charset);
  } catch {
    decoder = new TextDecoder('utf-8');
  }
  return stripBom(decoder.decode(bytes));
}

function stripBom(text: string): string {
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}
