import http from 'node:http';
import https from 'node:https';
import { promisify } from 'node:util';
import zlib from 'node:zlib';

/**
 * The fetch the chain clients send their JSON-RPC through: node:http(s) with keep-alive agents, answering
 * a standard `Response` built from the whole body.
 *
 * Why not the global fetch: every relayed meta-transaction makes node calls, and Node 20's fetch (undici
 * behind WHATWG streams) cost 0.8–1.1 ms of CPU per call on this project's 2-core VMs against 0.3 ms
 * for node:http plus a Response (measured side by side against anvil, eight calls in flight). A JSON-RPC
 * answer is read whole anyway (viem parses it), so nothing streams here.
 *
 * It behaves as fetch does where the chain code looks: an aborted signal rejects with the signal's
 * reason (viem's timeout), a failed exchange rejects with TypeError('fetch failed') whose cause is the
 * socket's error (ECONNREFUSED, ECONNRESET: what health.ts names), an HTTP error status is an answer.
 * Bodies the node compressed (gzip, deflate, br) are inflated, capped at MAX_BODY_BYTES; redirects are
 * not followed (a JSON-RPC endpoint does not redirect a POST; the 3xx comes back as an answer).
 */

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/**
 * The largest answer taken, as sent and once inflated: a compressed answer cannot grow past it (a
 * decompression bomb from a node is refused, not held). Above viem's own cap on a JSON-RPC body (10 MiB),
 * so that cap, and its error, still decide what an answer may be.
 */
const MAX_BODY_BYTES = 32 * 1024 * 1024;

/**
 * How long a connection may sit idle before this side closes it. Providers and the proxies before them
 * close idle connections (60–75 s is common, some far sooner); a request written onto one just as its
 * close arrives fails (ECONNRESET, "socket hang up"), which reads as a node fault and costs a retry. So
 * an idle connection is closed here first: after 4 s, as the global fetch (undici) does, or a second
 * before the server's own `Keep-Alive: timeout=N`, which Node's agent honours only when it has a timeout.
 */
const IDLE_CONNECTION_MS = 4_000;

const agents = {
  'http:': new http.Agent({ keepAlive: true, timeout: IDLE_CONNECTION_MS }),
  'https:': new https.Agent({ keepAlive: true, timeout: IDLE_CONNECTION_MS }),
};

/** The request's headers, lower-cased, whatever form init gave them in (Headers parses each form). */
function headerRecord(headers: RequestInit['headers']): Record<string, string> {
  const out: Record<string, string> = {};
  new Headers(headers).forEach((v, k) => (out[k] = v));
  return out;
}

const gunzip = promisify(zlib.gunzip);
const inflateZlib = promisify(zlib.inflate);
const brotli = promisify(zlib.brotliDecompress);

/** The body as sent, inflated off the event loop (a log read's answer runs to megabytes). */
async function inflate(encoding: string | undefined, body: Buffer): Promise<Buffer> {
  const opts = { maxOutputLength: MAX_BODY_BYTES };
  switch (encoding?.trim().toLowerCase()) {
    case undefined:
    case '':
    case 'identity':
      return body;
    case 'gzip':
    case 'x-gzip':
      return gunzip(body, opts);
    case 'deflate':
      return inflateZlib(body, opts);
    case 'br':
      return brotli(body, opts);
    default:
      throw new Error(`the node answered in an encoding this client does not read: ${encoding}`);
  }
}

/** Statuses a Response may not carry a body with. */
const NULL_BODY = new Set([101, 204, 205, 304]);

export const nodeFetch: Fetch = (input, init = {}) => {
  // A Request object (no caller here passes one) goes to the global fetch, which knows all of its fields.
  if (input instanceof Request) return fetch(input, init);
  const url = typeof input === 'string' ? new URL(input) : input;
  const agent = agents[url.protocol as keyof typeof agents];
  if (!agent) return fetch(input, init);
  const signal = init.signal ?? undefined;
  if (signal?.aborted) return Promise.reject(signal.reason);
  const body = init.body;
  if (body != null && typeof body !== 'string') return fetch(input, init);
  return new Promise<Response>((resolve, reject) => {
    const headers = headerRecord(init.headers);
    headers['accept-encoding'] ??= 'gzip, deflate, br';
    if (body != null) headers['content-length'] = String(Buffer.byteLength(body));
    let settled = false;
    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', onAbort);
      reject(err);
    };
    const req = (url.protocol === 'https:' ? https : http).request(url, { method: init.method ?? 'GET', headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_BODY_BYTES) {
          res.destroy();
          fail(new TypeError('fetch failed', { cause: new Error(`the node's answer is over ${MAX_BODY_BYTES} bytes`) }));
        } else chunks.push(c);
      });
      res.on('error', (err) => fail(new TypeError('fetch failed', { cause: err })));
      res.on('end', async () => {
        if (settled) return;
        try {
          const status = res.statusCode ?? 0;
          const answer = new Headers();
          const raw = res.rawHeaders;
          for (let i = 0; i + 1 < raw.length; i += 2) answer.append(raw[i], raw[i + 1]);
          const encoding = res.headers['content-encoding'];
          const whole = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
          const bytes = NULL_BODY.has(status) ? null : encoding ? await inflate(encoding, whole) : whole;
          if (encoding) {
            // The body handed on is the inflated one, as fetch hands it on.
            answer.delete('content-encoding');
            answer.delete('content-length');
          }
          if (settled) return;
          settled = true;
          signal?.removeEventListener('abort', onAbort);
          resolve(new Response(bytes as Uint8Array<ArrayBuffer> | null, { status, statusText: res.statusMessage ?? '', headers: answer }));
        } catch (err) {
          fail(new TypeError('fetch failed', { cause: err }));
        }
      });
    });
    function onAbort() {
      req.destroy();
      fail(signal?.reason);
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    req.on('error', (err) => fail(new TypeError('fetch failed', { cause: err })));
    req.end(body ?? undefined);
  });
};
