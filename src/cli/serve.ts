import { buildApp } from '../http/app.ts';
import { loadConfig } from '../config/load.ts';
import { preflight } from '../config/preflight.ts';
import { createServices } from '../services.ts';
import { parse, portFlag } from './args.ts';
import { onShutdown } from './shutdown.ts';

export async function runServe(argv: string[]) {
  const { values } = parse(argv, { config: { type: 'string' }, port: { type: 'string' }, host: { type: 'string' } });
  const port = portFlag(values.port);
  const config = loadConfig({
    file: values.config,
    overrides: { ...(port !== undefined ? { port } : {}), ...(values.host ? { host: values.host } : {}) },
  });
  const services = await createServices(config);
  await preflight(services);
  const app = await buildApp(services, { logRequests: true });
  await app.listen({ port: config.port, host: config.host });
  if (config.inProcessWorker) services.startBackground();
  if (config.relayer.inProcessDispatcher) services.startDispatchers();
  onShutdown(services.log, {
    drain: () => services.drain(),
    graceMs: config.shutdown.graceMs,
    close: async () => {
      await app.close();
      await services.close();
    },
    deadlineMs: config.shutdown.deadlineMs,
  });
}
