// Fair shares of GET /events (issue 54, findings 4 and 5): an attacker holding a dapp's public key opens
// streams from a couple of addresses, or resumes from far back again and again, while another user of
// the same key (another client network) does ordinary work. Judged by that user's real answers on real
// sockets (loopback addresses of their own: 127.0.N.x is client network N), the events it receives, and
// the outbox statements the database was sent.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendEvents, type NewEvent } from '../src/events/outbox.ts';
import type { Db } from '../src/store/db.ts';
import { scrape, startTestService, type TestService } from './support/service.ts';

let t: TestService;
let port: number;
/** The outbox reads made for one stream (a catch-up: those with a project), as (after, upTo) positions. */
const catchUpReads: Array<{ after: number; upTo: number }> = [];
const watchReads = (db: Db): Db =>
  new Proxy(db, {
    get(target, k) {
      const v = Reflect.get(target, k, target) as unknown;
      if (k === 'query')
        return (...a: unknown[]) => {
          const p = a[1] as unknown[] | undefined;
          if (/FROM events WHERE seq > \$1 AND/.test(String(a[0])) && p?.[1] != null) catchUpReads.push({ after: Number(p[0]), upTo: Number(p[5]) });
          return (v as (...x: unknown[]) => unknown).apply(target, a);
        };
      return typeof v === 'function' ? (v as (...x: unknown[]) => unknown).bind(target) : v;
    },
  });
const open: http.ClientRequest[] = [];

beforeAll(async () => {
  t = await startTestService(
    {
      webhooks: {
        // A key's 20 streams; before the per-network share, two addresses of 10 each held them all.
        maxStreamsPerKey: 20,
        maxStreamsPerAddress: 10,
        // A resume reaches 1 000 positions back, reads pages of 100, and a network's page budget is 5
        // pages with next to no refill: what a network reads past it waits for the test's whole run.
        streamShares: { perKeyClientPercent: 10, resumeMaxEvents: 1_000, resumePageEvents: 100, resumePagesPerSec: 0.001, resumePageBurst: 10, reconnectsPerMin: 0.01, reconnectBurst: 3 },
      },
    },
    { wrapDb: watchReads },
  );
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = (t.app.server.address() as AddressInfo).port;
}, 60_000);
afterAll(async () => {
  for (const r of open) r.destroy();
  await t?.close();
});

interface Message {
  id?: string;
  event?: string;
  data: { type: string; data: Record<string, unknown> };
}
interface Stream {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  got: Message[];
  /** Resolves once this stream has received `n` messages. */
  messages(n: number): Promise<Message[]>;
  close(): Promise<void>;
}

/** Opens GET /events with `key` from `from` (a loopback address: a client address of its own). */
function stream(key: string, from: string, lastEventId?: number): Promise<Stream> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { 'x-access-key': key };
    if (lastEventId !== undefined) headers['last-event-id'] = String(lastEventId);
    const req = http.get({ host: '127.0.0.1', port, path: '/events', localAddress: from, headers }, (res) => {
      let buf = '';
      let raw = '';
      const got: Message[] = [];
      let want: { n: number; done: (v: Message[]) => void; fail: (e: Error) => void } | undefined;
      let closed = false;
      res.on('close', () => {
        closed = true;
        want?.fail(new Error(`the stream from ${from} ended after ${got.length} messages, ${want.n} awaited`));
      });
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buf += chunk;
        raw += chunk;
        let i: number;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const lines = buf.slice(0, i).split('\n');
          buf = buf.slice(i + 2);
          const field = (f: string) =>
            lines
              .find((l) => l.startsWith(`${f}:`))
              ?.slice(f.length + 1)
              .trim();
          const data = field('data');
          if (data) got.push({ id: field('id'), event: field('event'), data: JSON.parse(data) });
        }
        if (want && got.length >= want.n) want.done(got.slice(0, want.n));
      });
      resolve({
        status: res.statusCode!,
        headers: res.headers,
        get body() {
          return raw;
        },
        got,
        messages: (n) =>
          new Promise((done, fail) => {
            if (got.length >= n) done(got.slice(0, n));
            else if (closed) fail(new Error(`the stream from ${from} had ended after ${got.length} messages, ${n} awaited`));
            else want = { n, done, fail };
          }),
        // A stream the server has already ended has emitted its 'close': waiting for another would hang.
        close: () =>
          new Promise((done) => {
            if (closed) return done();
            res.on('close', () => done());
            req.destroy();
          }),
      });
    });
    open.push(req);
    req.on('error', reject);
  });
}

/** A 429 answer's body arrives after its status: wait for it. */
async function refusal(s: Stream): Promise<string> {
  for (let i = 0; i < 100 && !s.body.includes('}'); i++) await new Promise((r) => setTimeout(r, 20));
  return s.body;
}

const ev = (n: number): NewEvent => ({ type: 'metatxn.status', chainId: 1, projectId: t.project.id, subject: null, data: { n } });
/** Writes events and makes them readable at once (sequenced, as any process's delivery worker does). */
async function write(events: NewEvent[]) {
  await appendEvents(t.services.db, events);
  await t.services.events.outbox.sequence();
  t.services.events.bell.ring();
}
const head = () => t.services.events.outbox.head();
/**
 * Waits until the server has let go of every stream an earlier test closed (a client's close reaches
 * the server's hub a moment later): a stream still attached keeps the hub's shared reader running, and
 * a resume behind it is then served by that shared read, not by catch-up pages, which these tests count.
 */
async function noStreamsAttached() {
  for (let i = 0; i < 500 && t.services.events.streams.streams > 0; i++) await new Promise((r) => setTimeout(r, 20));
  expect(t.services.events.streams.streams).toBe(0);
}

describe('GET /events: fair shares of a public key', () => {
  it("finding 4: two addresses flooding streams fill their client networks' shares only; another user of the key gets its stream and its events", async () => {
    // The attacker opens streams from two addresses in two client networks until refused.
    const attacker: Stream[] = [];
    const refused: Stream[] = [];
    for (const from of ['127.0.1.1', '127.0.2.1']) {
      for (let i = 0; i < 10; i++) {
        const s = await stream(t.accessKey, from);
        if (s.status !== 200) {
          refused.push(s);
          break;
        }
        attacker.push(s);
      }
    }
    // Each network holds its share (10 % of 20: 2), refused 429 with Retry-After naming the share.
    expect(attacker.length).toBe(4);
    expect(refused.map((s) => s.status)).toEqual([429, 429]);
    expect(refused[0].headers['retry-after']).toBe('30');
    expect(await refusal(refused[0])).toMatch(/client network 127\.0\.1\.0\/24 already has 2 event streams open with this access key \(its share of the key's 20/);

    // Another user of the same key, from its own network: its stream is accepted and delivers.
    const victim = await stream(t.accessKey, '127.0.3.1');
    expect(victim.status).toBe(200);
    const got = victim.messages(1);
    await write([ev(1)]);
    expect((await got)[0].data.data).toEqual({ n: 1 });

    expect(await scrape(t.app)).toMatch(/metarelay_event_streams_refused_total\{share="keyClient"\} 2/);
    await Promise.all([...attacker, victim].map((s) => s.close()));
  });

  it('finding 5: resumes from far back start at the head after a stream.gap event, and an address resuming again and again is refused; another user resumes completely', async () => {
    await noStreamsAttached();
    await write(Array.from({ length: 1_500 }, (_, i) => ev(100 + i)));
    const old = await head();

    // The attacker resumes from position 1 (1 500+ positions back) until refused.
    const answers: Stream[] = [];
    for (let i = 0; i < 5; i++) {
      const s = await stream(t.accessKey, '127.0.4.1', 1);
      answers.push(s);
      if (s.status !== 200) break;
      // Its first message is the gap: it starts at the head, with none of the old events.
      const [gap] = await s.messages(1);
      expect(gap.event).toBe('stream.gap');
      expect(gap.data.type).toBe('stream.gap');
      expect(gap.data.data).toMatchObject({ reason: 'tooFar', lastEventId: '1', resumedAfter: String(await head()) });
      expect(gap.id).toBe(String(await head()));
      await s.close();
    }
    // Three resumes (reconnectBurst), then 429 with Retry-After naming the limit.
    expect(answers.map((s) => s.status)).toEqual([200, 200, 200, 429]);
    expect(Number(answers[3].headers['retry-after'])).toBeGreaterThan(0);
    expect(await refusal(answers[3])).toMatch(/client address 127\.0\.4\.1 resumed event streams more than 0\.01 times a minute/);
    // Not one page of the old outbox was read for them (each read all 1 500 before).
    expect(catchUpReads.filter((r) => r.after < old)).toEqual([]);

    // Another user of the key resumes 50 events back: every one of them, in order, then the live ones.
    const from = (await head()) - 50;
    const victim = await stream(t.accessKey, '127.0.5.1', from);
    expect(victim.status).toBe(200);
    const got = victim.messages(51);
    await write([ev(9_999)]);
    const msgs = await got;
    expect(msgs.map((m) => m.data.data.n)).toEqual([...Array.from({ length: 50 }, (_, i) => 100 + 1_450 + i), 9_999]);
    expect(msgs.map((m) => Number(m.id))).toEqual(Array.from({ length: 51 }, (_, i) => from + 1 + i));
    await victim.close();
  });

  it("finding 5: a network's catch-up reads are paged and held to its read budget; another network's resume catches up completely", async () => {
    await noStreamsAttached();
    await write(Array.from({ length: 900 }, (_, i) => ev(20_000 + i)));
    // 900 positions back (within resumeMaxEvents): 9 pages of 100 per stream.
    const from = (await head()) - 900;
    const reads = catchUpReads.length;
    // The attacker resumes two streams (its network's share) from two addresses: 18 pages, its budget 10.
    const attacker = [await stream(t.accessKey, '127.0.6.1', from), await stream(t.accessKey, '127.0.6.2', from)];
    expect(attacker.map((s) => s.status)).toEqual([200, 200]);
    const attackerGot = () => attacker.reduce((n, s) => n + s.got.length, 0);
    for (let i = 0; i < 1_000 && attackerGot() < 1_000; i++) await new Promise((r) => setTimeout(r, 20));

    // Another user of the key, from another network, resumes from the same place: all 900, in order.
    const victim = await stream(t.accessKey, '127.0.7.1', from);
    expect(victim.status).toBe(200);
    const msgs = await victim.messages(900);
    expect(msgs.map((m) => m.data.data.n)).toEqual(Array.from({ length: 900 }, (_, i) => 20_000 + i));
    // Meanwhile the attacker's network read its 10 pages (1 000 events) and waits for more budget.
    expect(attackerGot()).toBe(1_000);
    // Every catch-up statement read at most 100 positions: 10 for the attacker, 9 for the other user.
    const made = catchUpReads.slice(reads);
    expect(made.every((r) => r.upTo - r.after <= 100)).toBe(true);
    expect(made.length).toBe(19);
    expect(await scrape(t.app)).toMatch(/metarelay_event_stream_resume_pages_total\{paced="false"\} \d+/);
    await Promise.all([...attacker, victim].map((s) => s.close()));
  });
});
