import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RequestLogSampler } from '../src/http/core/request-log.ts';
import { startCli } from './support/cli.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';
import { freePort } from './support/ports.ts';

describe('RequestLogSampler', () => {
  it('logs at most successPerSec successes a second and says how many it left out', () => {
    const s = new RequestLogSampler({ successPerSec: 2, slowMs: 500 });
    const t = 1_700_000_000_000;
    expect(s.take(200, 1, t)).toEqual({ log: true, skipped: 0 });
    expect(s.take(200, 1, t + 10)).toEqual({ log: true, skipped: 0 });
    expect(s.take(200, 1, t + 20).log).toBe(false);
    expect(s.take(304, 1, t + 30).log).toBe(false);
    // The next second starts a new allowance; the line carries the two left out.
    expect(s.take(200, 1, t + 1_000)).toEqual({ log: true, skipped: 2 });
  });

  it('always logs errors and slow requests, whatever the allowance', () => {
    const s = new RequestLogSampler({ successPerSec: 0, slowMs: 500 });
    const t = 1_700_000_000_000;
    expect(s.take(200, 1, t).log).toBe(false);
    expect(s.take(404, 1, t)).toEqual({ log: true, skipped: 1 });
    expect(s.take(500, 1, t).log).toBe(true);
    expect(s.take(429, 1, t).log).toBe(true);
    expect(s.take(200, 500, t).log).toBe(true);
    expect(s.take(200, 499, t).log).toBe(false);
  });

  it("'all' logs every request", () => {
    const s = new RequestLogSampler({ successPerSec: 'all', slowMs: 1_000 });
    for (let i = 0; i < 50; i++) expect(s.take(200, 0, 1_700_000_000_000).log).toBe(true);
  });
});

describe(`request lines of a real serve (${TEST_DB})`, () => {
  let testDb: TestDb;
  beforeAll(async () => {
    testDb = await createTestDb();
    if (TEST_DB === 'pglite') await testDb.db.close();
  });
  afterAll(() => testDb?.drop().catch(() => undefined));

  it('samples successful requests per second and keeps every error', async () => {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'metarelay-reqlog-'));
    const cfg = join(dir, 'metarelay.json');
    writeFileSync(cfg, JSON.stringify({ port, database: testDb.location, requestLog: { successPerSec: 2 } }));
    const srv = startCli(['serve', '--config', cfg]);
    const base = `http://127.0.0.1:${port}`;
    try {
      await srv.waitFor(/Server listening at/);
      for (let i = 0; i < 40; i++) expect((await fetch(`${base}/health`)).status).toBe(200);
      for (let i = 0; i < 5; i++) expect((await fetch(`${base}/nothing-here-${i}`)).status).toBe(404);
      expect(await srv.stop('SIGTERM')).toBe(0);
      const lines = srv
        .output()
        .split('\n')
        .filter((l) => l.includes('"msg":"request"'))
        .map((l) => JSON.parse(l) as { time: number; statusCode: number; url: string; unloggedBefore?: number });
      // Every 404 has its line.
      for (let i = 0; i < 5; i++) expect(lines.some((l) => l.statusCode === 404 && l.url === `/nothing-here-${i}`)).toBe(true);
      const ok = lines.filter((l) => l.statusCode === 200);
      expect(ok.length).toBeGreaterThan(0);
      expect(ok.length).toBeLessThan(40);
      // No second holds more than the allowance of success lines.
      const perSecond = new Map<number, number>();
      for (const l of ok) perSecond.set(Math.floor(l.time / 1000), (perSecond.get(Math.floor(l.time / 1000)) ?? 0) + 1);
      for (const n of perSecond.values()) expect(n).toBeLessThanOrEqual(2);
      // What was left out is accounted for on the lines after it: logged + reported ≤ sent.
      const reported = lines.reduce((a, l) => a + (l.unloggedBefore ?? 0), 0);
      expect(ok.length + reported).toBeLessThanOrEqual(40);
      expect(reported).toBeGreaterThan(0);
    } finally {
      await srv.stop('SIGKILL');
    }
  });
});
