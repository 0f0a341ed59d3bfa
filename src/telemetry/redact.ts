/**
 * Masks credentials in text bound for a log line or a client-visible error message. Two nets: the
 * shapes metarelay issues (access keys `mr_…`, admin tokens `mra_…`) wherever they appear, and any
 * value in a credential position (`accessKey=` in a URL, an `"accessKey"` JSON member, an
 * `X-Access-Key:` or `Authorization: Bearer` header), whatever its shape — a mistyped key is still a
 * secret, usually one character away from the real one.
 */
const MASK = '[redacted]';

const RULES: [RegExp, string][] = [
  // Issued keys and tokens: prefix kept, so a log still says which kind of credential was sent.
  [/\b(mra?_)[A-Za-z0-9_-]{6,}/g, `$1${MASK}`],
  // URL query parameters, raw or percent-encoded (access_key too: a common client spelling).
  [/([?&;]access[-_]?key(?:=|%3D))[^&#\s"'\\]*/gi, `$1${MASK}`],
  // JSON members, also inside a JSON string (a body echoed in an error: \"accessKey\":\"…\").
  [/((?:\\?")(?:access[-_]?key|x-access-key|authorization)\\?"\s*:\s*\\?")(?:[^"\\]|\\[^"])*/gi, `$1${MASK}`],
  // Header lines and bearer credentials.
  [/(x-access-key\s*[:=]\s*)[^\s,;"'\\]+/gi, `$1${MASK}`],
  [/(bearer\s+)[^\s,;"'\\]+/gi, `$1${MASK}`],
];

// Every rule's match holds one of these (case aside): one scan tells that a text has nothing to mask,
// which is what nearly every log line (one per request in serve) is, instead of five.
const MAY_HOLD = /mra?_|access|bearer|authorization/i;

export function redactSecrets(text: string): string {
  if (!MAY_HOLD.test(text)) return text;
  let out = text;
  for (const [re, to] of RULES) out = out.replace(re, to);
  return out;
}
