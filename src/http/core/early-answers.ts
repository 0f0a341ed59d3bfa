import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { FastifyServerFactory, preParsingHookHandler } from 'fastify';
import type { AccessPipeline, AuthMode, Keyed } from './access-pipeline.ts';
import { pickAccessKey } from './auth.ts';
import { corsHeaders } from './cors.ts';
import type { RequestRecorder } from './request-log.ts';
import { requestName } from './request-journal-entry.ts';
import { JSON_UTF8, mediaTypeOf } from './media-type.ts';
import { READS_ROUTE, restReuseKey, reusedHeaders, type EarlyRpcMethod } from './reuse.ts';
import { networksNamed } from '../../access/allowed-networks.ts';

const PREFIX = '/tokens/';

/** The reusable methods of one webrpc service mounted at a fixed prefix, by name. */
export type EarlyRpc = ReadonlyMap<string, EarlyRpcMethod>;

/** Notes an answered request of a project in its request log (request-journal-entry.ts journalNote, wired by the app). */
export type JournalNote = (keyed: Keyed, name: string, ip: string | undefined, status: number, ms: number) => void;

/** A request body read here and handed on: the router's preParsing hook (`replayBody`) gives it to its parser. */
const READ_BODY = Symbol('metarelay.earlyBody');
type WithBody = IncomingMessage & { [READ_BODY]?: Buffer };

/**
 * Cached token reads (REST, and calls of reusable webrpc methods) answered before the router sees
 * the request, under the cached-answer contract (reuse.ts).
 *
 * A cached read does almost nothing of its own: a few map look-ups and a write of bytes it already
 * has. Through fastify it also paid the router, the request and reply objects, the hook runner's
 * stages and reply serialisation, which made it cost twice a bare fastify route (docs/performance-log.md,
 * "27 Nov 2026: cached reads answered before routing").
 * Here the same access policy decides it (AccessPipeline.reuseNow: key → authenticate → allowed
 * networks → cached answer → rate limit), and only when everything is known in memory; every other
 * request, and every one of these it cannot decide at once, goes to fastify unchanged. Only an answer
 * the reads route stored for this exact URL and caller can be given, so what is answered here is
 * what the route would answer, with the same headers, count, request line and row in the project's
 * request log.
 */
export class EarlyAnswers {
  private open = true;
  /** Webrpc services with reusable methods, by their fixed route prefix (e.g. /rpc/Metadata/). */
  private readonly rpcs = new Map<string, EarlyRpc>();

  constructor(
    private readonly access: AccessPipeline,
    private readonly restMode: AuthMode,
    private readonly recorder: RequestRecorder,
    private readonly journal: JournalNote,
  ) {}

  /** From now on every request goes to the router (closing: fastify answers 503 / Connection: close). */
  close() {
    this.open = false;
  }

  addRpc(prefix: string, rpc: EarlyRpc) {
    this.rpcs.set(prefix, rpc);
  }

  /**
   * The router's preParsing hook for routes whose calls may be taken here: a body read here is what its
   * parser reads (the request's own stream has been consumed).
   */
  readonly replayBody: preParsingHookHandler = (req, _reply, payload, done) => {
    const body = (req.raw as WithBody)[READ_BODY];
    done(null, body ? Readable.from([body], { objectMode: false }) : payload);
  };

  /**
   * Takes the request if it may be a cached answer this caller may have now (true: it is answered,
   * or handed to `next` once its body is read); false: not touched, the caller routes it.
   */
  take(req: IncomingMessage, res: ServerResponse, next: (req: IncomingMessage, res: ServerResponse) => void): boolean {
    if (!this.open) return false;
    if (req.method === 'GET') return this.answerRest(req, res);
    if (req.method === 'POST') return this.takeRpc(req, res, next);
    return false;
  }

  /** Answers the request if it is a cached REST read this caller may have now; false: not touched. */
  private answerRest(req: IncomingMessage, res: ServerResponse): boolean {
    const url = req.url;
    if (url === undefined || !url.startsWith(PREFIX)) return false;
    const start = performance.now();
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    // /tokens/<network>/<contract>/<ids>, nothing encoded: the reads route's shape (the cache decides the rest).
    const n = path.indexOf('/', PREFIX.length);
    const c = n < 0 ? -1 : path.indexOf('/', n + 1);
    if (c < 0 || c === path.length - 1 || path.indexOf('/', c + 1) >= 0 || path.includes('%')) return false;
    const network = path.slice(PREFIX.length, n);
    const key = pickAccessKey(req.headers['x-access-key'], q < 0 ? undefined : queryKey(url.slice(q + 1)));
    const reused = this.access.reuseNow(this.restMode, key, req.headers.origin, () => [network], restReuseKey(url), url);
    if (!reused) return false;
    const { hit, keyed } = reused;
    const origin = req.headers.origin;
    const inm = req.headers['if-none-match'];
    const { status, headers } = reusedHeaders(hit.etag!, inm);
    const cors = corsHeaders(origin);
    res.statusCode = status;
    for (const h in cors) res.setHeader(h, cors[h]);
    for (const h in headers) res.setHeader(h, headers[h]);
    if (status === 304) res.end();
    else {
      res.setHeader('content-length', hit.body.length);
      res.end(hit.body);
    }
    const ms = performance.now() - start;
    this.recorder.record(READS_ROUTE, status, ms, lineOf, req);
    if (keyed) this.journal(keyed, requestName(req.method, url, READS_ROUTE), req.socket.remoteAddress, status, ms);
    return true;
  }

  /**
   * A call of a reusable webrpc method: the caller's key is checked from the headers first (a body is
   * read here only for a caller the cache could answer), then the body, at most what a cache key may
   * hold, is read; a cached answer is sent, anything else goes to the router with the body handed on.
   */
  private takeRpc(req: IncomingMessage, res: ServerResponse, next: (req: IncomingMessage, res: ServerResponse) => void): boolean {
    const url = req.url;
    if (url === undefined || url.includes('?')) return false;
    const slash = url.lastIndexOf('/') + 1;
    const m = this.rpcs.get(url.slice(0, slash))?.get(url.slice(slash));
    if (!m) return false;
    const length = Number(req.headers['content-length']);
    // Only a JSON body of known, cacheable size can be a stored call (webrpc.ts describe).
    if (!(length > 0) || length + m.reusePrefix.length >= this.access.maxReuseKeyLength || req.headers['transfer-encoding'] !== undefined) return false;
    if (mediaTypeOf(req.headers['content-type']) !== 'application/json') return false;
    const key = pickAccessKey(req.headers['x-access-key'], undefined);
    if (!this.access.mayReuse(m.mode, key)) return false;
    const start = performance.now();
    const chunks: Buffer[] = [];
    let got = 0;
    // A client gone before its body ended gets nothing, here as on the router's path (its 'end'
    // never comes); the abort is expected, not an error to report.
    req.on('error', () => undefined);
    req.on('data', (c: Buffer) => {
      chunks.push(c);
      got += c.length;
    });
    req.once('end', () => {
      const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, got);
      const reused = got === length ? this.access.reuseNow(m.mode, key, req.headers.origin, () => networksOf(body), `${m.reusePrefix}${body.toString('latin1')}`, url) : undefined;
      if (!reused) {
        (req as WithBody)[READ_BODY] = body;
        return next(req, res);
      }
      const { hit, keyed } = reused;
      res.statusCode = 200;
      const cors = corsHeaders(req.headers.origin);
      for (const h in cors) res.setHeader(h, cors[h]);
      for (const h in m.headers) res.setHeader(h, m.headers[h]);
      res.setHeader('content-type', JSON_UTF8);
      res.setHeader('content-length', hit.body.length);
      res.end(hit.body);
      const ms = performance.now() - start;
      m.answered(ms / 1000);
      this.recorder.record(m.route, 200, ms, lineOf, req);
      if (keyed) this.journal(keyed, requestName(req.method, url, m.route), req.socket.remoteAddress, 200, ms);
    });
    return true;
  }

  /** fastify's serverFactory: the http server fastify would make, with these answers in front of its handler. */
  serverFactory(): FastifyServerFactory {
    return (handler, opts) => {
      const o = opts as typeof opts & { keepAliveTimeout?: number; requestTimeout?: number; connectionTimeout?: number; maxRequestsPerSocket?: number; http?: object };
      const server: Server = createServer(o.http ?? {}, (req, res) => {
        if (!this.take(req, res, handler)) handler(req, res);
      });
      // What fastify sets on the server it makes itself (lib/server.js getServerInstance).
      if (o.keepAliveTimeout !== undefined) server.keepAliveTimeout = o.keepAliveTimeout;
      if (o.requestTimeout !== undefined) server.requestTimeout = o.requestTimeout;
      if (o.connectionTimeout !== undefined) server.setTimeout(o.connectionTimeout);
      if (o.maxRequestsPerSocket && o.maxRequestsPerSocket > 0) server.maxRequestsPerSocket = o.maxRequestsPerSocket;
      return server;
    };
  }
}

/** `?accessKey=` as the router's query parser reads it: given twice, it is no key. */
function queryKey(query: string): string | undefined {
  const NAME = 'accessKey=';
  const amp = query.startsWith(NAME) ? -1 : query.indexOf(`&${NAME}`);
  if (amp < 0 && !query.startsWith(NAME)) return undefined;
  const from = amp + 1 + NAME.length;
  const end = query.indexOf('&', from);
  const value = end < 0 ? query.slice(from) : query.slice(from, end);
  // The plain case (one key, nothing encoded) read as is; anything else as the parser reads it.
  if (!value.includes('%') && !value.includes('+') && !query.includes('accessKey=', from)) return value;
  const all = new URLSearchParams(query).getAll('accessKey');
  return all.length === 1 ? all[0] : undefined;
}

/** Request ids of answers given here (only a logged line needs one). */
let lines = 0;

function lineOf(req: IncomingMessage) {
  return { reqId: `early-${(++lines).toString(36)}`, method: req.method, url: req.url, remoteAddress: req.socket.remoteAddress };
}

/** The networks a call's body names (chainID, chainIDs), read only for a project held to some networks. */
function networksOf(body: Buffer): string[] {
  try {
    return networksNamed({}, JSON.parse(body.toString('utf8')));
  } catch {
    return [];
  }
}
