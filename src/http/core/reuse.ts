// The cached-answer contract, said once: which answers may be given again, to whom, under which key
// and with which headers. Three places give them and all follow it — the REST reads route and the
// webrpc router through the access pipeline (access-pipeline.ts: after every check of this request,
// a hit in the response cache answers), and the server before routing (early-answers.ts), which
// answers only what it can decide in memory and hands everything else to fastify unchanged.
//
// An answer may be given again only when all of these hold:
// - it is an idempotent read whose answer depends on nothing but the request: a settled REST token
//   read (READS_ROUTE), or a webrpc method marked `reusable` (`mayReuse`: never an admin method, never
//   in a service with `prepare`, since what prepare puts in the context is not part of the key);
// - it is asked for by the same caller (the pipeline adds the caller's principal to the key) with the
//   same request: `restReuseKey(url)` for REST, `rpcReusePrefix(service, method)` then the body as
//   sent for webrpc;
// - every access check passed for this request first (key, origin, allowed networks), and it spends
//   from the key's bucket like any other request;
// - it is sent with the same status, headers and request line whichever place gives it
//   (`reusedHeaders` for REST, `EarlyRpcMethod.headers` and JSON_UTF8 for webrpc);
// - it is before its `until` and still `isCurrent()` (access/response-cache.ts ReusableAnswer).
import type { preParsingHookHandler } from 'fastify';
import type { AuthMode } from './access-pipeline.ts';
import { JSON_UTF8 } from './media-type.ts';

/** The route that reads tokens: its answers are the ones given again from the response cache. */
export const READS_ROUTE = '/tokens/:network/:contract/*';

/** A token read in response-cache keys: the URL (path and query) is all a GET says; the pipeline adds the caller. */
export function restReuseKey(url: string): string {
  return `GET ${url}`;
}

/** A webrpc call in response-cache keys: this, then the body as sent (the pipeline adds the caller). */
export function rpcReusePrefix(service: string, method: string): string {
  return `${service}/${method}\n`;
}

/** Whether a webrpc method's answers may be given again (see the contract above). */
export function mayReuse(service: { prepare?: unknown }, def: { reusable?: boolean }, mode: AuthMode): boolean {
  return !service.prepare && def.reusable === true && mode !== 'admin';
}

/** Settled token answers may be kept by browsers and CDNs too. */
export const SETTLED_CACHE_CONTROL = 'public, max-age=300, stale-while-revalidate=3600';

/** Whether an If-None-Match header names this validator (or `*`). */
export function matchesEtag(inm: string | undefined, etag: string): boolean {
  if (!inm) return false;
  return inm.split(',').some((t) => t.trim() === etag || t.trim() === '*');
}

/**
 * Status and headers of a reusable (settled) token answer with this validator, given fresh or again,
 * by the route or before routing: one definition, so both send the same.
 */
export function reusedHeaders(etag: string, ifNoneMatch: string | undefined): { status: 200 | 304; headers: Record<string, string> } {
  if (matchesEtag(ifNoneMatch, etag)) return { status: 304, headers: { 'cache-control': SETTLED_CACHE_CONTROL, etag } };
  return { status: 200, headers: { 'cache-control': SETTLED_CACHE_CONTROL, etag, 'content-type': JSON_UTF8 } };
}

/** A webrpc method whose answers may be given again, as its router describes it to the early answers. */
export interface EarlyRpcMethod {
  mode: AuthMode;
  /** `rpcReusePrefix(service, method)`: a call's key is this followed by the body as sent. */
  reusePrefix: string;
  /** The headers the router adds to every answer of the service (Webrpc). */
  headers: Readonly<Record<string, string>>;
  /** Its route, for the request count. */
  route: string;
  /** Counts an answer as the router's onResponse would (per method and code, duration). */
  answered(seconds: number): void;
}

/**
 * Where calls of reusable methods are answered from the cache before routing (early-answers.ts
 * EarlyAnswers): the router registers its reusable methods there and hands bodies read early back.
 */
export interface EarlyRegistry {
  addRpc(prefix: string, methods: Map<string, EarlyRpcMethod>): void;
  readonly replayBody: preParsingHookHandler;
}
