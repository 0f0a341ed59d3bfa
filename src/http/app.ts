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
import { registerEventStream } from './events.ts';
import { AccessPipeline } from './access-pipeline.ts';
import { registerCors } from './cors.ts';
import { lazyChildLogger } from './request-logger.ts';
import { Tally } from '../telemetry/tally.ts';
import { RequestLogSampler } from './request-log.ts';

export interface BuildAppOptions {
  /** Log each request (off in tests to keep output readable). */
  logRequests?: boolean;
}

/** The whole HTTP surface, without listening: tests inject, the CLI listens. */
export async function buildApp(s: Services, opts: BuildAppOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: s.log as FastifyBaseLogger,
    // Fastify's own request logging writes two lines per request (in, completed); see below for ours.
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: lazyChildLogger,
    bodyLimit: s.config.bodyLimit,
    trustProxy: false,
  });

  registerCors(app);

  // One callback hook for every request: an async one costs a promise each, and each hook step is
  // a turn of fastify's hook runner. The count is a plain number per (route, status), added to the
  // counter when it is read.
  const counted = new Tally(s.metrics.httpRequests);
  const httpLabels = (route: string, status: number) => ({ route, status: String(status) });
  // serve logs one line per request, when it is answered: what fastify's two lines said, at half the
  // cost. The URL goes through the logger's redaction like every line (?accessKey= is masked).
  // Written by the root logger with the request id, so the request's own child logger is never made.
  // Successful requests are sampled (config requestLog); errors and slow ones always get their line.
  const log = opts.logRequests ? s.log : undefined;
  const sampler = new RequestLogSampler(s.config.requestLog);
  app.addHook('onResponse', (req, reply, done) => {
    const route = req.routeOptions.url ?? 'unmatched';
    const status = reply.statusCode;
    counted.add(`${status} ${route}`, httpLabels, route, status);
    if (log) {
      const ms = reply.elapsedTime;
      const take = sampler.take(status, ms);
      if (take.log) {
        const line = { reqId: req.id, method: req.method, url: req.url, statusCode: status, ms: Math.round(ms * 10) / 10, remoteAddress: req.ip };
        if (take.skipped) log.info({ ...line, unloggedBefore: take.skipped }, 'request');
        else log.info(line, 'request');
      }
    }
    done();
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

  // One access policy and response cache for every form (REST, webrpc, media, console).
  const access = new AccessPipeline({
    auth: s.auth,
    admin: adminTokenStore(s.db, s.config.admin.tokens),
    rateLimiter: s.rateLimiter,
    networks: s.networks,
    responses: s.responses,
    metrics: s.metrics,
  });
  registerDrainGuard(app, s);
  registerHealthRoutes(app, s);
  registerRestRoutes(app, s, access);
  registerMediaRoutes(app, s, access);
  registerEventStream(app, s);
  const openapi = JSON.stringify(openApiDocument(APP_VERSION));
  app.get('/openapi.json', async (_req, reply) => reply.type('application/json').send(openapi));
  const deps = { access, metrics: s.metrics };
  await registerWebrpcService(app, '/rpc/Metadata/', metadataService(s), deps);
  await registerWebrpcService(app, '/rpc/Admin/', adminService(s), deps);
  await registerWebrpcService(app, '/relayer/:network/rpc/Relayer/', relayerService(s), deps);
  await registerWebrpcService(app, '/indexer/:network/rpc/Indexer/', indexerService(s), deps);
  await registerConsole(app, s, deps);
  await app.ready();
  return app;
}
