// Webhook deliveries judged by what a real local receiver got and by the stored rows.
import type { AddressInfo } from 'node:net';
import type http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendEvents, outbox, type NewEvent } from '../src/events/outbox.ts';
import { DeliveryWorker, nextAttemptAt } from '../src/events/delivery.ts';
import { verifySignature } from '../src/events/signature.ts';
import { webhookStore } from '../src/events/webhook-store.ts';
import { openDb } from '../src/store/db.ts';
import { tokenStore } from '../src/metadata/tokens/token-store.ts';
import { tokenDocumentEvents } from '../src/events/token-events.ts';
import { EventBell } from '../src/events/outbox.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { consoleClient, bearer, type Call } from './console/support.ts';
import { startTestService, type TestService } from './support/service.ts';
import { eventually, startRawServer } from './support/token-chain.ts';

const ADMIN = 'webhooks-admin-token-0123456789';
const FAST = { deadlineMs: 400, retryBaseMs: 100, pollMs: 50, retryHorizonSec: 60 };

interface Got {
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
}

/** A receiver that records every request and answers with `answer(n)` for the n-th (0-based); 'hang' never answers. */
async function receiver(answer: (n: number, body: string) => number | 'hang' = () => 200) {
  const got: Got[] = [];
  /** What happened, in order: `arrive:n` when the n-th request is read, `close:n` when its connection ends. */
  const seen: string[] = [];
  const server = await startRawServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const n = got.length;
      got.push({ headers: req.headers, body, at: Date.now() });
      seen.push(`arrive:${n}`);
      res.on('close', () => seen.push(`close:${n}`));
      const a = answer(n, body);
      if (a === 'hang') return;
      res.writeHead(a, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: a < 300 }));
    });
  });
  return { server, got, seen };
}

const event = (projectId: number | null, subject: string | null, data: unknown): NewEvent => ({ type: 'metatxn.status', chainId: 1, projectId, subject, data });

let t: TestService;
let call: Call;
const stops: (() => Promise<void>)[] = [];

beforeAll(async () => {
  t = await startTestService({ admin: { tokens: [ADMIN] }, webhooks: FAST });
  call = consoleClient(t.app);
}, 60_000);
afterAll(async () => {
  for (const s of stops.reverse()) await s();
  await t?.close();
});

async function create(url: string, projectId = t.project.id, events: string[] = ['metatxn.status']) {
  const r = await call('CreateWebhook', { projectId, url, events }, bearer(ADMIN));
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as { webhook: { id: number }; secret: string };
}

async function deliveriesOf(webhookId: number) {
  const r = await call('ListWebhookDeliveries', { webhookId }, bearer(ADMIN));
  expect(r.status).toBe(200);
  return r.body.deliveries as { id: number; status: string; attempts: number; statusCode: number | null; error: string | null; eventId: string; nextAttemptAt: string | null }[];
}

describe('webhook endpoints (console API)', () => {
  it('shows the signing secret once, refuses bad URLs and event types with a clear error, and needs an admin', async () => {
    const r = await receiver();
    stops.push(r.server.stop);
    const { webhook, secret } = await create(`${r.server.url}/hook`);
    expect(secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    const list = await call('ListWebhooks', { projectId: t.project.id }, bearer(ADMIN));
    expect(list.body.webhooks.find((w: { id: number }) => w.id === webhook.id)).toMatchObject({ url: `${r.server.url}/hook`, enabled: true });
    expect(JSON.stringify(list.body)).not.toContain(secret);

    const ftp = await call('CreateWebhook', { projectId: t.project.id, url: 'ftp://example.com/x', events: ['metatxn.status'] }, bearer(ADMIN));
    expect(ftp.status).toBe(400);
    expect(ftp.body.cause).toMatch(/http or https/);
    const badType = await call('CreateWebhook', { projectId: t.project.id, url: 'https://example.com/x', events: ['metatxn.statuz'] }, bearer(ADMIN));
    expect(badType.status).toBe(400);
    // A type metarelay does not emit yet is refused, not accepted and never served.
    const silent = await call('CreateWebhook', { projectId: t.project.id, url: 'https://example.com/x', events: ['sender.exploded'] }, bearer(ADMIN));
    expect([silent.status, silent.body.error]).toEqual([400, 'InvalidArgument']);
    const anon = await call('CreateWebhook', { projectId: t.project.id, url: 'https://example.com/x', events: ['metatxn.status'] });
    expect(anon.status).toBe(401);
    const none = await call('ListWebhooks', { projectId: 999_999 }, bearer(ADMIN));
    expect(none.body).toMatchObject({ error: 'ProjectNotFound' });
  });
});

describe('webhook deliveries', () => {
  beforeAll(() => t.services.events.delivery.start());

  it('signs each delivery over timestamp.body with the endpoint secret; a tampered body does not verify', async () => {
    const r = await receiver();
    stops.push(r.server.stop);
    const { webhook, secret } = await create(`${r.server.url}/signed`);
    const test = await call('TestWebhook', { id: webhook.id }, bearer(ADMIN));
    expect(test.status).toBe(200);
    await eventually(
      async () => r.got.length,
      (n) => expect(n).toBe(1),
    );
    const [g] = r.got;
    const sig = String(g.headers['metarelay-signature']);
    expect(sig).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(verifySignature(secret, sig, g.body)).toBe(true);
    expect(verifySignature(secret, sig, g.body.replace('test', 'tesT'))).toBe(false);
    expect(verifySignature('whsec_other', sig, g.body)).toBe(false);
    const body = JSON.parse(g.body);
    expect(body).toMatchObject({ id: test.body.eventId, type: 'webhook.test', data: { webhookId: webhook.id } });
    expect(g.headers['metarelay-event-id']).toBe(test.body.eventId);
    expect(g.headers['content-type']).toBe('application/json');
    await eventually(
      () => deliveriesOf(webhook.id),
      (d) => expect(d[0]).toMatchObject({ status: 'DELIVERED', attempts: 1, statusCode: 200 }),
    );
  });

  it('retries a 500 and records the second attempt as delivered; one event id both times', async () => {
    const r = await receiver((n) => (n === 0 ? 500 : 200));
    stops.push(r.server.stop);
    const { webhook } = await create(`${r.server.url}/flaky`);
    await t.services.db.transaction((tx) => appendEvents(tx, [event(t.project.id, 'flaky', { n: 1 })]));
    t.services.events.bell.ring();
    await eventually(
      () => deliveriesOf(webhook.id),
      (d) => expect(d[0]).toMatchObject({ status: 'DELIVERED', attempts: 2, statusCode: 200 }),
      10_000,
    );
    expect(r.got).toHaveLength(2);
    expect(r.got[0].headers['metarelay-event-id']).toBe(r.got[1].headers['metarelay-event-id']);
    expect([r.got[0].headers['metarelay-attempt'], r.got[1].headers['metarelay-attempt']]).toEqual(['1', '2']);
  });

  it('times out a receiver that never answers and delivers on the retry', async () => {
    const r = await receiver((n) => (n === 0 ? 'hang' : 200));
    stops.push(r.server.stop);
    const { webhook } = await create(`${r.server.url}/slow`);
    await appendEvents(t.services.db, [event(t.project.id, 'slow', { n: 1 })]);
    t.services.events.bell.ring();
    await eventually(
      () => deliveriesOf(webhook.id),
      (d) => expect(d[0]).toMatchObject({ status: 'DELIVERED', attempts: 2 }),
      10_000,
    );
    expect(r.got).toHaveLength(2);
    // The retry came after the service gave up on the first request (it closed it at the deadline),
    // not while that one was still counted as running. Judged by order, not by a clock.
    expect(r.seen.indexOf('close:0')).toBeGreaterThan(-1);
    expect(r.seen.indexOf('close:0')).toBeLessThan(r.seen.indexOf('arrive:1'));
    expect((await deliveriesOf(webhook.id))[0].attempts).toBe(2);
  });

  it('sends no event of another project, nor of a keyless meta-transaction, nor a rolled-back one', async () => {
    const r = await receiver();
    stops.push(r.server.stop);
    const { webhook } = await create(`${r.server.url}/mine`);
    const other = await t.services.projects.create(`other-${Date.now()}`);
    await appendEvents(t.services.db, [event(other.id, 'x', { mine: false }), event(null, 'anon', { anonymous: true })]);
    await t.services.db
      .transaction(async (tx) => {
        await appendEvents(tx, [event(t.project.id, 'y', { rolledBack: true })]);
        throw new Error('roll back');
      })
      .catch(() => undefined);
    await appendEvents(t.services.db, [event(t.project.id, 'z', { mine: true })]);
    t.services.events.bell.ring();
    await eventually(
      () => deliveriesOf(webhook.id),
      (d) => expect(d.map((x) => x.status)).toEqual(['DELIVERED']),
    );
    expect(r.got.map((g) => JSON.parse(g.body).data)).toEqual([{ mine: true }]);
  });

  it('delivers one subject in order even when its first event needs retries', async () => {
    const r = await receiver((n) => (n < 2 ? 503 : 200));
    stops.push(r.server.stop);
    const { webhook } = await create(`${r.server.url}/ordered`);
    await appendEvents(t.services.db, [event(t.project.id, 'm1', { step: 1 }), event(t.project.id, 'm1', { step: 2 }), event(t.project.id, 'm1', { step: 3 })]);
    t.services.events.bell.ring();
    await eventually(
      () => deliveriesOf(webhook.id),
      (d) => expect(d.every((x) => x.status === 'DELIVERED') && d.length === 3).toBe(true),
      10_000,
    );
    const steps = r.got.map((g) => JSON.parse(g.body).data.step);
    expect(steps).toEqual([1, 1, 1, 2, 3]);
  });

  it('redelivers one delivery by hand', async () => {
    const r = await receiver();
    stops.push(r.server.stop);
    const { webhook } = await create(`${r.server.url}/again`);
    await appendEvents(t.services.db, [event(t.project.id, null, { again: 1 })]);
    t.services.events.bell.ring();
    const [d] = await eventually(
      () => deliveriesOf(webhook.id),
      (d) => expect(d[0]?.status).toBe('DELIVERED'),
    );
    const again = await call('RedeliverWebhook', { deliveryId: d.id }, bearer(ADMIN));
    expect(again.status).toBe(200);
    await eventually(
      async () => r.got.length,
      (n) => expect(n).toBe(2),
    );
    expect(r.got[0].body).toBe(r.got[1].body);
    expect(r.got[1].headers['metarelay-delivery-id']).toBe(String(again.body.delivery.id));
  });
});

describe('retry horizon, dead letters and disabling', () => {
  /** A service with its own webhook settings, an endpoint on a receiver failing while `up` is false, its worker running. */
  async function failing(webhooks: Record<string, number>) {
    const s = await startTestService({ admin: { tokens: [ADMIN] }, webhooks: { ...FAST, ...webhooks } });
    stops.push(s.close);
    const c = consoleClient(s.app);
    const state = { up: false };
    const r = await receiver(() => (state.up ? 200 : 500));
    stops.push(r.server.stop);
    const w = (await c('CreateWebhook', { projectId: s.project.id, url: `${r.server.url}/down`, events: ['*'] }, bearer(ADMIN))).body.webhook;
    s.services.events.delivery.start();
    const emit = async (data: unknown) => {
      await appendEvents(s.services.db, [event(s.project.id, null, data)]);
      s.services.events.bell.ring();
    };
    const deliveries = async () => (await c('ListWebhookDeliveries', { webhookId: w.id }, bearer(ADMIN))).body.deliveries;
    return { s, c, r, w, state, emit, deliveries };
  }

  it('dead-letters a delivery still failing past the retry horizon', async () => {
    const f = await failing({ retryBaseMs: 150, retryHorizonSec: 2, disableAfterSec: 3600 });
    await f.emit({ a: 1 });
    const dead = await eventually(f.deliveries, (d) => expect(d[0].status).toBe('DEAD'), 15_000);
    expect(dead[0].attempts).toBeGreaterThanOrEqual(2);
    expect(dead[0].statusCode).toBe(500);
    expect(dead[0].nextAttemptAt).toBeNull();
    expect(f.r.got.length).toBe(dead[0].attempts);
  }, 30_000);

  it('disables an endpoint failing for longer than disableAfterSec, queues nothing for it, and resumes when enabled', async () => {
    const f = await failing({ retryBaseMs: 150, retryHorizonSec: 600, disableAfterSec: 1 });
    await f.emit({ b: 1 });
    const list = await eventually(
      async () => (await f.c('ListWebhooks', { projectId: f.s.project.id }, bearer(ADMIN))).body.webhooks,
      (l) => expect(l[0].enabled).toBe(false),
      15_000,
    );
    expect(list[0].disabledReason).toMatch(/every delivery failed since/);
    const parked = await f.deliveries();
    expect(parked).toMatchObject([{ status: 'PENDING', nextAttemptAt: null }]);
    const before = f.r.got.length;
    await f.emit({ c: 1 });
    await new Promise((res) => setTimeout(res, 400));
    expect(f.r.got.length).toBe(before);
    // Enabled again with the receiver back: the delivery that waited goes out; c, written while the
    // endpoint was disabled, was never queued for it.
    f.state.up = true;
    const on = await f.c('UpdateWebhook', { id: f.w.id, enabled: true }, bearer(ADMIN));
    expect(on.body.webhook).toMatchObject({ enabled: true, disabledReason: null });
    const after = await eventually(f.deliveries, (d) => expect(d.map((x: { status: string }) => x.status)).toEqual(['DELIVERED']), 10_000);
    expect(after[0].statusCode).toBe(200);
    expect(f.r.got.filter((g) => JSON.parse(g.body).data.c === 1)).toHaveLength(0);
  }, 30_000);

  it('backs off exponentially with jitter and gives up past the horizon', () => {
    const first = new Date(0);
    const s = { retryBaseMs: 1000, retryHorizonSec: 86_400 };
    expect(nextAttemptAt(1, first, s, 0, () => 0.5)!.getTime()).toBe(1000);
    expect(nextAttemptAt(4, first, s, 0, () => 0.5)!.getTime()).toBe(8000);
    expect(nextAttemptAt(4, first, s, 0, () => 0)!.getTime()).toBe(4000);
    expect(nextAttemptAt(30, first, s, 0, () => 0.5)!.getTime()).toBe(3_600_000);
    expect(nextAttemptAt(3, first, s, 86_399_000, () => 0.5)).toBeNull();
  });
});

describe('SSRF guard on webhook targets', () => {
  it('refuses a loopback target without the switch, and delivers once the host is allowed', async () => {
    const r = await receiver();
    stops.push(r.server.stop);
    const strict = await startTestService({ allowPrivateNetworks: false, admin: { tokens: [ADMIN] }, webhooks: FAST });
    stops.push(strict.close);
    const c = consoleClient(strict.app);
    const w = (await c('CreateWebhook', { projectId: strict.project.id, url: `${r.server.url}/internal`, events: ['*'] }, bearer(ADMIN))).body.webhook;
    strict.services.events.delivery.start();
    await c('TestWebhook', { id: w.id }, bearer(ADMIN));
    const d = await eventually(
      async () => (await c('ListWebhookDeliveries', { webhookId: w.id }, bearer(ADMIN))).body.deliveries,
      (d) => expect(d[0].error).toMatch(/refused: .*127\.0\.0\.1/),
    );
    expect(d[0].status).toBe('PENDING');
    // A name that resolves to loopback is refused too (checked in the socket's own lookup).
    const named = (await c('CreateWebhook', { projectId: strict.project.id, url: `http://localhost:${r.server.port}/internal`, events: ['*'] }, bearer(ADMIN))).body.webhook;
    await c('TestWebhook', { id: named.id }, bearer(ADMIN));
    await eventually(
      async () => (await c('ListWebhookDeliveries', { webhookId: named.id }, bearer(ADMIN))).body.deliveries,
      (d) => expect(d[0].error).toMatch(/refused: localhost resolves to blocked address/),
    );
    expect(r.got).toHaveLength(0);

    const allowed = await startTestService({ allowPrivateNetworks: false, admin: { tokens: [ADMIN] }, webhooks: { ...FAST, allowedPrivateHosts: [`127.0.0.1:${r.server.port}`] } });
    stops.push(allowed.close);
    const c2 = consoleClient(allowed.app);
    const w2 = (await c2('CreateWebhook', { projectId: allowed.project.id, url: `${r.server.url}/internal`, events: ['*'] }, bearer(ADMIN))).body.webhook;
    allowed.services.events.delivery.start();
    await c2('TestWebhook', { id: w2.id }, bearer(ADMIN));
    await eventually(
      async () => r.got.length,
      (n) => expect(n).toBe(1),
    );
  });

  it('does not follow a redirect to an internal address', async () => {
    const inner = await receiver();
    stops.push(inner.server.stop);
    const redirect = await startRawServer((_req, res) => res.writeHead(307, { location: `${inner.server.url}/secret` }).end());
    stops.push(redirect.stop);
    const { webhook } = await create(`${redirect.url}/moved`);
    await call('TestWebhook', { id: webhook.id }, bearer(ADMIN));
    await eventually(
      () => deliveriesOf(webhook.id),
      (d) => expect(d[0].error).toMatch(/redirect to .* not followed/),
    );
    expect(inner.got).toHaveLength(0);
  });
});

describe('delivery across processes', () => {
  it('an event committed by a process that stops before delivering is delivered by the next one', async () => {
    const r = await receiver();
    stops.push(r.server.stop);
    const first = await startTestService({ admin: { tokens: [ADMIN] }, webhooks: FAST });
    const c = consoleClient(first.app);
    const w = (await c('CreateWebhook', { projectId: first.project.id, url: `${r.server.url}/later`, events: ['*'] }, bearer(ADMIN))).body;
    // The state change commits with its event; the process goes away before any worker ran.
    await first.services.db.transaction((tx) => appendEvents(tx, [event(first.project.id, 'k', { kept: true })]));
    await first.app.close();
    await first.services.close();
    expect(r.got).toHaveLength(0);
    const db2 = first.testDb.db.kind === 'postgres' ? await openDb(first.testDb.location) : first.testDb.db;
    const worker = new DeliveryWorker({
      store: webhookStore(db2),
      outbox: outbox(db2),
      post: t.services.events.post,
      bell: t.services.events.bell,
      log: createLogger('silent'),
      settings: { ...t.services.config.webhooks },
    });
    worker.start();
    await eventually(
      async () => r.got.length,
      (n) => expect(n).toBe(1),
    );
    await worker.stop();
    expect(verifySignature(w.secret, String(r.got[0].headers['metarelay-signature']), r.got[0].body)).toBe(true);
    if (db2 !== first.testDb.db) await db2.close();
    await first.testDb.drop();
  });

  it('two delivery workers never send one delivery at once, and every delivery goes exactly once', async () => {
    let inFlight = new Map<string, number>();
    let overlap = 0;
    const r = await receiver(() => 200);
    stops.push(r.server.stop);
    const s = await startTestService({ admin: { tokens: [ADMIN] }, webhooks: { ...FAST, deadlineMs: 10_000, concurrency: 8 } });
    stops.push(s.close);
    const c = consoleClient(s.app);
    await c('CreateWebhook', { projectId: s.project.id, url: `${r.server.url}/race`, events: ['*'] }, bearer(ADMIN));
    const N = 300;
    await appendEvents(
      s.services.db,
      Array.from({ length: N }, (_, i) => event(s.project.id, null, { i })),
    );
    const slow = await startRawServer((req, res) => {
      const id = String(req.headers['metarelay-delivery-id']);
      inFlight.set(id, (inFlight.get(id) ?? 0) + 1);
      if (inFlight.get(id)! > 1) overlap++;
      req.resume();
      req.on('end', () =>
        setTimeout(() => {
          inFlight.set(id, inFlight.get(id)! - 1);
          r.got.push({ headers: req.headers, body: '', at: Date.now() });
          res.writeHead(200).end('{}');
        }, 2),
      );
    });
    stops.push(slow.stop);
    await s.services.db.query('UPDATE webhooks SET url = $1', [`${slow.url}/race`]);
    const other = s.testDb.db.kind === 'postgres' ? await openDb(s.testDb.location) : s.testDb.db;
    const make = (db: typeof other) =>
      new DeliveryWorker({
        store: webhookStore(db),
        outbox: outbox(db),
        post: s.services.events.post,
        bell: s.services.events.bell,
        log: createLogger('silent'),
        settings: { ...s.services.config.webhooks },
      });
    const a = make(s.services.db);
    const b = make(other);
    a.start();
    b.start();
    await eventually(
      async () => r.got.length,
      (n) => expect(n).toBeGreaterThanOrEqual(N),
      30_000,
    );
    await Promise.all([a.stop(), b.stop()]);
    if (other !== s.testDb.db) await other.close();
    const ids = r.got.map((g) => String(g.headers['metarelay-delivery-id']));
    expect(new Set(ids).size).toBe(N);
    expect(ids.length).toBe(N);
    expect(overlap).toBe(0);
    const rows = await s.services.db.query<{ status: string; n: string }>(`SELECT status, count(*)::text AS n FROM webhook_deliveries GROUP BY status`);
    expect(rows.rows).toEqual([{ status: 'DELIVERED', n: String(N) }]);
    inFlight = new Map();
  }, 60_000);
});

describe('a slow endpoint', () => {
  it("holds at most its share of a worker's lanes: while its deliveries hang, the other endpoint gets every event, new ones too", async () => {
    const s = await startTestService({ admin: { tokens: [ADMIN] }, webhooks: { ...FAST, deadlineMs: 30_000, concurrency: 4 } });
    stops.push(s.close);
    const c = consoleClient(s.app);
    // The slow receiver answers nothing until the test lets it (a receiver that takes the whole deadline).
    const held: http.ServerResponse[] = [];
    let slowNow = 0;
    let slowMost = 0;
    let slowAnswered = 0;
    const slow = await startRawServer((req, res) => {
      req.resume();
      slowNow++;
      slowMost = Math.max(slowMost, slowNow);
      res.on('close', () => slowNow--);
      held.push(res);
    });
    stops.push(slow.stop);
    const fast = await receiver(() => 200);
    stops.push(fast.server.stop);
    const release = () => {
      for (const res of held.splice(0)) {
        slowAnswered++;
        res.writeHead(200).end('{}');
      }
    };
    for (const url of [`${slow.url}/slow`, `${fast.server.url}/fast`]) {
      const r = await c('CreateWebhook', { projectId: s.project.id, url, events: ['*'] }, bearer(ADMIN));
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    }
    const N = 20;
    // Each event goes to both endpoints: their deliveries interleave in claim order.
    await appendEvents(
      s.services.db,
      Array.from({ length: N }, (_, i) => event(s.project.id, null, { i })),
    );
    const worker = new DeliveryWorker({
      store: webhookStore(s.services.db),
      outbox: outbox(s.services.db),
      post: s.services.events.post,
      bell: s.services.events.bell,
      log: createLogger('silent'),
      settings: { ...s.services.config.webhooks },
    });
    worker.start();
    try {
      await eventually(
        async () => fast.got.length,
        (n) => expect(n).toBe(N),
        15_000,
      );
      // An event written while the slow endpoint's deliveries still hang reaches the other one as well.
      await appendEvents(s.services.db, [event(s.project.id, null, { i: N })]);
      await eventually(
        async () => fast.got.length,
        (n) => expect(n).toBe(N + 1),
        15_000,
      );
      // Nothing was answered by the slow endpoint meanwhile, and it never had more than half the lanes.
      expect(slowAnswered).toBe(0);
      expect(slowMost).toBe(2);
      release();
      await eventually(
        async () => {
          release();
          return (await s.services.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM webhook_deliveries WHERE status = 'DELIVERED'`)).rows[0].n;
        },
        (n) => expect(n).toBe(String(2 * (N + 1))),
        15_000,
      );
    } finally {
      release();
      await worker.stop();
    }
    expect(slowMost).toBe(2);
  }, 90_000);
});

describe('GET /events (SSE)', () => {
  it('streams a project its events with filters and resumes after Last-Event-ID', async () => {
    const s = await startTestService({ webhooks: FAST });
    stops.push(s.close);
    await s.app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
    const noKey = await fetch(`${base}/events`);
    expect(noKey.status).toBe(401);
    const badType = await fetch(`${base}/events?types=nope`, { headers: { 'x-access-key': s.accessKey } });
    expect(badType.status).toBe(400);

    const read = async (headers: Record<string, string>, want: number, query = '') => {
      const ac = new AbortController();
      const res = await fetch(`${base}/events${query}`, { headers: { 'x-access-key': s.accessKey, ...headers }, signal: ac.signal });
      expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
      const reader = res.body!.getReader();
      const out: { id: string; type: string; data: any }[] = [];
      let buf = '';
      const deadline = Date.now() + 10_000;
      while (out.length < want && Date.now() < deadline) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += new TextDecoder().decode(value);
        let i: number;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const f = Object.fromEntries(
            block
              .split('\n')
              .filter((l) => /^(id|event|data):/.test(l))
              .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]),
          );
          if (f.data) out.push({ id: f.id, type: f.event, data: JSON.parse(f.data) });
        }
      }
      ac.abort();
      return out;
    };

    const other = await s.services.projects.create(`sse-other-${Date.now()}`);
    const pending = read({}, 3, '?types=metatxn.status,token.metadata_updated');
    await new Promise((res) => setTimeout(res, 300));
    await appendEvents(s.services.db, [event(s.project.id, null, { n: 1 }), event(other.id, null, { secret: true })]);
    await appendEvents(s.services.db, [{ type: 'webhook.test', chainId: 1, projectId: null, subject: null, data: { n: 'filtered out' } }]);
    await appendEvents(s.services.db, [{ type: 'token.metadata_updated', chainId: 1, projectId: null, subject: null, data: { n: 2 } }, event(s.project.id, null, { n: 3 })]);
    s.services.events.bell.ring();
    const first = await pending;
    expect(first.map((e) => e.data.data)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    expect(first[0]).toMatchObject({ type: 'metatxn.status', data: { type: 'metatxn.status', chainId: 1 } });

    // Disconnected after the second: resuming from its id gives the third, then what came since.
    await appendEvents(s.services.db, [event(s.project.id, null, { n: 4 })]);
    const resumed = await read({ 'last-event-id': first[1].id }, 2);
    expect(resumed.map((e) => e.data.data)).toEqual([{ n: 3 }, { n: 4 }]);
    const bad = await fetch(`${base}/events`, { headers: { 'x-access-key': s.accessKey, 'last-event-id': 'abc' } });
    expect(bad.status).toBe(400);
  });
});

describe('token.metadata_updated', () => {
  it('is recorded with the document write when the stored content changes, never for a re-read of the same document or a failure', async () => {
    const store = tokenStore(t.services.db, { onDocumentChanged: tokenDocumentEvents(new EventBell()) });
    const contract = '0x00000000000000000000000000000000000c0c0a';
    const ok = (metadata: Record<string, unknown>) => ({ ok: true as const, tokenUri: 'ipfs://x/1', metadata, raw: metadata, trace: null, source: 'FETCHER_ON_CHAIN_TOKEN_URI' });
    const events = async () =>
      (await t.services.db.query<{ payload: any }>(`SELECT payload FROM events WHERE type = 'token.metadata_updated' AND payload->>'contractAddress' = $1 ORDER BY id`, [contract])).rows.map((r) =>
        typeof r.payload === 'string' ? JSON.parse(r.payload) : r.payload,
      );
    const later = new Date(Date.now() + 60_000);
    await store.save(1, contract, new Map([['1', ok({ name: 'One', attributes: [{ trait_type: 'a', value: 1 }] })]]), later);
    // The same document again, keys in another order: the same content.
    await store.save(1, contract, new Map([['1', ok({ attributes: [{ value: 1, trait_type: 'a' }], name: 'One' })]]), later);
    await store.save(1, contract, new Map([['1', { ok: false as const, tokenUri: 'ipfs://x/1', reason: 'TIMEOUT', message: 'slow', retryAfter: null, trace: null }]]), later);
    let e = await events();
    expect(e).toHaveLength(1);
    expect(e[0]).toMatchObject({ tokenId: '1', oldContentHash: null, metadata: { name: 'One' } });
    await store.save(1, contract, new Map([['1', ok({ name: 'One (revealed)' })]]), later);
    e = await events();
    expect(e).toHaveLength(2);
    expect(e[1]).toMatchObject({ oldContentHash: e[0].newContentHash, metadata: { name: 'One (revealed)' } });
    expect(e[1].newContentHash).toMatch(/^[0-9a-f]{64}$/);
    expect(e[1].newContentHash).not.toBe(e[0].newContentHash);
  });
});
