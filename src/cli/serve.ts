import type { FastifyInstance } from 'fastify';
import { loadConfig } from '../config/load.ts';
import { parse, portFlag } from './args.ts';
import { assertPortFree, listenOn } from './port.ts';
import { UsageError } from './usage-error.ts';
import { startMetricsServer } from '../http/health/metrics-server.ts';

const CLOSE_CUT_MS = 500;

export async function runServe(argv: string[]) {
  const { values } = parse(argv, { config: { type: 'string' }, port: { type: 'string' }, host: { type: 'string' } });
  // Without a file there are no chains (the environment sets only database, port and log level):
  // a server that starts on :4000 serving nothing looks like it works and does not.
  if (!values.config) throw new UsageError('serve needs a config: metarelay serve --config metarelay.json (copy metarelay.example.json to start), or metarelay dev for a local chain');
  const port = portFlag(values.port);
  const config = loadConfig({
    file: values.config,
    overrides: { ...(port !== undefined ? { port } : {}), ...(values.host ? { host: values.host } : {}) },
  });
  // Before loading the service (seconds on a busy machine), the database, the chains: a taken port is said at once.
  await assertPortFree(config.host, config.port);
  const [{ createServices }, { preflight }, { buildApp }, { onShutdown }] = await Promise.all([
    import('../services.ts'),
    import('../config/preflight.ts'),
    import('./app.ts'),
    import('./shutdown.ts'),
  ]);
  const services = await createServices(config);
  let app: FastifyInstance | undefined;
  let metricsServer: Awaited<ReturnType<typeof startMetricsServer>> | undefined;
  try {
    await preflight(services);
    app = await buildApp(services, { logRequests: true });
    await listenOn(app, config.host, config.port);
    if (config.metrics.listen) {
      metricsServer = await startMetricsServer(services.metrics, config.metrics.listen).catch((err: NodeJS.ErrnoException) => {
        throw err.code === 'EADDRINUSE' ? new UsageError(`metrics.listen: port ${config.metrics.listen!.port} on ${config.metrics.listen!.host} is in use`) : err;
      });
      services.log.info({ url: metricsServer.url }, 'metrics served without a credential on metrics.listen');
    }
  } catch (err) {
    // What was opened is closed (database, chain clients, the HTTP server), so the process exits with
    // the error's code instead of hanging on them with nothing listening.
    await metricsServer?.close().catch(() => undefined);
    await app?.close().catch(() => undefined);
    await services.close().catch(() => undefined);
    throw err;
  }
  const server = app;
  // Counted among the API processes from now on: the rate buckets hold this process's share.
  services.startApi();
  if (config.inProcessWorker) services.startBackground();
  if (config.relayer.inProcessDispatcher) services.startDispatchers();
  onShutdown(services.log, {
    drain: () => services.drain(),
    graceMs: config.shutdown.graceMs,
    close: async () => {
      // Requests have had graceMs to finish and held long polls were answered at the drain; a
      // keep-alive connection that is neither idle nor finishing (one opened as the listener closed)
      // must not hold the exit until the deadline, so what is left is cut after half a second.
      const cut = setTimeout(() => server.server.closeAllConnections(), CLOSE_CUT_MS);
      cut.unref();
      await server.close();
      clearTimeout(cut);
      await metricsServer?.close();
      await services.close();
    },
    deadlineMs: config.shutdown.deadlineMs,
  });
}
