// The real binary: `metarelay webhooks add|list|remove`, and a delivery worker process SIGKILLed in the
// middle of a delivery whose event another process goes on to deliver.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendEvents } from '../src/events/outbox.ts';
import { webhookStore } from '../src/events/webhook-store.ts';
import { newSecret, signatureHeader, verifySignature } from '../src/events/signature.ts';
import { openDb } from '../src/store/db.ts';
import { projectRepo } from '../src/store/projects.ts';
import { runCli, runMain, startCli } from './support/cli.ts';
import { spawn } from 'node:child_process';
import { createTestDb, type TestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';
import { eventually, startRawServer } from './support/token-chain.ts';

let testDb: TestDb;
let dbArgs: string[];
let config: string;

beforeAll(async () => {
  testDb = await createTestDb();
  dbArgs = ['--database', testDb.location];
  config = join(mkdtempSync(join(tmpdir(), 'metarelay-wh-')), 'metarelay.json');
  writeFileSync(config, JSON.stringify({ allowPrivateNetworks: true, logLevel: 'silent', webhooks: { deadlineMs: 1_000, pollMs: 50 } }));
});
afterAll(async () => {
  await testDb?.drop().catch(() => undefined);
});

describe(`metarelay webhooks (${TEST_DB})`, () => {
  it('adds (printing the secret once), lists without the secret, refuses bad input, removes', async () => {
    // PGlite is single-process: the CLI opens the folder only while this process does not.
    await testDb.db.close();
    expect((await runMain(['projects', 'create', 'hooked', ...dbArgs])).code).toBe(0);
    // The add as a process of the built binary (what a shell sees: the secret on stdout, the note on
    // stderr); the other commands' own work in this process (runMain: ~0.3 s of CPU less each on PGlite).
    const add = await runCli(['webhooks', 'add', '--project', 'hooked', '--url', 'https://example.com/hook', '--events', 'metatxn.status,token.metadata_updated', ...dbArgs]);
    expect(add.code, add.stderr).toBe(0);
    const created = JSON.parse(add.stdout);
    expect(created).toMatchObject({ url: 'https://example.com/hook', events: ['metatxn.status', 'token.metadata_updated'], enabled: true });
    expect(created.secret).toMatch(/^whsec_/);
    expect(add.stderr).toMatch(/not shown again/);
    const list = await runMain(['webhooks', 'list', '--project', 'hooked', ...dbArgs]);
    expect(JSON.parse(list.stdout.trim())).toMatchObject({ id: created.id });
    expect(list.stdout).not.toContain(created.secret);
    const badUrl = await runMain(['webhooks', 'add', '--project', 'hooked', '--url', 'gopher://x', ...dbArgs]);
    expect(badUrl.code).toBe(2);
    expect(badUrl.stderr).toMatch(/http or https/);
    expect((await runMain(['webhooks', 'remove', String(created.id), ...dbArgs])).stdout).toContain('removed');
    const check = await openDb(testDb.location);
    const left = await webhookStore(check).list(null);
    await check.close();
    expect(left).toEqual([]);
  }, 60_000);

  it('a worker SIGKILLed during a delivery loses nothing: the next worker delivers the event', async () => {
    // The first request is never answered: the worker sending it is SIGKILLed as it arrives.
    let kill: (() => void) | undefined;
    const got: { body: string; sig: string }[] = [];
    const receiver = await startRawServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        got.push({ body: Buffer.concat(chunks).toString('utf8'), sig: String(req.headers['metarelay-signature']) });
        if (got.length === 1) kill?.();
        else res.writeHead(200).end('{}');
      });
    });
    await testDb.db.close(); // (PGlite: one process, one handle at a time)
    const db = await openDb(testDb.location);
    const project = await projectRepo(db).create('killed');
    const { webhook, secret } = await webhookStore(db).create({ projectId: project.id, url: `${receiver.url}/k`, events: ['*'], chainIds: null, description: '' });
    // The state change and its event commit; no process has delivered it yet.
    await db.transaction((tx) => appendEvents(tx, [{ type: 'metatxn.status', chainId: 1, projectId: project.id, subject: 's', data: { status: 'SUCCEEDED' } }]));
    await db.close();

    const first = startCli(['worker', '--config', config, ...dbArgs]);
    kill = () => first.child.kill('SIGKILL');
    await eventually(
      async () => got.length,
      (n) => expect(n).toBe(1),
      60_000,
    );
    await first.stop('SIGKILL');
    expect(first.child.signalCode).toBe('SIGKILL');
    const second = startCli(['worker', '--config', config, ...dbArgs]);
    // The dead worker's claim runs out (deadline + 5 s); the second takes the delivery over.
    await eventually(
      async () => got.length,
      (n) => expect(n).toBe(2),
      60_000,
    );
    await second.stop('SIGTERM');
    await receiver.stop();
    expect(got[1].body).toBe(got[0].body);
    expect(verifySignature(secret, got[1].sig, got[1].body)).toBe(true);
    const check = await openDb(testDb.location);
    const rows = await webhookStore(check).deliveries(webhook.id, 10);
    await check.close();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: 'DELIVERED', lastStatus: 200 });
    expect(rows[0].attempts).toBeGreaterThanOrEqual(2);
    // Two requests reached the receiver: the one whose sender was killed, and the delivered one.
    expect(got).toHaveLength(2);
  }, 90_000);

  it('a worker SIGKILLed in the middle of a batch loses nothing: answered or not, recorded or not, every event arrives', async () => {
    // A worker claims deliveries in batches and writes their outcomes a batch at a time: killed mid-batch,
    // it leaves deliveries claimed and unsent, in flight, and answered 200 but maybe not yet recorded.
    const N = 150;
    const KILL_AT = 40;
    let requests = 0;
    let kill: (() => void) | undefined;
    const answered = new Set<string>();
    let badSignatures = 0;
    let secret = '';
    const receiver = await startRawServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        requests++;
        if (!verifySignature(secret, String(req.headers['metarelay-signature']), Buffer.concat(chunks).toString('utf8'))) badSignatures++;
        // The KILL_AT-th request is never answered: its sender is SIGKILLed as it arrives.
        if (requests === KILL_AT) return kill?.();
        answered.add(String(req.headers['metarelay-event-id']));
        res.writeHead(200).end('{}');
      });
    });
    await testDb.db.close().catch(() => undefined); // (PGlite: one process, one handle at a time)
    let db = await openDb(testDb.location);
    const project = await projectRepo(db).create('killed-mid-batch');
    const created = await webhookStore(db).create({ projectId: project.id, url: `${receiver.url}/batch`, events: ['*'], chainIds: null, description: '' });
    secret = created.secret;
    const ids = await db.transaction((tx) =>
      appendEvents(
        tx,
        Array.from({ length: N }, (_, i) => ({ type: 'metatxn.status' as const, chainId: 1, projectId: project.id, subject: `b${i}`, data: { i } })),
      ),
    );
    await db.close();

    const first = startCli(['worker', '--config', config, ...dbArgs]);
    kill = () => first.child.kill('SIGKILL');
    await eventually(
      async () => requests,
      (n) => expect(n).toBeGreaterThanOrEqual(KILL_AT),
      60_000,
    );
    await first.stop('SIGKILL');
    expect(first.child.signalCode).toBe('SIGKILL');
    expect(answered.size).toBeLessThan(N);
    const second = startCli(['worker', '--config', config, ...dbArgs]);
    await eventually(
      async () => answered.size,
      (n) => expect(n).toBe(N),
      60_000,
    );
    await second.stop('SIGTERM');
    await receiver.stop();
    expect([...answered].sort()).toEqual(ids.map((id) => `evt_${id}`).sort());
    expect(badSignatures).toBe(0);
    db = await openDb(testDb.location);
    const rows = await db.query<{ status: string; n: number }>(`SELECT status, count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1 GROUP BY status`, [created.webhook.id]);
    await db.close();
    expect(rows.rows).toEqual([{ status: 'DELIVERED', n: N }]);
  }, 120_000);
});

describe('examples/webhook-receiver.mjs', () => {
  it('accepts a delivery signed with its secret and refuses a forged, a tampered and a stale one', async () => {
    const secret = newSecret();
    // PORT=0: the receiver takes a free port and names it (a port picked here could be taken meanwhile).
    const child = spawn(process.execPath, ['examples/webhook-receiver.mjs'], { env: { ...process.env, WEBHOOK_SECRET: secret, PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    try {
      await eventually(
        async () => out,
        (o) => expect(o, err).toMatch(/listening on http:\/\/127\.0\.0\.1:\d+\/hook/),
        20_000,
      );
      const port = Number(/127\.0\.0\.1:(\d+)\/hook/.exec(out)![1]);
      const body = JSON.stringify({ id: 'evt_7', type: 'metatxn.status', createdAt: new Date().toISOString(), chainId: 1, projectId: 1, data: { metaTxnId: 'ab', status: 'SENT', receipt: {} } });
      const send = (b: string, sig: string) => fetch(`http://127.0.0.1:${port}/hook`, { method: 'POST', headers: { 'content-type': 'application/json', 'metarelay-signature': sig }, body: b });
      const now = Math.floor(Date.now() / 1000);
      expect((await send(body, signatureHeader(secret, now, body))).status).toBe(204);
      expect((await send(body, signatureHeader(newSecret(), now, body))).status).toBe(401);
      expect((await send(body.replace('SENT', 'SUCCEEDED'), signatureHeader(secret, now, body))).status).toBe(401);
      expect((await send(body, signatureHeader(secret, now - 3_600, body))).status).toBe(401);
      await eventually(
        async () => out,
        (o) => expect(o).toMatch(/evt_7 metatxn.status ab → SENT/),
      );
      expect(out.match(/evt_7/g)).toHaveLength(1);
    } finally {
      child.kill('SIGTERM');
    }
  }, 30_000);
});
