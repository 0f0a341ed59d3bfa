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
    // What the bell does is seen where it acts, at once: whether it wakes the worker (nudge, called from
    // the bell's listener as it rings), and the claim that wake makes. No sleep decides anything here: a
    // test that waited 100 ms for the first pass failed under load (the pass claimed after it).
    let wakes = 0;
    const nudge = worker.nudge.bind(worker);
    worker.nudge = () => {
      wakes++;
      nudge();
    };
    worker.start();
    try {
      // The first pass at start claims once; then the worker sleeps for the 10-minute poll.
      await expect.poll(() => claims).toBeGreaterThan(0);
      const afterStart = claims;
      for (let i = 0; i < 5; i++) bell.ring(false);
      expect(wakes).toBe(0);
      bell.ring(true);
      expect(wakes).toBe(1);
      await expect.poll(() => claims).toBeGreaterThan(afterStart);
    } finally {
      await worker.stop();
    }
  });
});
