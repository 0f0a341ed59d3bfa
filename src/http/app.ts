import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Services } from '../services.ts';
import { WebrpcErrors, MetadataErrors, errorMapForPath } from './core/errors.ts';
import { databaseUnavailable } from './core/db-outage.ts';
import { registerHealthRoutes } from './health/health.ts';
import { registerMediaRoutes } from './metadata/media.ts';
import { registerDrainGuard } from './core/drain.ts';
import { openApiDocument, registerRestRoutes } from './metadata/rest.ts';
import { APP_VERSION } from '../version.ts';
import { metadataService } from './metadata/metadata.ts';
import { metadataReadShares } from './metadata/read-shares.ts';
import { adminService } from './metadata/admin.ts';
import { relayerService } from './relayer/relayer.ts';
import { indexerService } from './indexer/indexer.ts';
import { collectionsService } from './collections/collections.ts';
import { registerCollectionRoutes } from './collections/routes.ts';
import { indexerGatewayService } from './indexer/gateway.ts';
import { adminTokenStore } from '../access/admin-tokens.ts';
import { registerWebrpcService, sendError, type WebrpcDeps } from './core/webrpc.ts';
import { registerEventStream } from './events/events.ts';
import { OpenStreams } from './core/stream-registry.ts';
import { AccessPipeline, keyedOf } from './core/access-pipeline.ts';
import { journalNote, journalRouted } from './core/request-journal-entry.ts';
import { registerCors } from './core/cors.ts';
import { lazyChildLogger } from './core/request-logger.ts';
import { Tally } from '../telemetry/tally.ts';
import { RequestRecorder, type RequestLine } from './core/request-log.ts';
import { EarlyAnswers } from './core/early-answers.ts';
import type { FastifyRequest } from 'fastify';
import { chainOutageOf } from '../chain/outage.ts';

export interface BuildAppOptions {
  /** Log each request (off in tests to keep output readable). */
  logRequests?: boolean;
  /**
   * /ready says no (503, `starting: true`) until this is true: `dev` serves before it has written its
   * manifest (the dev collection's URLs need the bound address), and a script that waits for /ready
   * then reads the manifest must read this run's, not the previous one.
   */
  started?: () => boolean;
  /**
   * Faces mounted beside the services, last, by whoever builds the app (the CLI mounts the console):
   * http/ knows no face above it. Each gets the app and the router's deps, so its webrpc services run
   * the same access pipeline, early answers and outage mapping.
   */
  mounts?: readonly Mount[];
}

/** Registers routes of a face on the app before it is ready. */
export type Mount = (app: FastifyInstance, deps: WebrpcDeps) => Promise<void>;

/** The HTTP surface of the services, without listening: cli/app.ts adds the console, tests inject, the CLI listens. */
export async function buildHttpApp(s: Services, opts: BuildAppOptions = {}): Promise<FastifyInstance> {
  // One access policy and response cache for every form (REST, webrpc, media, console).
  const access = new AccessPipeline({
    auth: s.auth,
    admin: adminTokenStore(s.db, s.config.admin.tokens),
    rateLimiter: s.rateLimiter,
    networks: s.networks,
    responses: s.responses,
    metrics: s.metrics,
  });
  // serve logs one line per answered request (sampled, see RequestRecorder); tests do not.
  const recorder = new RequestRecorder(new Tally(s.metrics.httpRequests), s.config.requestLog, opts.logRequests ? s.log : undefined);
  // Cached REST token reads are answered before routing, by the same policy (early-answers.ts).
  const early = new EarlyAnswers(access, s.config.auth.rest, recorder, (keyed, name, ip, status, ms) => journalNote(s, keyed, name, ip, status, ms));
  const app = Fastify({
    serverFactory: early.serverFactory(),
    loggerInstance: s.log as FastifyBaseLogger,
    // Fastify's own request logging writes two lines per request (in, completed); see below for ours.
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: lazyChildLogger,
    bodyLimit: s.config.bodyLimit,
    trustProxy: false,
  });

  registerCors(app);

  // One callback hook for every request: an async one costs a promise each, and each hook step is
  // a turn of fastify's hook runner.
  app.addHook('onResponse', (req, reply, done) => {
    recorder.record(req.routeOptions.url ?? 'unmatched', reply.statusCode, reply.elapsedTime, lineOf, req);
    // A request a valid access key made goes in its project's request log (admitted or refused after).
    const keyed = keyedOf(req);
    if (keyed) journalRouted(s, keyed, req, reply.statusCode, reply.elapsedTime);
    done();
  });

  // Client mistakes caught by fastify itself (oversize body, bad framing) keep the webrpc error shape.
  app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, req, reply) => {
    const status = err.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      const cause = err.code === 'FST_ERR_CTP_BODY_TOO_LARGE' ? `request body larger than ${s.config.bodyLimit} bytes` : err.message;
      return sendError(reply, { ...WebrpcErrors.WebrpcBadRequest, status }, cause);
    }
    // The database restarting or out of connections (an access key looked up, a REST read): 503 with
    // Retry-After in the service's own words, as the webrpc handlers answer it.
    const dbDown = databaseUnavailable(errorMapForPath(req.url).databaseUnavailable, err);
    if (dbDown) return sendError(reply, dbDown.def, dbDown.detail, dbDown.headers);
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

  // Closing: every request goes to fastify, which answers it as a closing server does.
  app.addHook('preClose', (done) => {
    early.close();
    done();
  });
  registerDrainGuard(app, s);
  registerHealthRoutes(app, s, access, opts.started);
  // One share of metadata reads per key and client for both forms, RPC and REST.
  const metadataShares = metadataReadShares(s.config, () => s.chains.size, s.metrics, s.fleet);
  registerRestRoutes(app, s, access, metadataShares);
  registerMediaRoutes(app, s, access);
  if (s.collections) registerCollectionRoutes(app, s.collections, access, s.config.media.maxBytes);
  // Streams end when the server closes, or they would hold its close open forever.
  const streams = new OpenStreams(s.config.webhooks, (share) => s.metrics.streamsRefused.inc({ share }));
  s.metrics.eventStreams.watch(() => streams.slots.reading());
  app.addHook('preClose', (done) => {
    streams.closeAll();
    done();
  });
  registerEventStream(app, s, streams);
  const openapi = JSON.stringify(openApiDocument(APP_VERSION));
  app.get('/openapi.json', async (_req, reply) => reply.type('application/json').send(openapi));
  const deps: WebrpcDeps = { access, metrics: s.metrics, early, outage: (err: unknown) => chainOutageOf(err, s.chains.values()) };
  await registerWebrpcService(app, '/rpc/Metadata/', metadataService(s, metadataShares), deps);
  await registerWebrpcService(app, '/rpc/Admin/', adminService(s), deps);
  if (s.collections) await registerWebrpcService(app, '/rpc/Collections/', collectionsService(s.collections), deps);
  await registerWebrpcService(app, '/relayer/:network/rpc/Relayer/', relayerService(s), deps);
  await registerWebrpcService(app, '/indexer/:network/rpc/Indexer/', indexerService(s, streams), deps);
  // The gateway's path in indexergw.gen.ts, at the root as Sequence serves it: `new SequenceIndexerGateway(<base>)`.
  await registerWebrpcService(app, '/rpc/IndexerGateway/', indexerGatewayService(s), deps);
  for (const mount of opts.mounts ?? []) await mount(app, deps);
  await app.ready();
  return app;
}

function lineOf(req: FastifyRequest): RequestLine {
  return { reqId: req.id, method: req.method, url: req.url, remoteAddress: req.ip };
}
