/** What fastify sends for a JSON string, set directly: bytes skip the content-type parse and re-encoding. */
export const JSON_UTF8 = 'application/json; charset=utf-8';

/** A Content-Type header's media type, lower case, without parameters. */
export function mediaTypeOf(contentType: string | undefined): string {
  return String(contentType ?? '')
    .split(';')[0]
    .trim()
    .toLowerCase();
}
