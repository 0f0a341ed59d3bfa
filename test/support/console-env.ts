import { afterAll, beforeAll } from 'vitest';
import { consoleClient, type Call } from '../console/support.ts';
import { startRelayerEnv, type RelayerEnv } from './relayer-env.ts';
import { startTestService, type TestService } from './service.ts';

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

/**
 * The same for console tests that need no chain: one service per file with `adminToken` accepted, a
 * console client on its app, closed after the file's tests.
 */
export function consoleTestService(adminToken: string, use: (t: TestService, call: Call) => void) {
  let t: TestService | undefined;
  beforeAll(async () => {
    t = await startTestService({ admin: { tokens: [adminToken] } });
    use(t, consoleClient(t.app));
  });
  afterAll(async () => {
    await t?.close();
  });
}
