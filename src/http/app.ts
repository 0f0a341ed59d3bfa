import cors from '@fastify/cors';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Services } from '../services.ts';
import { WebrpcErrors, MetadataErrors } from './errors.ts';
import { registerHealthRoutes } from './health.ts';
import { registerMediaRoutes } from './media.ts';
import { registerDrainGuard } from './drain.ts';
import { openApiDocument, registerRestRoutes } from './rest.ts';
import { APP_VERSION } from '../version.ts';
import { metadataService } from './services/metadata.ts';
import { adminService } from './services/admin.ts';
import { relayerService } from './services/relayer.ts';
import { indexerService } from './services/indexer.ts';
import { adminTokenStore } from '../console/admin-tokens.ts';
import { registerWebrpcService, sendError } from './webrpc.ts';
import { registerConsole } from '../console/register.ts';

export interface BuildAppOptions {
  /** Log each request (off in tests to keep output readable). */
  logRequests?: boolean;
}

/** The whole HTTP surface, without listening: tests inject, the CLI listens. */
export async function buildApp(s: Services, opts: BuildAppOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: s.log as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: !opts.logRequests }),
    bodyLimit: s.config.bodyLimit,
    trustProxy: false,
  });

  await app.register(cors, {
    origin: true,
    methods: ['GET', 'POST', 'OPTIONS'],
    allowedHeaders: ['Content-Type', 'Webrpc', 'X-Access-Key', 'Authorization'],
    exposedHeaders: ['Webrpc', 'ETag', 'Retry-After'],
    maxAge: 86400,
  });

  app.addHook('onResponse', async (req, reply) => {
    s.metrics.httpRequests.inc({ route: req.routeOptions.url ?? 'unmatched', status: String(reply.statusCode) });
  });

  // Client mistakes caught by fastify itself (oversize body, bad framing) keep the webrpc error shape.
  app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, req, reply) => {
    const status = err.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      const cause = err.code === 'FST_ERR_CTP_BODY_TOO_LARGE' ? `request body larger than ${s.config.bodyLimit} bytes` : err.message;
      return sendError(reply, { ...WebrpcErrors.WebrpcBadRequest, status }, cause);
    }
    req.log.error({ err }, 'unhandled error');
    return sendError(reply, WebrpcErrors.WebrpcInternalError, `internal error (request ${req.id})`);
  });

  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0];
    if (path.startsWith('/rpc/') || path.includes('/rpc/')) {
      return sendError(reply, WebrpcErrors.WebrpcBadRoute, `no webrpc method defined for path ${path}`);
    }
    return sendError(reply, { ...MetadataErrors.NotFound, status: 404 }, `no route for ${req.method} ${path}`);
  });

  registerDrainGuard(app, s);
  registerHealthRoutes(app, s);
  registerRestRoutes(app, s);
  registerMediaRoutes(app, s);
  const openapi = JSON.stringify(openApiDocument(APP_VERSION));
  app.get('/openapi.json', async (_req, reply) => reply.type('application/json').send(openapi));
  const deps = { auth: s.auth, admin: adminTokenStore(s.db, s.config.admin.tokens), metrics: s.metrics, rateLimit: s.rateLimiter, networks: s.networks };
  await registerWebrpcService(app, '/rpc/Metadata/', metadataService(s), deps);
  await registerWebrpcService(app, '/rpc/Admin/', adminService(s), deps);
  await registerWebrpcService(app, '/relayer/:network/rpc/Relayer/', relayerService(s), deps);
  await registerWebrpcService(app, '/indexer/:network/rpc/Indexer/', indexerService(s), deps);
  await registerConsole(app, s, deps);
  await app.ready();
  return app;
}
