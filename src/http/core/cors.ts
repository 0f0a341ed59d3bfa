import type { FastifyInstance } from 'fastify';

/**
 * CORS for every route: any origin may call (the API is keyed, not cookie-authenticated), so the
 * request's Origin is reflected; preflights are answered for any path.
 *
 * What @fastify/cors with `origin: true` did, with the headers resolved once: it spread its options
 * into a new object, made a closure and joined the exposed headers on every request, and that hook
 * runs for every request the service answers.
 */
const METHODS = 'GET, POST, PUT, OPTIONS';
const ALLOWED_HEADERS = 'Content-Type, Webrpc, X-Access-Key, Authorization';
const EXPOSED_HEADERS = 'Webrpc, ETag, Retry-After';
const MAX_AGE = '86400';

const WITHOUT_ORIGIN: Readonly<Record<string, string>> = Object.freeze({ vary: 'Origin', 'access-control-expose-headers': EXPOSED_HEADERS });

/** The CORS headers of an answer to a request from `origin` (the answer depends on Origin: caches must keep one per origin). */
export function corsHeaders(origin: string | undefined): Readonly<Record<string, string>> {
  return origin ? { vary: 'Origin', 'access-control-allow-origin': origin, 'access-control-expose-headers': EXPOSED_HEADERS } : WITHOUT_ORIGIN;
}

export function registerCors(app: FastifyInstance) {
  app.addHook('onRequest', (req, reply, done) => {
    reply.headers(corsHeaders(req.headers.origin));
    done();
  });

  app.options('*', (req, reply) => {
    // A preflight names the origin and the method it asks for; anything else is not one.
    if (!req.headers.origin || !req.headers['access-control-request-method']) {
      return reply.code(400).type('text/plain').send('Invalid Preflight Request');
    }
    reply.header('Access-Control-Allow-Methods', METHODS);
    reply.header('Access-Control-Allow-Headers', ALLOWED_HEADERS);
    reply.header('Access-Control-Max-Age', MAX_AGE);
    return reply.code(204).header('Content-Length', '0').send();
  });
}
