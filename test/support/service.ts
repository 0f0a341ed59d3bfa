import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { parseConfig } from '../../src/config/load.ts';
import type { AppConfigInput } from '../../src/config/schema.ts';
import { buildApp } from '../../src/http/app.ts';
import { createServices, type Services } from '../../src/services.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { createTestDb, type TestDb } from './db.ts';

export interface TestService {
  services: Services;
  app: FastifyInstance;
  testDb: TestDb;
  /** A project and a live key on it. */
  project: { id: number; name: string };
  accessKey: string;
  close(): Promise<void>;
}

/** A real service on a private database; requests go through fastify's inject (no socket). */
export async function startTestService(config: Partial<AppConfigInput> = {}): Promise<TestService> {
  const testDb = await createTestDb();
  // Media blobs go to a folder of this test's own (the default would sit beside a shared temp dir).
  const mediaDir = mkdtempSync(join(tmpdir(), 'metarelay-media-'));
  const media = { ...config.media, store: config.media?.store ?? { type: 'folder' as const, path: mediaDir } };
  const cfg = parseConfig({ allowPrivateNetworks: true, logLevel: 'silent', ...config, media, database: testDb.location });
  const services = await createServices(cfg, { db: testDb.db, log: createLogger('silent'), pollingIntervalMs: 50 });
  const app = await buildApp(services);
  const project = await services.projects.create(`test-${Math.random().toString(36).slice(2, 8)}`);
  const { key } = await services.accessKeys.create(project.id, 'test');
  return {
    services,
    app,
    testDb,
    project,
    accessKey: key,
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
