// One HTTP GET hop with hard limits. Redirects are returned, not followed, so
// the caller can vet every hop. The promise never rejects.

import http from 'node:http';
import https from 'node:https';
import zlib from 'node:zlib';
import { BlockedAddressError, stripBrackets } from '../../untrusted/address-guard.ts';
import { httpReason, type FetchFailureReason } from '../errors.ts';
import { isBlockedAddress, isIpLiteral } from '../../untrusted/ip.ts';
import { parseRetryAfter } from './retry-after.ts';

export type HopAgents = { http: http.Agent; https: https.Agent };

export type HopRequest = {
  url: URL;
  signal: AbortSignal;
  agents: HopAgents;
  // Literal-IP hosts never reach DNS lookup, so they are vetted here instead.
  checkLiteralAddress: boolean;
  connectTimeoutMs: number;
  /** A body that sends nothing for this long after it started is given up (a stall mid-transfer); 0: only the overall deadline. */
  stallTimeoutMs?: number;
  maxBytes: number;
  headers: Record<string, string>;
};

export type HopOutcome =
  | { type: 'body'; status: number; contentType: string | undefined; body: Buffer; bytes: number }
  | { type: 'redirect'; status: number; location: string; bytes: number }
  | { type: 'error'; reason: FetchFailureReason; message: string; status?: number; retryAfterMs?: number; bytes: number };

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

type Decoder = zlib.Gunzip | zlib.Inflate | zlib.InflateRaw | zlib.BrotliDecompress;

export function abortReason(signal: AbortSignal): FetchFailureReason {
  // AbortSignal.timeout() aborts with a DOMException named TimeoutError.
  const reason = signal.reason as { name?: unknown } | undefined;
  return reason?.name === 'TimeoutError' ? 'TIMEOUT' : 'ABORTED';
}

function classifyError(err: unknown): { reason: FetchFailureReason; message: string } {
  if (err instanceof BlockedAddressError) return { reason: 'BLOCKED_ADDRESS', message: err.message };
  const e = err as NodeJS.ErrnoException;
  const message = e?.code ? `${e.code}: ${e.message}` : String(e?.message ?? err);
  if (e?.code === 'ETIMEDOUT') return { reason: 'TIMEOUT', message };
  return { reason: 'UNREACHABLE', message };
}

// Servers label raw DEFLATE as "deflate" about as often as zlib-wrapped data.
function looksZlibWrapped(first: Buffer): boolean {
  return first.length >= 2 && (first[0] & 0x0f) === 8 && ((first[0] << 8) | first[1]) % 31 === 0;
}

function createDecoder(encoding: string, first: Buffer): Decoder {
  // Sync flush tolerates servers that truncate the final block.
  const options = { finishFlush: zlib.constants.Z_SYNC_FLUSH };
  switch (encoding) {
    case 'gzip':
    case 'x-gzip':
      return zlib.createGunzip(options);
    case 'deflate':
      return looksZlibWrapped(first) ? zlib.createInflate(options) : zlib.createInflateRaw(options);
    default:
      return zlib.createBrotliDecompress({ finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH });
  }
}

const SUPPORTED_ENCODINGS = new Set(['gzip', 'x-gzip', 'deflate', 'br']);

export function getOnce(req: HopRequest): Promise<HopOutcome> {
  return new Promise<HopOutcome>((resolve) => {
    const { url, signal, maxBytes } = req;
    const host = stripBrackets(url.hostname);
    if (req.checkLiteralAddress && isIpLiteral(host) && isBlockedAddress(host)) {
      resolve({ type: 'error', reason: 'BLOCKED_ADDRESS', message: `blocked address ${host}`, bytes: 0 });
      return;
    }
    if (signal.aborted) {
      resolve({ type: 'error', reason: abortReason(signal), message: 'aborted before start', bytes: 0 });
      return;
    }

    let settled = false;
    let bytes = 0;
    let decoded = 0;
    let connectTimer: NodeJS.Timeout | undefined;
    let stallTimer: NodeJS.Timeout | undefined;
    let decoder: Decoder | undefined;
    const chunks: Buffer[] = [];

    let request: http.ClientRequest | undefined;

    // A complete body leaves the socket to the keep-alive pool; anything else
    // tears it down, which is what stops an oversized or unwanted body.
    const settle = (outcome: HopOutcome, complete = false): void => {
      if (settled) return;
      settled = true;
      clearTimeout(connectTimer);
      clearTimeout(stallTimer);
      signal.removeEventListener('abort', onAbort);
      resolve(outcome);
      if (!complete) {
        request?.destroy();
        decoder?.destroy();
      }
    };
    const fail = (reason: FetchFailureReason, message: string, status?: number): void => {
      settle({ type: 'error', reason, message, status, bytes });
    };
    const onAbort = (): void => fail(abortReason(signal), 'aborted');
    signal.addEventListener('abort', onAbort, { once: true });

    const transport = url.protocol === 'https:' ? https : http;
    try {
      request = transport.request({
        protocol: url.protocol,
        hostname: host,
        port: url.port || undefined,
        path: `${url.pathname}${url.search}`,
        method: 'GET',
        headers: req.headers,
        agent: url.protocol === 'https:' ? req.agents.https : req.agents.http,
      });
    } catch (err) {
      fail('INVALID_URI', `cannot build request: ${(err as Error).message}`);
      return;
    }

    request.on('error', (err) => {
      const { reason, message } = classifyError(err);
      fail(reason, message);
    });
    request.on('socket', (socket) => {
      if (!socket.connecting) return;
      connectTimer = setTimeout(() => fail('TIMEOUT', `connect timeout after ${req.connectTimeoutMs} ms`), req.connectTimeoutMs);
      socket.once('connect', () => clearTimeout(connectTimer));
    });

    const collect = (chunk: Buffer): void => {
      if (settled) return;
      decoded += chunk.length;
      if (decoded > maxBytes) {
        fail('TOO_LARGE', `body exceeds ${maxBytes} bytes`);
        return;
      }
      chunks.push(chunk);
    };

    request.on('response', (res) => {
      const status = res.statusCode ?? 0;
      res.on('error', (err) => fail('UNREACHABLE', `response error: ${err.message}`, status));
      res.on('close', () => {
        if (!res.complete) fail('UNREACHABLE', 'connection closed before the body was complete', status);
      });

      if (REDIRECT_STATUSES.has(status)) {
        const location = res.headers.location;
        if (location) settle({ type: 'redirect', status, location, bytes });
        else fail(httpReason(status), `${status} without Location`, status);
        return;
      }
      if (status < 200 || status >= 300) {
        const retryAfterMs = parseRetryAfter(res.headers['retry-after']);
        settle({ type: 'error', reason: httpReason(status), message: `HTTP ${status}`, status, retryAfterMs, bytes });
        return;
      }

      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > maxBytes) {
        return fail('TOO_LARGE', `declared length ${declared} exceeds ${maxBytes} bytes`, status);
      }
      const encodings = (res.headers['content-encoding'] ?? '')
        .split(',')
        .map((e) => e.trim().toLowerCase())
        .filter((e) => e !== '' && e !== 'identity');
      if (encodings.length > 1 || (encodings.length === 1 && !SUPPORTED_ENCODINGS.has(encodings[0]))) {
        return fail('BAD_ENCODING', `unsupported content-encoding ${encodings.join(', ')}`, status);
      }
      const encoding = encodings[0];

      // A body that stops arriving holds its slot until the overall deadline otherwise: an origin that
      // sends a few bytes and then nothing would keep every slot it is given.
      const stallMs = req.stallTimeoutMs ?? 0;
      const armStall = (): void => {
        if (stallMs <= 0) return;
        clearTimeout(stallTimer);
        stallTimer = setTimeout(() => fail('TIMEOUT', `body stalled: no bytes for ${stallMs} ms`, status), stallMs);
      };
      armStall();

      const finish = (): void => {
        const body = Buffer.concat(chunks);
        settle({ type: 'body', status, contentType: res.headers['content-type'], body, bytes }, true);
      };
      res.on('data', (chunk: Buffer) => {
        if (settled) return;
        armStall();
        bytes += chunk.length;
        if (bytes > maxBytes) return fail('TOO_LARGE', `body exceeds ${maxBytes} bytes`, status);
        if (encoding === undefined) return collect(chunk);
        if (!decoder) {
          decoder = createDecoder(encoding, chunk);
          decoder.on('data', collect);
          decoder.on('error', (err) => fail('BAD_ENCODING', `cannot decode ${encoding}: ${err.message}`, status));
          decoder.on('end', finish);
        }
        decoder.write(chunk);
      });
      res.on('end', () => {
        if (settled) return;
        if (decoder) decoder.end();
        else finish();
      });
    });

    request.end();
  });
}
