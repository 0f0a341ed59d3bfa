// The delivery worker is woken by the bell only for events that made webhook deliveries: a service
// without webhooks ran a claim statement per event written (a ninth of an intake burst's statements).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/load.ts';
import { DeliveryWorker } from '../src/events/delivery.ts';
import { EventBell, outbox } from '../src/events/outbox.ts';
import { createPoster } from '../src/untrusted/post.ts';
import { webhookStore } from '../src/events/webhook-store.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { createTestDb, type TestDb } from './support/db.ts';

let t: TestDb;
beforeAll(async () => {
  t = await createTestDb();
});
afterAll(async () => {
  await t?.drop();
});

describe('the delivery worker and the bell', () => {
  it('a ring without deliveries claims nothing; a ring with deliveries claims at once, not at the next poll', async () => {
    const store = webhookStore(t.db);
    let claims = 0;
    const counted = {
      ...store,
      claim: (...args: Parameters<typeof store.claim>) => {
        claims++;
        return store.claim(...args);
      },
    };
    const bell = new EventBell();
    // A poll far beyond the test: only the bell can make it claim.
    const settings = { ...parseConfig({}).webhooks, pollMs: 600_000 };
    const worker = new DeliveryWorker({
      store: counted,
      outbox: outbox(t.db),
      post: createPoster({ allowPrivateNetworks: true, allowedPrivateHosts: [] }),
      bell,
      log: createLogger('silent'),
      settings,
    });
    worker.start();
    try {
      const settle = () => new Promise((r) => setTimeout(r, 100));
      await settle();
      const afterStart = claims;
      for (let i = 0; i < 5; i++) bell.ring(false);
      await settle();
      expect(claims).toBe(afterStart);
      bell.ring(true);
      await settle();
      expect(claims).toBeGreaterThan(afterStart);
    } finally {
      await worker.stop();
    }
  });
});
