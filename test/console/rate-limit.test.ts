import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/cli/app.ts';
import { createServices, type Services } from '../../src/services.ts';
import { openDb, type Db } from '../../src/store/db.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { TEST_DB } from '../support/env.ts';
import { rpc, startTestService, type TestService } from '../support/service.ts';
import { bearer, type Call } from './support.ts';
import { consoleTestService } from '../support/console-env.ts';

const ADMIN = 'console-admin-token-0123456789';
let t: TestService;
let call: Call;
// A second metarelay on the same database: its own process state (caches, pool), shared tables.
let second: { services: Services; app: FastifyInstance; db: Db };

consoleTestService(ADMIN, (s, c) => {
  t = s;
  call = c;
});
beforeAll(async () => {
  // On PostgreSQL a second pool, as another process would have; PGlite is one connection, shared.
  const db = TEST_DB === 'postgres' ? await openDb(t.testDb.location) : t.testDb.db;
  const services = await createServices(t.services.config, { db, log: createLogger('silent') });
  second = { services, app: await buildApp(services), db };
});
afterAll(async () => {
  await second?.app.close();
  await second?.services.close();
  if (second && second.db !== t.testDb.db) await second.db.close();
});

async function keyWith(limit: { ratePerSec?: number; rateBurst?: number }) {
  const r = await call('CreateAccessKey', { projectId: t.project.id, ...limit }, bearer(ADMIN));
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.accessKey as string;
}

// Any keyed call will do; this one answers NotFound (400) when it is let through.
const hit = (app: FastifyInstance, key: string) => rpc(app, '/rpc/Metadata/GetTask', { taskId: 1 }, { 'x-access-key': key });

describe('rate limits per access key', () => {
  it('lets a burst through, then answers RateLimited (429) with Retry-After', async () => {
    // One token per 100 s: nothing refills during the test.
    const key = await keyWith({ ratePerSec: 0.01, rateBurst: 2 });
    expect((await hit(t.app, key)).body.error).toBe('NotFound');
    expect((await hit(t.app, key)).body.error).toBe('NotFound');
    const limited = await hit(t.app, key);
    expect(limited.status).toBe(429);
    expect(limited.body).toMatchObject({ error: 'RateLimited', code: 2005, status: 429 });
    const retryAfter = Number(limited.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(1);
    expect(retryAfter).toBeLessThanOrEqual(100);

    // The REST form spends from the same bucket.
    const rest = await t.app.inject({ method: 'GET', url: '/tokens/mainnet/0x' + '1'.repeat(40) + '/1', headers: { 'x-access-key': key } });
    expect(rest.statusCode).toBe(429);
    expect(rest.headers['retry-after']).toBeDefined();

    // Another key of the same project has its own bucket.
    const other = await keyWith({ ratePerSec: 0.01, rateBurst: 1 });
    expect((await hit(t.app, other)).body.error).toBe('NotFound');
  });

  it('holds across two service instances sharing one database', async () => {
    const key = await keyWith({ ratePerSec: 0.01, rateBurst: 3 });
    const answers = [];
    for (const app of [t.app, second.app, t.app, second.app, t.app]) answers.push((await hit(app, key)).status);
    // Three tokens in all, whichever instance spends them.
    expect(answers).toEqual([400, 400, 400, 429, 429]);
  });

  it('admits concurrent requests no more than the burst allows', async () => {
    const key = await keyWith({ ratePerSec: 0.01, rateBurst: 5 });
    const all = await Promise.all(Array.from({ length: 12 }, (_, i) => hit(i % 2 ? second.app : t.app, key)));
    expect(all.filter((r) => r.status !== 429)).toHaveLength(5);
  });

  it('a fast key whose tokens are taken in chunks (held by a process for 100 ms) still admits no more than the bucket across two instances', async () => {
    // 50/s, burst 40: each database write grants up to 5 tokens, spent locally by the process that took them.
    const key = await keyWith({ ratePerSec: 50, rateBurst: 40 });
    const started = Date.now();
    expect((await hit(t.app, key)).status).toBe(400);
    const first = await t.services.db.query<{ last_grant: number; tokens: number }>('SELECT last_grant, tokens FROM rate_buckets ORDER BY updated_at DESC LIMIT 1');
    expect(Number(first.rows[0].last_grant)).toBe(5);
    expect(Number(first.rows[0].tokens)).toBe(35);
    const all: Array<Awaited<ReturnType<typeof hit>>> = [];
    // Rounds of 30 until the limit bites (on a loaded machine a round can take long enough for the
    // bucket to refill, so how many rounds that takes is not fixed); never more than the bucket allows.
    for (let round = 0; round < 20 && !all.some((r) => r.status === 429); round++) {
      all.push(...(await Promise.all(Array.from({ length: 30 }, (_, i) => hit(i % 2 ? second.app : t.app, key)))));
    }
    const seconds = (Date.now() - started) / 1000;
    const admitted = all.filter((r) => r.status === 400).length + 1;
    // Never more than the burst plus what refilled meanwhile; and the limit does bite.
    expect(admitted).toBeLessThanOrEqual(40 + Math.ceil(50 * seconds) + 1);
    expect(all.some((r) => r.status === 429)).toBe(true);
  });

  it('does not limit a key with no limit of its own when the config sets no default', async () => {
    const key = await keyWith({});
    for (let i = 0; i < 30; i++) expect((await hit(t.app, key)).status).toBe(400);
  });

  it('takes the default bucket from auth.rateLimit for keys without their own', async () => {
    const s = await startTestService({ admin: { tokens: [ADMIN] }, auth: { rateLimit: { ratePerSec: 0.01, burst: 1 } } });
    try {
      expect((await hit(s.app, s.accessKey)).status).toBe(400);
      expect((await hit(s.app, s.accessKey)).status).toBe(429);
    } finally {
      await s.close();
    }
  });
});
