// The delivery worker claims a batch ahead of its lanes: behind a receiver that never answers, the last
// of a batch waits in the queue for the others' deadlines. It must never be sent once its claim could run
// out while its request may still be running (another worker may have claimed it by then): it goes back
// unsent, its attempt not counted, and is claimed again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/load.ts';
import { DeliveryWorker } from '../src/events/delivery.ts';
import { appendEvents, EventBell, outbox } from '../src/events/outbox.ts';
import { createPoster } from '../src/untrusted/post.ts';
import { webhookStore } from '../src/events/webhook-store.ts';
import { projectRepo } from '../src/store/projects.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';
import { eventually, startRawServer } from './support/token-chain.ts';

let testDb: TestDb;
beforeAll(async () => {
  testDb = await createTestDb();
});
afterAll(async () => {
  await testDb?.drop();
});

describe(`webhook claims and their lease (${TEST_DB})`, () => {
  it('a claimed delivery whose lease could run out while it waits behind a receiver that never answers goes back unsent, and is sent later', async () => {
    const { db } = testDb;
    // One lane, so a claim is 4 deliveries; a deadline of 3 s gives a lease of 8 s (deadline + 5 s): sent
    // in turn, the 4th would go behind three timeouts, 9 s, after its lease ran out.
    const settings = { ...parseConfig({}).webhooks, deadlineMs: 3_000, concurrency: 1, pollMs: 50, retryBaseMs: 600_000 };
    const requests = new Map<string, number>();
    /** How much of the claim was left as each request arrived (by the database's clock), in ms. */
    const leaseLeft: number[] = [];
    let n = 0;
    const receiver = await startRawServer((req, res) => {
      const id = String(req.headers['metarelay-delivery-id']);
      requests.set(id, (requests.get(id) ?? 0) + 1);
      const hang = ++n <= 3;
      req.resume();
      req.on('end', async () => {
        const r = await db.query<{ ms: number }>('SELECT (EXTRACT(EPOCH FROM claimed_until - now()) * 1000)::float8 AS ms FROM webhook_deliveries WHERE id = $1', [Number(id)]);
        leaseLeft.push(Number(r.rows[0].ms));
        if (!hang) res.writeHead(200).end('{}');
      });
    });
    const project = await projectRepo(db).create('lease');
    const store = webhookStore(db);
    const { webhook } = await store.create({ projectId: project.id, url: `${receiver.url}/slow`, events: ['*'], chainIds: null, description: '' });
    await appendEvents(
      db,
      Array.from({ length: 4 }, (_, i) => ({ type: 'metatxn.status' as const, chainId: 1, projectId: project.id, subject: null, data: { i } })),
    );
    const post = createPoster({ allowPrivateNetworks: true, allowedPrivateHosts: [] });
    const worker = new DeliveryWorker({ store, outbox: outbox(db), post, bell: new EventBell(), log: createLogger('silent'), settings });
    worker.start();
    try {
      const rows = await eventually(
        () => store.deliveries(webhook.id, 10),
        (r) => expect(r.filter((d) => d.status === 'DELIVERED')).toHaveLength(1),
        60_000,
      );
      // The three that hung failed once each and wait for their retry; the fourth was sent once, after it went back.
      expect(rows.filter((d) => d.status === 'PENDING').map((d) => d.lastError)).toEqual(Array(3).fill('no answer within 3000 ms'));
      for (const d of rows) expect({ id: d.id, attempts: d.attempts }).toEqual({ id: d.id, attempts: requests.get(String(d.id)) });
      expect(leaseLeft).toHaveLength(4);
      for (const ms of leaseLeft) expect(ms).toBeGreaterThan(0);
    } finally {
      await worker.stop();
      post.close();
      await receiver.stop();
    }
  }, 60_000);
});
