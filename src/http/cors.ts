import type { FastifyInstance } from 'fastify';

/**
 * CORS for every route: any origin may call (the API is keyed, not cookie-authenticated), so the
 * request's Origin is reflected; preflights are answered for any path.
 *
 * What @fastify/cors with `origin: true` did, with the headers resolved once: it spread its options
 * into a new object, made a closure and joined the exposed headers on every request, and that hook
 * runs for every request the service answers.
 */
const METHODS = 'GET, POST, OPTIONS';
const ALLOWED_HEADERS = 'Content-Type, Webrpc, X-Access-Key, Authorization';
const EXPOSED_HEADERS = 'Webrpc, ETag, Retry-After';
const MAX_AGE = '86400';

export function registerCors(app: FastifyInstance) {
  app.addHook('onRequest', (req, reply, done) => {
    // The answer depends on Origin: caches must keep one per origin.
    reply.header('Vary', 'Origin');
    const origin = req.headers.origin;
    if (origin) reply.header('Access-Control-Allow-Origin', origin);
    reply.header('Access-Control-Expose-Headers', EXPOSED_HEADERS);
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
