// Fetches a token metadata document from whatever a tokenURI points at, under
// SSRF, size and time limits. Every outcome is a value with a trace; nothing
// is thrown to the caller.

import http from 'node:http';
import https from 'node:https';
import { createHostAllowlist, guardedLookup } from '../../untrusted/address-guard.ts';
import { bodyText, parseDocument, type TokenDocument } from '../tokens/document.ts';
import { failure, type Attempt, type FetchFailure, type FetchFailureReason } from '../errors.ts';
import { createGatewayHealth, type GatewayHealth, type GatewayOutcome } from './gateway-health.ts';
import { hedge } from './hedge.ts';
import { abortReason, getOnce, type HopAgents } from './http-get.ts';
import { ipfsGatewayUrls, type IpfsNamespace } from './ipfs-path.ts';
import { expandIdCandidates, type IdCandidate } from '../tokens/id-template.ts';
import { DEFAULT_ARWEAVE_GATEWAY, fetchShareOf, parseTokenUri } from './uri.ts';

export { isRetryable, type Attempt, type FetchFailure, type FetchFailureReason } from '../errors.ts';
export type { GatewayHealth } from './gateway-health.ts';
export type { TokenDocument } from '../tokens/document.ts';

export type FetcherOptions = {
  allowPrivateNetworks: boolean;
  /** Exceptions to the SSRF rule, e.g. a local IPFS node: "127.0.0.1:8080", "[::1]:8080", "gw.internal". */
  allowedPrivateHosts?: readonly string[];
  maxBytes?: number;
  connectTimeoutMs?: number;
  totalTimeoutMs?: number;
  /** A body that sends nothing for this long mid-transfer is given up (TIMEOUT); 0: only the overall deadline. */
  stallTimeoutMs?: number;
  maxRedirects?: number;
  ipfsGateways: readonly string[];
  arweaveGateway?: string;
  hedgeDelayMs?: number;
  userAgent?: string;
};

export type FetchSuccess = {
  ok: true;
  document: TokenDocument;
  finalUrl: string;
  contentType: string;
  trace: Attempt[];
  /** With `tokenId` and an `{id}` template: the spelling that answered (index into ID_VARIANTS). */
  idVariant?: number;
};

export type FetchResult = FetchSuccess | FetchFailure;

/** Raw bytes of a media file: the type is for the caller to establish from the bytes. */
export type BytesSuccess = { ok: true; bytes: Buffer; finalUrl: string; contentType: string; trace: Attempt[] };
export type BytesResult = BytesSuccess | FetchFailure;

export type FetchBytesOptions = {
  /** The byte cap of this fetch (media has its own, larger than a document's). */
  maxBytes: number;
  /** Overall deadline of this fetch. */
  totalTimeoutMs?: number;
  /** The stall deadline of this fetch's body (else the fetcher's). */
  stallTimeoutMs?: number;
  signal?: AbortSignal;
};

/** What one kind of fetch does with a 200 body: its own cap, headers and verdict. */
type BodyMode<S> = {
  maxBytes: number;
  stallTimeoutMs: number;
  headers: Record<string, string>;
  finish(body: Buffer, contentType: string | undefined, url: URL, trace: Attempt[]): S | FetchFailure;
};

export type FetchJsonOptions = {
  signal?: AbortSignal;
  /** Enables ERC-1155 `{id}` expansion, falling back through id spellings on 404. */
  tokenId?: bigint;
  /** The `{id}` spelling (index into ID_VARIANTS) this contract is known to use: tried first. */
  preferredIdVariant?: number | null;
};

export type Fetcher = {
  fetchJson(uri: string, opts?: FetchJsonOptions): Promise<FetchResult>;
  /** Any file (media): same SSRF guard, redirect checks and deadlines, the caller's byte cap. */
  fetchBytes(uri: string, opts: FetchBytesOptions): Promise<BytesResult>;
  /** Where fetching this URI sends requests, for per-host shares: a host, the gateways' share, or '' (inline). */
  shareOf(uri: string): string;
  /** Gateways best-first, as the next IPFS fetch will try them. */
  gatewayHealth(): GatewayHealth[];
  /** Drops pooled keep-alive connections. */
  close(): void;
};

export const FETCH_DEFAULTS = {
  maxBytes: 2 * 1024 * 1024,
  connectTimeoutMs: 5_000,
  totalTimeoutMs: 20_000,
  stallTimeoutMs: 5_000,
  maxRedirects: 5,
  hedgeDelayMs: 1_000,
  userAgent: 'metarelay/0.1 (token metadata fetcher)',
} as const;

// Content verdicts come from a 200 response, so they describe the document
// itself and every gateway would agree on them.
const CONTENT_VERDICTS = new Set<FetchFailureReason>(['INVALID_JSON', 'NOT_AN_OBJECT', 'TOO_DEEP', 'TOO_LARGE', 'BAD_ENCODING']);

const PREVIEW_CHARS = 96;

function preview(uri: string): string {
  const text = uri.trim();
  return text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS)}…` : text;
}

export function createFetcher(options: FetcherOptions): Fetcher {
  const cfg = {
    maxBytes: options.maxBytes ?? FETCH_DEFAULTS.maxBytes,
    connectTimeoutMs: options.connectTimeoutMs ?? FETCH_DEFAULTS.connectTimeoutMs,
    totalTimeoutMs: options.totalTimeoutMs ?? FETCH_DEFAULTS.totalTimeoutMs,
    stallTimeoutMs: options.stallTimeoutMs ?? FETCH_DEFAULTS.stallTimeoutMs,
    maxRedirects: options.maxRedirects ?? FETCH_DEFAULTS.maxRedirects,
    hedgeDelayMs: options.hedgeDelayMs ?? FETCH_DEFAULTS.hedgeDelayMs,
    userAgent: options.userAgent ?? FETCH_DEFAULTS.userAgent,
  };
  const uriOptions = {
    ipfsGateways: [...new Set(options.ipfsGateways)],
    arweaveGateway: options.arweaveGateway ?? DEFAULT_ARWEAVE_GATEWAY,
  };
  const health = createGatewayHealth(uriOptions.ipfsGateways);
  const isAllowlisted = createHostAllowlist(options.allowedPrivateHosts ?? []);
  const headers = {
    'user-agent': cfg.userAgent,
    accept: 'application/json, text/plain;q=0.9, */*;q=0.8',
    'accept-encoding': 'gzip, deflate, br',
  };
  // Separate pools keep a socket opened without the guard from ever being
  // reused for a request that needs it.
  // Bounded per-host concurrency keeps a burst of tokens from hammering one gateway.
  const pool = { keepAlive: true, maxSockets: 64 };
  const guardedAgents: HopAgents = {
    http: new http.Agent({ ...pool, lookup: guardedLookup }),
    https: new https.Agent({ ...pool, lookup: guardedLookup }),
  };
  const openAgents: HopAgents = {
    http: new http.Agent(pool),
    https: new https.Agent(pool),
  };

  const jsonMode: BodyMode<FetchSuccess> = {
    maxBytes: cfg.maxBytes,
    stallTimeoutMs: cfg.stallTimeoutMs,
    headers,
    finish(body, contentType, url, trace) {
      const attempt = trace[trace.length - 1];
      const parsed = parseDocument(bodyText(body, contentType), contentType);
      if (!parsed.ok) {
        attempt.error = parsed.reason;
        return failure(parsed.reason, `${url.href}: ${parsed.message}`, trace);
      }
      return { ok: true, document: parsed.document, finalUrl: url.href, contentType: contentType ?? '', trace };
    },
  };

  function bytesMode(maxBytes: number, stallTimeoutMs: number): BodyMode<BytesSuccess> {
    return {
      maxBytes,
      stallTimeoutMs,
      headers: { ...headers, accept: 'image/*, video/*, audio/*;q=0.9, */*;q=0.8' },
      finish: (body, contentType, url, trace) => ({ ok: true, bytes: body, finalUrl: url.href, contentType: contentType ?? '', trace }),
    };
  }

  async function followRedirects<S>(start: string, signal: AbortSignal, trace: Attempt[], mode: BodyMode<S>): Promise<S | FetchFailure> {
    let current = start;
    for (let redirects = 0; ; ) {
      let url: URL;
      try {
        url = new URL(current);
      } catch {
        return failure('INVALID_URI', `unparseable URL ${preview(current)}`, trace);
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') {
        trace.push({ url: preview(current), bytes: 0, ms: 0, error: 'UNSUPPORTED_SCHEME' });
        return failure('UNSUPPORTED_SCHEME', `refusing to fetch ${url.protocol} URL`, trace);
      }
      const trusted = options.allowPrivateNetworks || isAllowlisted(url);
      const started = performance.now();
      const outcome = await getOnce({
        url,
        signal,
        agents: trusted ? openAgents : guardedAgents,
        checkLiteralAddress: !trusted,
        connectTimeoutMs: cfg.connectTimeoutMs,
        stallTimeoutMs: mode.stallTimeoutMs,
        maxBytes: mode.maxBytes,
        headers: mode.headers,
      });
      const attempt: Attempt = { url: url.href, bytes: outcome.bytes, ms: Math.round(performance.now() - started) };
      if (outcome.status !== undefined) attempt.status = outcome.status;
      trace.push(attempt);

      if (outcome.type === 'error') {
        attempt.error = outcome.reason;
        return failure(outcome.reason, `${url.href}: ${outcome.message}`, trace, outcome.retryAfterMs);
      }
      if (outcome.type === 'redirect') {
        let next: URL;
        try {
          next = new URL(outcome.location, url);
        } catch {
          attempt.error = 'INVALID_URI';
          return failure('INVALID_URI', `unparseable redirect target from ${url.href}`, trace);
        }
        attempt.redirectedTo = next.href;
        redirects++;
        if (redirects > cfg.maxRedirects) {
          attempt.error = 'TOO_MANY_REDIRECTS';
          return failure('TOO_MANY_REDIRECTS', `more than ${cfg.maxRedirects} redirects starting at ${start}`, trace);
        }
        current = next.href;
        continue;
      }
      return mode.finish(outcome.body, outcome.contentType, url, trace);
    }
  }

  function gatewayOutcome(result: { ok: true } | FetchFailure, taskSignal: AbortSignal, parent: AbortSignal): GatewayOutcome {
    if (result.ok) return 'success';
    if (taskSignal.aborted) return parent.aborted && abortReason(parent) === 'ABORTED' ? 'neutral' : 'slow';
    return result.retryable ? 'failure' : 'neutral';
  }

  async function fetchFromGateways<S extends { ok: true }>(namespace: IpfsNamespace, path: string, signal: AbortSignal, trace: Attempt[], mode: BodyMode<S>): Promise<S | FetchFailure> {
    const order = health.order();
    if (order.length === 0) return failure('UNSUPPORTED_SCHEME', `no IPFS gateways configured for ${namespace}://`, trace);
    const tasks = order.map((gateway) => async (taskSignal: AbortSignal): Promise<S | FetchFailure> => {
      const [url] = ipfsGatewayUrls(path, [gateway], namespace);
      const started = performance.now();
      let result: S | FetchFailure;
      try {
        result = await followRedirects(url, taskSignal, trace, mode);
      } catch (err) {
        // hedge() requires tasks that settle with a value.
        result = failure('UNREACHABLE', `${url}: ${(err as Error)?.message ?? String(err)}`, trace);
      }
      health.record(gateway, gatewayOutcome(result, taskSignal, signal), performance.now() - started);
      return result;
    });
    const { winner, results } = await hedge(tasks, (r) => r.ok, cfg.hedgeDelayMs, signal);
    if (winner) return winner;
    return combineGatewayFailures(
      results.filter((r): r is FetchFailure => !r.ok),
      signal,
      trace,
    );
  }

  function combineGatewayFailures(failures: FetchFailure[], signal: AbortSignal, trace: Attempt[]): FetchFailure {
    const chosen = failures.find((f) => CONTENT_VERDICTS.has(f.reason)) ?? failures.find((f) => f.retryable) ?? failures[0];
    if (!chosen) return failure(signal.aborted ? abortReason(signal) : 'UNREACHABLE', 'no gateway attempt completed', trace);
    const summary = failures.map((f) => f.reason).join(', ');
    return failure(chosen.reason, `all gateways failed (${summary}); ${chosen.message}`, trace, chosen.retryAfterMs);
  }

  function decodeInline(uri: string, body: string, mediaType: string, trace: Attempt[]): FetchResult {
    const started = performance.now();
    const bytes = Buffer.byteLength(body);
    const attempt: Attempt = { url: preview(uri), bytes, ms: 0 };
    trace.push(attempt);
    if (bytes > cfg.maxBytes) {
      attempt.error = 'TOO_LARGE';
      return failure('TOO_LARGE', `inline document exceeds ${cfg.maxBytes} bytes`, trace);
    }
    const parsed = parseDocument(body, mediaType);
    attempt.ms = Math.round(performance.now() - started);
    if (!parsed.ok) {
      attempt.error = parsed.reason;
      return failure(parsed.reason, parsed.message, trace);
    }
    return { ok: true, document: parsed.document, finalUrl: preview(uri), contentType: mediaType, trace };
  }

  async function fetchOne(uri: string, signal: AbortSignal, trace: Attempt[]): Promise<FetchResult> {
    const parsed = parseTokenUri(uri, uriOptions);
    switch (parsed.kind) {
      case 'invalid':
        trace.push({ url: preview(uri), bytes: 0, ms: 0, error: parsed.reason });
        return failure(parsed.reason, parsed.message, trace);
      case 'json':
        return decodeInline(uri, parsed.body, 'application/json', trace);
      case 'data':
        return decodeInline(uri, parsed.body, parsed.mediaType, trace);
      case 'http':
      case 'arweave':
        return followRedirects(parsed.url, signal, trace, jsonMode);
      case 'ipfs':
      case 'ipns':
        return fetchFromGateways(parsed.kind, parsed.path, signal, trace, jsonMode);
    }
  }

  async function fetchBytes(uri: string, opts: FetchBytesOptions): Promise<BytesResult> {
    const trace: Attempt[] = [];
    const deadline = AbortSignal.timeout(opts.totalTimeoutMs ?? cfg.totalTimeoutMs);
    const signal = opts.signal ? AbortSignal.any([opts.signal, deadline]) : deadline;
    const mode = bytesMode(opts.maxBytes, opts.stallTimeoutMs ?? cfg.stallTimeoutMs);
    try {
      const text = uri.trim();
      // data: URIs carry binary; parseTokenUri decodes them as text, which would corrupt it.
      if (/^data:/i.test(text)) {
        const m = /^data:([^,]*?)(;base64)?,(.*)$/is.exec(text);
        if (!m) return failure('INVALID_URI', 'malformed data: URI', trace);
        let bytes: Buffer;
        try {
          bytes = m[2] ? Buffer.from(m[3], 'base64') : Buffer.from(decodeURIComponent(m[3]), 'utf8');
        } catch {
          return failure('INVALID_URI', 'malformed percent-encoding in data: URI', trace);
        }
        trace.push({ url: preview(uri), bytes: bytes.length, ms: 0 });
        if (bytes.length > opts.maxBytes) return failure('TOO_LARGE', `inline media exceeds ${opts.maxBytes} bytes`, trace);
        return { ok: true, bytes, finalUrl: preview(uri), contentType: m[1] || 'text/plain', trace };
      }
      const parsed = parseTokenUri(text, uriOptions);
      switch (parsed.kind) {
        case 'http':
        case 'arweave':
          return await followRedirects(parsed.url, signal, trace, mode);
        case 'ipfs':
        case 'ipns':
          return await fetchFromGateways(parsed.kind, parsed.path, signal, trace, mode);
        case 'invalid':
          return failure(parsed.reason, parsed.message, trace);
        default:
          return failure('UNSUPPORTED_SCHEME', 'not a media URL', trace);
      }
    } catch (err) {
      const reason: FetchFailureReason = signal.aborted ? abortReason(signal) : 'UNREACHABLE';
      return failure(reason, `unexpected error: ${(err as Error)?.message ?? String(err)}`, trace);
    }
  }

  async function fetchJson(uri: string, opts: FetchJsonOptions = {}): Promise<FetchResult> {
    const trace: Attempt[] = [];
    let candidates: IdCandidate[];
    try {
      candidates = opts.tokenId === undefined ? [{ variant: 0, uri }] : expandIdCandidates(uri, opts.tokenId, opts.preferredIdVariant);
    } catch (err) {
      return failure('INVALID_URI', (err as Error).message, trace);
    }
    const deadline = AbortSignal.timeout(cfg.totalTimeoutMs);
    const signal = opts.signal ? AbortSignal.any([opts.signal, deadline]) : deadline;
    try {
      let result: FetchResult = failure('INVALID_URI', 'no candidate URIs', trace);
      for (const candidate of candidates) {
        result = await fetchOne(candidate.uri, signal, trace);
        if (result.ok) return opts.tokenId === undefined ? result : { ...result, idVariant: candidate.variant };
        // Only the spec's own failure mode moves us to the next id spelling.
        if (result.reason !== 'HTTP_404') return result;
      }
      return result;
    } catch (err) {
      // Defensive: the helpers are written not to throw, but the contract is absolute.
      const reason: FetchFailureReason = signal.aborted ? abortReason(signal) : 'UNREACHABLE';
      return failure(reason, `unexpected error: ${(err as Error)?.message ?? String(err)}`, trace);
    }
  }

  return {
    fetchJson,
    fetchBytes,
    shareOf: (uri) => fetchShareOf(uri, uriOptions),
    gatewayHealth: () => health.snapshot(),
    close() {
      for (const agent of [guardedAgents.http, guardedAgents.https, openAgents.http, openAgents.https]) agent.destroy();
    },
  };
}
