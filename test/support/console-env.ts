import { afterAll, beforeAll } from 'vitest';
import { consoleClient, type Call } from '../console/support.ts';
import { startRelayerEnv, type RelayerEnv } from './relayer-env.ts';

/**
 * The console tests' common environment: one relayer environment per file (a chain, the service, an admin
 * token), started before the file's tests with a console client on its app and closed after them. `use`
 * hands both to the file's own variables; a file's further set-up goes in a beforeAll after this call.
 */
export function consoleRelayerEnv(use: (env: RelayerEnv, call: Call) => void) {
  let env: RelayerEnv | undefined;
  beforeAll(async () => {
    env = await startRelayerEnv();
    use(env, consoleClient(env.app));
  }, 120_000);
  afterAll(async () => {
    await env?.close();
  });
}
