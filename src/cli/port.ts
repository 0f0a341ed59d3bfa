import { createServer } from 'node:net';
import { UsageError } from './usage-error.ts';

/** The one line for a port another process holds, naming how to choose another. */
export function portTakenError(host: string, port: number): UsageError {
  return new UsageError(`port ${port} on ${host} is in use (another metarelay, or another server): stop it, or choose another port with --port N or PORT=N`);
}

/**
 * Fails at once when `port` is taken, before the slow start-up (database, migrations, chains, a dev
 * chain's compile): a taken port found only at listen cost half a minute and a stack trace. The port is
 * let go again at once; a process that takes it meanwhile is still met at listen, with the same line.
 */
export function assertPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => reject(err.code === 'EADDRINUSE' ? portTakenError(host, port) : err));
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
  });
}

/** listen, with a taken port said in the one line above rather than fastify's stack trace. */
export async function listenOn(app: { listen(o: { port: number; host: string }): Promise<unknown> }, host: string, port: number): Promise<void> {
  try {
    await app.listen({ port, host });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') throw portTakenError(host, port);
    throw err;
  }
}
