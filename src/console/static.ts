import { readFile } from 'node:fs/promises';
import { extname, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';

/** Where `npm run build:console` (and `prepare`) puts the page. */
export const CONSOLE_DIST = fileURLToPath(new URL('../../dist/console-page/', import.meta.url));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
};

// Everything the page loads comes from this origin; nothing may frame it.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

function secure(reply: FastifyReply) {
  return reply.header('Content-Security-Policy', CSP).header('X-Content-Type-Options', 'nosniff').header('Referrer-Policy', 'no-referrer').header('X-Frame-Options', 'DENY');
}

/**
 * Serves the built page at /console. Hashed assets are cached for good; any other path under
 * /console gets index.html, so the page's own routes survive a reload.
 */
export function registerConsolePage(app: FastifyInstance, root = CONSOLE_DIST) {
  const index = async (reply: FastifyReply) => {
    try {
      const html = await readFile(resolve(root, 'index.html'));
      return secure(reply).header('Cache-Control', 'no-cache').type(TYPES['.html']).send(html);
    } catch {
      return reply.code(503).type('text/plain; charset=utf-8').send('The console page is not built: run `npm run build` (npm install does it too).\n');
    }
  };
  app.get('/console', (_req, reply) => reply.redirect('/console/'));
  app.get('/console/*', async (req, reply) => {
    const rel = (req.params as { '*': string })['*'];
    if (rel.startsWith('assets/')) {
      const file = resolve(root, rel);
      if (!file.startsWith(resolve(root) + sep)) return reply.code(404).send();
      try {
        const body = await readFile(file);
        return secure(reply)
          .header('Cache-Control', 'public, max-age=31536000, immutable')
          .type(TYPES[extname(file)] ?? 'application/octet-stream')
          .send(body);
      } catch {
        return reply.code(404).type('text/plain').send('not found\n');
      }
    }
    return index(reply);
  });
}
