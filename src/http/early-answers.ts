import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { FastifyServerFactory } from 'fastify';
import type { AccessPipeline, AuthMode } from './access-pipeline.ts';
import { pickAccessKey } from './auth.ts';
import { corsHeaders } from './cors.ts';
import type { RequestRecorder } from './request-log.ts';
import { READS_ROUTE, reusedHeaders } from './rest.ts';

const PREFIX = '/tokens/';

/**
 * Cached REST token reads answered before the router sees the request.
 *
 * A cached read does almost nothing of its own: a few map look-ups and a write of bytes it already
 * has. Through fastify it also paid the router, the request and reply objects, the hook runner's
 * stages and reply serialisation, which made it cost twice a bare fastify route (docs/performance.md).
 * Here the same access policy decides it (AccessPipeline.reuseNow: key → authenticate → allowed
 * networks → cached answer → rate limit), and only when everything is known in memory; every other
 * request, and every one of these it cannot decide at once, goes to fastify unchanged. Only an answer
 * the reads route stored for this exact URL and caller can be given, so what is answered here is
 * what the route would answer, with the same headers, count and request line.
 */
export class EarlyAnswers {
  private open = true;
  private seq = 0;

  constructor(
    private readonly access: AccessPipeline,
    private readonly restMode: AuthMode,
    private readonly recorder: RequestRecorder,
  ) {}

  /** From now on every request goes to the router (closing: fastify answers 503 / Connection: close). */
  close() {
    this.open = false;
  }

  /** Answers the request if it is a cached REST read this caller may have now; false: not touched. */
  answer(req: IncomingMessage, res: ServerResponse): boolean {
    const url = req.url;
    if (!this.open || req.method !== 'GET' || url === undefined || !url.startsWith(PREFIX)) return false;
    const start = performance.now();
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    // /tokens/<network>/<contract>/<ids>, nothing encoded: the reads route's shape (the cache decides the rest).
    const n = path.indexOf('/', PREFIX.length);
    const c = n < 0 ? -1 : path.indexOf('/', n + 1);
    if (c < 0 || c === path.length - 1 || path.indexOf('/', c + 1) >= 0 || path.includes('%')) return false;
    const network = path.slice(PREFIX.length, n);
    const key = pickAccessKey(req.headers['x-access-key'], q < 0 ? undefined : queryKey(url.slice(q + 1)));
    const hit = this.access.reuseNow(this.restMode, key, () => [network], `GET ${url}`);
    if (!hit) return false;
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
    this.recorder.record(READS_ROUTE, status, performance.now() - start, lineOf, { req, id: ++this.seq });
    return true;
  }

  /** fastify's serverFactory: the http server fastify would make, with these answers in front of its handler. */
  serverFactory(): FastifyServerFactory {
    return (handler, opts) => {
      const o = opts as typeof opts & { keepAliveTimeout?: number; requestTimeout?: number; connectionTimeout?: number; maxRequestsPerSocket?: number; http?: object };
      const server: Server = createServer(o.http ?? {}, (req, res) => {
        if (!this.answer(req, res)) handler(req, res);
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
  if (!query.includes('accessKey=')) return undefined;
  const all = new URLSearchParams(query).getAll('accessKey');
  return all.length === 1 ? all[0] : undefined;
}

function lineOf(x: { req: IncomingMessage; id: number }) {
  return { reqId: `early-${x.id.toString(36)}`, method: x.req.method, url: x.req.url, remoteAddress: x.req.socket.remoteAddress };
}
