// The one binary's HTTP app: the services' surface (http/) with the console mounted beside it. The
// console is a face of its own; it is registered here, by the CLI, so http/ imports no face above it.
import type { FastifyInstance } from 'fastify';
import { registerConsole } from '../console/register.ts';
import { buildHttpApp, type BuildAppOptions } from '../http/app.ts';
import type { Services } from '../services.ts';

/** The whole HTTP surface, console included, without listening: tests inject, `serve` and `dev` listen. */
export function buildApp(s: Services, opts: BuildAppOptions = {}): Promise<FastifyInstance> {
  return buildHttpApp(s, { ...opts, mounts: [...(opts.mounts ?? []), (app, deps) => registerConsole(app, s, deps)] });
}
