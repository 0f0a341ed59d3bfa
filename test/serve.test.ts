import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/load.ts';
import { preflight } from '../src/config/preflight.ts';
import { startAnvil, type AnvilHandle } from '../src/devchain/anvil.ts';
import { createServices } from '../src/services.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { spawn } from 'node:child_process';
import { pino } from 'pino';
import { createChainClient } from '../src/chain/client.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';
import { rpc, startTestService, asOperator } from './support/service.ts';
import { freePort } from './support/ports.ts';
import { runCli } from './support/cli.ts';

let anvil: AnvilHandle;
beforeAll(async () => {
  anvil = await startAnvil({ blockTime: null });
});
afterAll(async () => {
  await anvil?.stop();
});

describe('readiness with chains', () => {
  it('is ready when the database and every chain answer, and counts chain RPC calls', async () => {
    const t = await startTestService({ chains: [{ chainId: 31337, name: 'anvil', rpcUrls: [anvil.rpcUrl] }] });
    try {
      const res = await t.app.inject({ method: 'GET', url: '/ready', headers: asOperator });
      expect(res.statusCode).toBe(200);
      expect(res.json().checks).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'chain:anvil', ok: true, detail: expect.stringMatching(/^block \d+$/) })]));
      const metrics = await t.app.inject({ method: 'GET', url: '/metrics', headers: asOperator });
      expect(metrics.body).toMatch(/metarelay_chain_rpc_calls_total\{chain="anvil",method="eth_blockNumber"\} [1-9]/);
    } finally {
      await t.close();
    }
  });

  it('stays ready when a chain is down, reports its state (since when, cause), and answers 503 for that chain alone', async () => {
    const dead = `http://127.0.0.1:${await freePort()}`;
    const t = await startTestService({
      chains: [
        { chainId: 1, name: 'mainnet', rpcUrls: [dead] },
        { chainId: 31337, name: 'anvil', rpcUrls: [anvil.rpcUrl] },
      ],
    });
    try {
      // The database answers and the process can serve: one dead node does not take the instance out.
      const res = await t.app.inject({ method: 'GET', url: '/ready', headers: asOperator });
      expect(res.statusCode).toBe(200);
      const byName = Object.fromEntries(res.json().chains.map((c: { name: string }) => [c.name, c]));
      expect(byName.mainnet).toMatchObject({ ok: false, head: null, downSince: expect.any(String), cause: expect.stringMatching(/ECONNREFUSED/) });
      expect(byName.anvil).toMatchObject({ ok: true, head: expect.any(Number), downSince: null });
      expect(res.json().database).toMatchObject({ ok: true });

      const down = await t.app.inject({ method: 'GET', url: '/ready?chain=mainnet', headers: asOperator });
      expect(down.statusCode).toBe(503);
      expect(down.json().chains).toEqual([expect.objectContaining({ name: 'mainnet', ok: false })]);
      expect((await t.app.inject({ method: 'GET', url: '/ready?chain=anvil', headers: asOperator })).statusCode).toBe(200);
      const unknown = await t.app.inject({ method: 'GET', url: '/ready?chain=nope', headers: asOperator });
      expect(unknown.statusCode).toBe(404);
      expect(unknown.json().cause).toContain('configured: mainnet, anvil');

      const status = await rpc(t.app, '/rpc/Metadata/RuntimeStatus', {}, { 'x-access-key': t.accessKey });
      expect(status.body.status.healthOK).toBe(false);
      expect(status.body.status.runnable['chain:mainnet'].running).toBe(false);
    } finally {
      await t.close();
    }
  });

  it('a chain with a dead and a live RPC URL stays up and logs no outage; with every URL dead it is down, logged once', async () => {
    const lines: { msg: string; chain?: string }[] = [];
    const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const dead = `http://127.0.0.1:${await freePort()}`;
    const mixed = createChainClient({ chainId: 31337, name: 'mixed', rpcUrls: [dead, anvil.rpcUrl], rpcBatchSize: 1 }, { log });
    for (let i = 0; i < 3; i++) await mixed.public.getBlockNumber();
    expect(mixed.health.state()).toMatchObject({ ok: true, downSince: null });
    const gone = createChainClient({ chainId: 31337, name: 'gone', rpcUrls: [dead, `http://127.0.0.1:${await freePort()}`], rpcBatchSize: 1 }, { log });
    for (let i = 0; i < 3; i++) await expect(gone.public.getBlockNumber()).rejects.toThrow();
    expect(gone.health.state()).toMatchObject({ ok: false, cause: expect.stringMatching(/ECONNREFUSED/) });
    expect(lines.map((l) => [l.msg, l.chain])).toEqual([['chain node unreachable', 'gone']]);
  });

  it('preflight refuses a chain whose node reports another chain id', async () => {
    const testDb = await createTestDb();
    const cfg = parseConfig({ database: testDb.location, chains: [{ chainId: 137, name: 'polygon', rpcUrls: [anvil.rpcUrl] }] });
    const s = await createServices(cfg, { db: testDb.db, log: createLogger('silent') });
    try {
      await expect(preflight(s)).rejects.toThrow(/"polygon" is configured as chainId 137 but its RPC answers 31337/);
    } finally {
      await s.close();
      await testDb.drop();
    }
  });
});

describe(`metarelay serve (${TEST_DB})`, () => {
  let testDb: TestDb;
  beforeAll(async () => {
    testDb = await createTestDb();
    if (TEST_DB === 'pglite') await testDb.db.close();
  });
  afterAll(() => testDb?.drop().catch(() => undefined));

  it('serves from a config file under `npm run serve`, and SIGTERM to npm drains the server and frees the port', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'metarelay-serve-'));
    const port = await freePort();
    const metricsPort = await freePort();
    const cfg = join(dir, 'metarelay.json');
    writeFileSync(
      cfg,
      JSON.stringify({ port, database: testDb.location, chains: [{ chainId: 31337, name: 'anvil', rpcUrls: [anvil.rpcUrl] }], logLevel: 'info', metrics: { listen: { port: metricsPort } } }),
    );
    // A nested npm must not inherit the settings of an npm that started the tests.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith('npm_')));
    const npm = spawn('npm', ['run', '--silent', 'serve', '--', '--config', cfg], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let out = '';
    npm.stdout.on('data', (d) => (out += d));
    npm.stderr.on('data', (d) => (out += d));
    // The pipe closes when every process holding it has exited: npm and the server it started.
    const allExited = new Promise((r) => npm.stdout.on('close', r));
    try {
      const base = `http://127.0.0.1:${port}`;
      await waitUntil(
        async () => (await fetch(`${base}/ready`).catch(() => undefined))?.status === 200,
        () => out,
      );
      const res = await fetch(`${base}/rpc/Metadata/Ping`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(await res.json()).toEqual({ status: true });
      // Operational detail is the operator's: anonymous /ready says ready and no more, /metrics on the
      // API port needs an admin token (none is configured here), and metrics.listen serves it without one.
      expect(await (await fetch(`${base}/ready`)).json()).toEqual({ ready: true });
      const refused = await fetch(`${base}/metrics`);
      expect(refused.status).toBe(401);
      expect(await refused.text()).not.toContain('metarelay_');
      const scraped = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
      expect(scraped.status).toBe(200);
      expect(await scraped.text()).toMatch(/metarelay_chain_rpc_calls_total\{chain="anvil"/);
      expect((await fetch(`http://127.0.0.1:${metricsPort}/ready`)).status).toBe(404);
      npm.kill('SIGTERM');
      await within(allExited, 20_000, () => `the server still runs 20 s after SIGTERM to npm (an orphan holds port ${port}):\n${out}`);
      expect(out).toMatch(/"signal":"SIGTERM".*shutting down: draining[\s\S]*shut down cleanly/);
      await expect(fetch(`${base}/health`)).rejects.toThrow();
      await expect(fetch(`http://127.0.0.1:${metricsPort}/metrics`)).rejects.toThrow();
    } finally {
      // Its own process group: whatever it left behind goes too.
      try {
        process.kill(-npm.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });
});

describe(`metarelay serve refuses a chain of another chain id (${TEST_DB})`, () => {
  it('exits 2 saying why, having closed what it opened (a PostgreSQL pool held the process, nothing listening)', async () => {
    const testDb = await createTestDb();
    if (TEST_DB === 'pglite') await testDb.db.close();
    const dir = mkdtempSync(join(tmpdir(), 'metarelay-preflight-'));
    const cfg = join(dir, 'metarelay.json');
    writeFileSync(cfg, JSON.stringify({ port: await freePort(), database: testDb.location, chains: [{ chainId: 137, name: 'polygon', rpcUrls: [anvil.rpcUrl] }] }));
    try {
      const r = await runCli(['serve', '--config', cfg], {}, 60_000);
      expect(r.code, r.stdout + r.stderr).toBe(2);
      expect(r.stderr).toContain('metarelay: preflight failed');
      expect(r.stderr).toContain('"polygon" is configured as chainId 137 but its RPC answers 31337');
    } finally {
      await testDb.drop().catch(() => undefined);
    }
  });
});

async function waitUntil(ok: () => Promise<boolean>, output: () => string, timeoutMs = 90_000) {
  const t0 = Date.now();
  while (!(await ok())) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`not ready in ${timeoutMs} ms:\n${output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function within<T>(p: Promise<T>, ms: number, what: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(what())), ms)))]).finally(() => clearTimeout(timer));
}
