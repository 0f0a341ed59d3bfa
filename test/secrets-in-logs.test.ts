import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redactSecrets } from '../src/telemetry/redact.ts';
import { accessKeyRepo } from '../src/store/access-keys.ts';
import { projectRepo } from '../src/store/projects.ts';
import { startCli } from './support/cli.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';
import { freePort } from './support/ports.ts';

/** /metrics answers an admin token only. */
const METRICS_ADMIN = 'secrets-metrics-admin-0123456789';

describe('redactSecrets', () => {
  it('masks keys by shape and by position, and leaves other text alone', () => {
    expect(redactSecrets('GET /t?accessKey=wrong-but-secret&x=1')).toBe('GET /t?accessKey=[redacted]&x=1');
    expect(redactSecrets('q?access_key%3Dabc')).toBe('q?access_key%3D[redacted]');
    expect(redactSecrets('{"accessKey":"typo"}')).toBe('{"accessKey":"[redacted]"}');
    expect(redactSecrets('"{\\"accessKey\\": \\"typo\\"}"')).toBe('"{\\"accessKey\\": \\"[redacted]\\"}"');
    expect(redactSecrets('key mr_AbCdEf123456 and token mra_ZZZZZZZZ')).toBe('key mr_[redacted] and token mra_[redacted]');
    expect(redactSecrets('Authorization: Bearer s3cr3t')).toBe('Authorization: Bearer [redacted]');
    expect(redactSecrets('tokenId 12 of 0xabc, number_of_items')).toBe('tokenId 12 of 0xabc, number_of_items');
  });
});

describe(`no access key in the log of a real serve (${TEST_DB})`, () => {
  let testDb: TestDb;
  let key: string;
  beforeAll(async () => {
    testDb = await createTestDb();
    const project = await projectRepo(testDb.db).create('leak-check');
    key = (await accessKeyRepo(testDb.db).create(project.id, 'planted')).key;
    // PGlite is one process's folder: hand it to serve.
    if (TEST_DB === 'pglite') await testDb.db.close();
  });
  afterAll(() => testDb?.drop().catch(() => undefined));

  it('keeps the planted key out of stdout/stderr, error answers and /metrics in every position', async () => {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'metarelay-leak-'));
    const cfg = join(dir, 'metarelay.json');
    writeFileSync(cfg, JSON.stringify({ port, database: testDb.location, logLevel: 'debug', auth: { rpc: 'required', rest: 'required' }, admin: { tokens: [METRICS_ADMIN] } }));
    const srv = startCli(['serve', '--config', cfg]);
    const base = `http://127.0.0.1:${port}`;
    const typo = `${key.slice(0, -1)}${key.endsWith('A') ? 'B' : 'A'}`;
    const answers: string[] = [];
    const call = async (path: string, init: RequestInit = {}) => {
      const res = await fetch(base + path, init);
      const text = await res.text();
      answers.push(text);
      return { status: res.status, text };
    };
    const json = { 'content-type': 'application/json' };
    try {
      await srv.waitFor(/Server listening at/);
      // Header: accepted.
      expect((await call('/rpc/Metadata/Ping', { method: 'POST', headers: { ...json, 'x-access-key': key }, body: '{}' })).status).toBe(200);
      // Query string on a REST read (fails: no such chain) and on an unknown route.
      expect((await call(`/tokens/nochain/0x${'1'.repeat(40)}/1?accessKey=${key}`)).status).toBeGreaterThanOrEqual(400);
      expect((await call(`/nothing-here?accessKey=${encodeURIComponent(key)}`)).status).toBe(404);
      // A mistyped key is a secret too: refused, and not echoed.
      expect((await call(`/tokens/nochain/0x${'1'.repeat(40)}/1?accessKey=${typo}`)).status).toBe(401);
      expect((await call('/rpc/Metadata/Ping', { method: 'POST', headers: { ...json, 'x-access-key': typo }, body: '{}' })).status).toBe(401);
      // JSON body: well-formed (an unknown member) and cut off mid-key, which the parser error quotes.
      expect((await call('/rpc/Metadata/GetTokenMetadata', { method: 'POST', headers: { ...json, 'x-access-key': key }, body: JSON.stringify({ accessKey: key, chainID: 'x' }) })).status).toBe(400);
      const cut = await call('/rpc/Metadata/GetTokenMetadata', { method: 'POST', headers: { ...json, 'x-access-key': key }, body: `{"chainID":"1","accessKey":"${typo}` });
      expect(cut.status).toBe(400);
      expect(cut.text).toMatch(/unmarshal/);
      const metrics = await call('/metrics', { headers: { authorization: `Bearer ${METRICS_ADMIN}` } });
      expect(metrics.text).toMatch(/metarelay_http_requests_total/);
      expect(await srv.stop('SIGTERM')).toBe(0);

      const log = srv.output();
      // The requests were logged (so this checks something), with the key masked.
      expect(log).toMatch(/"url":"\/tokens\/nochain\/0x1+\/1\?accessKey=\[redacted\]"/);
      expect(log).toMatch(/"url":"\/nothing-here\?accessKey=\[redacted\]"/);
      const secretPart = key.slice(3);
      for (const [where, text] of [['log', log], ...answers.map((a, i) => [`answer ${i}`, a])]) {
        expect(text.includes(secretPart), `${where} holds the key`).toBe(false);
        expect(text.includes(typo.slice(3)), `${where} holds the mistyped key`).toBe(false);
      }
    } finally {
      await srv.stop('SIGKILL');
    }
  });
});
