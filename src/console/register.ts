import type { FastifyInstance } from 'fastify';
import { type WebrpcDeps, registerWebrpcService } from '../http/index.ts';
import type { Services } from '../services.ts';
import { consoleDeps, consoleService, type ConsoleServices } from './service.ts';
import { registerConsoleUploads } from './uploads.ts';
import { registerConsolePage } from './static.ts';

/** What the console is mounted with: what its methods read, and the collections (the uploads' route). */
export type ConsoleRegistrationDeps = ConsoleServices & Pick<Services, 'collections'>;

/** The console: its page at /console and its admin API at /rpc/Console/ (unless console.enabled is false). */
export async function registerConsole(app: FastifyInstance, s: ConsoleRegistrationDeps, deps: WebrpcDeps): Promise<void> {
  if (!s.config.console.enabled) return;
  const shared = consoleDeps(s);
  // The page's pictures, dropped on a token: PUTs under /console/upload/ (the page itself is GETs).
  if (s.collections) registerConsoleUploads(app, s.collections, shared, s.config.media.maxBytes);
  registerConsolePage(app);
  await registerWebrpcService(app, '/rpc/Console/', consoleService(s, shared), deps);
}
