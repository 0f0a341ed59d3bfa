import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { parseConfig } from '../../src/config/load.ts';
import type { AppConfigInput } from '../../src/config/schema.ts';
import { buildApp } from '../../src/cli/app.ts';
import { createServices, type Services } from '../../src/services.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { createTestDb, type TestDb } from './db.ts';
import type { Db } from '../../src/store/db.ts';

export interface TestService {
  services: Services;
  app: FastifyInstance;
  testDb: TestDb;
  /** A project and a live key on it. */
  project: { id: number; name: string };
  /** A publishable key of the project: reads, relays, streams. */
  accessKey: string;
  /** A secret key of the project: what writes its state (collections, uploads, webhook listeners). */
  secretKey: string;
  close(): Promise<void>;
}

/** An admin token every test service takes (besides the test's own): for /metrics and /ready's full body. */
export const OPERATOR_TOKEN = 'test-operator-token-0123456789';
export const asOperator: Readonly<Record<string, string>> = Object.freeze({ authorization: `Bearer ${OPERATOR_TOKEN}` });

/** The service's Prometheus text, read as an operator. */
export async function scrape(app: FastifyInstance): Promise<string> {
  return (await app.inject({ method: 'GET', url: '/metrics', headers: asOperator })).body;
}

/** A real service on a private database; requests go through fastify's inject (no socket). */
export async function startTestService(
  config: Partial<AppConfigInput> = {},
  opts: { /** Seen by the services instead of the test database (e.g. to count queries). */ wrapDb?: (db: Db) => Db } = {},
): Promise<TestService> {
  const testDb = await createTestDb();
  // Media blobs go to a folder of this test's own (the default would sit beside a shared temp dir).
  const mediaDir = mkdtempSync(join(tmpdir(), 'metarelay-media-'));
  const media = { ...config.media, store: config.media?.store ?? { type: 'folder' as const, path: mediaDir } };
  const admin = { ...config.admin, tokens: [...(config.admin?.tokens ?? []), OPERATOR_TOKEN] };
  const cfg = parseConfig({ allowPrivateNetworks: true, logLevel: 'silent', ...config, media, admin, database: testDb.location });
  const services = await createServices(cfg, { db: opts.wrapDb ? opts.wrapDb(testDb.db) : testDb.db, log: createLogger('silent'), pollingIntervalMs: 50 });
  const app = await buildApp(services);
  const project = await services.projects.create(`test-${Math.random().toString(36).slice(2, 8)}`);
  const { key } = await services.accessKeys.create(project.id, 'test');
  const secret = await services.accessKeys.create(project.id, 'test (secret)', { kind: 'secret' });
  return {
    services,
    app,
    testDb,
    project,
    accessKey: key,
    secretKey: secret.key,
    async close() {
      await app.close();
      await services.close();
      await testDb.drop();
      rmSync(mediaDir, { recursive: true, force: true });
    },
  };
}

export async function rpc(app: FastifyInstance, path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await app.inject({
    method: 'POST',
    url: path,
    headers: { 'content-type': 'application/json', ...headers },
    payload: body === undefined ? '' : JSON.stringify(body),
  });
  return { status: res.statusCode, headers: res.headers, body: res.body ? JSON.parse(res.body) : undefined };
}

/** The database with a count of the statements sent through it (transactions included). */
export function countingDb(db: Db): { db: Db; count(): number; reset(): void; statements: string[] } {
  const statements: string[] = [];
  const counted = <T extends object>(target: T): T =>
    new Proxy(target, {
      get(t, k) {
        const v = Reflect.get(t, k, t) as unknown;
        if (k === 'query') return (...a: unknown[]) => (statements.push(String(a[0])), (v as (...x: unknown[]) => unknown).apply(t, a));
        if (k === 'transaction') return (fn: (tx: object) => unknown) => (v as (f: (tx: object) => unknown) => unknown).call(t, (tx: object) => fn(counted(tx)));
        return typeof v === 'function' ? (v as (...x: unknown[]) => unknown).bind(t) : v;
      },
    });
  return { db: counted(db), count: () => statements.length, reset: () => void statements.splice(0), statements };
}
