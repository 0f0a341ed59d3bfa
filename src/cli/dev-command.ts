import { resolve } from 'node:path';
import { parse, portFlag } from './args.ts';
import { assertPortFree } from './port.ts';

/**
 * `metarelay dev`: its arguments, and a taken port refused before anything slow (loading the service's
 * modules takes seconds on a busy machine, the chain and its compile more), then the dev service (dev.ts).
 */
export async function runDev(argv: string[]) {
  const startedAt = performance.now();
  const { values } = parse(argv, {
    port: { type: 'string' },
    host: { type: 'string' },
    manifest: { type: 'string' },
    data: { type: 'string' },
  });
  const dataDir = resolve(values.data ?? '.metarelay');
  const manifestPath = resolve(values.manifest ?? `${dataDir}/dev.json`);
  const port = portFlag(values.port) ?? portFlag(process.env.PORT) ?? 4000;
  const host = values.host ?? '127.0.0.1';
  await assertPortFree(host, port);
  await (await import('./dev.ts')).startDev({ dataDir, manifestPath, port, host, startedAt });
}
