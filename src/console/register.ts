import type { FastifyInstance } from 'fastify';
import { registerWebrpcService, type WebrpcDeps } from '../http/webrpc.ts';
import type { Services } from '../services.ts';
import { consoleService } from './service.ts';
import { registerConsolePage } from './static.ts';

/** The console: its page at /console and its admin API at /rpc/Console/ (unless console.enabled is false). */
export async function registerConsole(app: FastifyInstance, s: Services, deps: WebrpcDeps): Promise<void> {
  if (!s.config.console.enabled) return;
  registerConsolePage(app);
  await registerWebrpcService(app, '/rpc/Console/', consoleService(s), deps);
}
