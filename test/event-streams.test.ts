// GET /events under load (issue 29): open streams are capped per access key, per client address and per
// process (a clear 429 with Retry-After past one), and one shared outbox reader per process serves them
// all. Judged by real HTTP answers on real sockets (from several loopback addresses) and by the
// statements the database was sent.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendEvents, type NewEvent } from '../src/events/outbox.ts';
import type { Db } from '../src/store/db.ts';
import { countingDb, startTestService, type TestService } from './support/service.ts';

let t: TestService;
let port: number;
let counter: ReturnType<typeof countingDb>;
const open: http.ClientRequest[] = [];
/** While set, the outbox's head read (where a new stream starts) takes this long. */
let slowHeadMs = 0;
const slowHead = (db: Db): Db =>
  new Proxy(db, {
    get(target, k) {
      const v = Reflect.get(target, k, target) as unknown;
      if (k === 'query')
        return async (...a: unknown[]) => {
          if (slowHeadMs && /max\(seq\)/.test(String(a[0]))) await new Promise((r) => setTimeout(r, slowHeadMs));
          return (v as (...x: unknown[]) => unknown).apply(target, a);
        };
      return typeof v === 'function' ? (v as (...x: unknown[]) => unknown).bind(target) : v;
    },
  });

beforeAll(async () => {
  t = await startTestService(
    { webhooks: { maxStreams: 43, maxStreamsPerKey: 20, maxStreamsPerAddress: 21, streamShares: { perKeyClientPercent: 100 } } },
    { wrapDb: (db) => slowHead((counter = countingDb(db)).db) },
  );
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = (t.app.server.address() as AddressInfo).port;
}, 60_000);
afterAll(async () => {
  for (const r of open) r.destroy();
  await t?.close();
});
interface Stream {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  req: http.ClientRequest;
  /** Resolves with the data of the first `n` events this stream receives. */
  events(n: number): Promise<unknown[]>;
  close(): Promise<void>;
}

/** Opens GET /events from `from` (a loopback address of its own: a client address of its own). */
function stream(key: string, from = '127.0.0.1'): Promise<Stream> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/events', localAddress: from, headers: { 'x-access-key': key } }, (res) => {
      let buf = '';
      const got: unknown[] = [];
      let want: { n: number; done: (v: unknown[]) => void } | undefined;
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buf += chunk;
        let i: number;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const data = buf
            .slice(0, i)
            .split('\n')
            .find((l) => l.startsWith('data:'));
          buf = buf.slice(i + 2);
          if (data) got.push(JSON.parse(data.slice(5)).data);
        }
        if (want && got.length >= want.n) want.done(got.slice(0, want.n));
      });
      const s: Stream = {
        status: res.statusCode!,
        headers: res.headers,
        get body() {
          return buf;
        },
        req,
        events: (n) => new Promise((done) => (got.length >= n ? done(got.slice(0, n)) : (want = { n, done }))),
        close: () =>
          new Promise((done) => {
            res.on('close', () => done());
            req.destroy();
          }),
      };
      if (res.statusCode !== 200) res.on('end', () => resolve(s));
      else resolve(s);
    });
    open.push(req);
    req.on('error', reject);
  });
}

const keyOf = async (projectId: number) => (await t.services.accessKeys.create(projectId, `k-${Math.random()}`)).key;
const idle = () => new Promise((r) => setTimeout(r, 200));

describe('GET /events', () => {
  let other: { id: number };
  let mine: Stream[];

  it('a stream whose 200 has arrived gets an event written right after, though the reader looks at the head late', async () => {
    // The 200 went out before the stream was attached: an event written in between was counted in the
    // head the stream started after, and never sent (it hung CI's PostgreSQL run once).
    slowHeadMs = 400;
    const s = await stream(t.accessKey, '127.0.0.9');
    slowHeadMs = 0;
    expect(s.status).toBe(200);
    const got = s.events(1);
    await appendEvents(t.services.db, [{ type: 'metatxn.status', chainId: 1, projectId: t.project.id, subject: null, data: { n: 0 } }]);
    // Sequenced at once, as the delivery worker of any process may do.
    await t.services.events.outbox.sequence();
    t.services.events.bell.ring();
    expect(await got).toEqual([{ n: 0 }]);
    await s.close();
    // Its slot comes back once the server has seen the close; the caps below count from zero.
    for (let i = 0; i < 50 && t.services.events.streams.streams > 0; i++) await idle();
    expect(t.services.events.streams.streams).toBe(0);
  });

  it("delivers a new event to every open stream (only its project's) with a handful of reads, not one per stream", async () => {
    other = await t.services.projects.create(`streams-other-${Math.random()}`);
    const otherKey = await keyOf(other.id);
    mine = await Promise.all(Array.from({ length: 20 }, () => stream(t.accessKey)));
    const theirs = await Promise.all(Array.from({ length: 20 }, () => stream(otherKey, '127.0.0.2')));
    expect([...mine, ...theirs].map((x) => x.status)).toEqual(Array(40).fill(200));

    const reads = () => counter.statements.filter((q) => /FROM events WHERE seq >/.test(q)).length;
    const got = Promise.all([...mine, ...theirs].map((x) => x.events(1)));
    const before = reads();
    const ev = (projectId: number, n: number): NewEvent => ({ type: 'metatxn.status', chainId: 1, projectId, subject: null, data: { n } });
    await appendEvents(t.services.db, [ev(t.project.id, 1), ev(other.id, 2)]);
    t.services.events.bell.ring();
    const all = await got;
    expect(all.slice(0, 20)).toEqual(Array(20).fill([{ n: 1 }]));
    expect(all.slice(20)).toEqual(Array(20).fill([{ n: 2 }]));
    // One read serves all 40 streams (a poll or two may fall in between); a reader per stream made 40.
    expect(reads() - before).toBeLessThan(5);
  });

  it('refuses a stream past the per-key, per-address and per-process caps with 429 and Retry-After; a closed stream frees its slot', async () => {
    // Open: 20 of the project's key from 127.0.0.1, 20 of the other project's from 127.0.0.2.
    const [c, d, e] = await Promise.all([keyOf(t.project.id), keyOf(t.project.id), keyOf(t.project.id)]);
    const overKey = await stream(t.accessKey, '127.0.0.3');
    expect(overKey.status).toBe(429);
    expect(overKey.headers['retry-after']).toBe('30');
    expect(overKey.body).toMatch(/this access key already has 20 event streams open/);

    expect((await stream(c)).status).toBe(200);
    const overAddress = await stream(d);
    expect(overAddress.status).toBe(429);
    expect(overAddress.body).toMatch(/client address 127\.0\.0\.1 already has 21 event streams open/);

    expect((await stream(c, '127.0.0.3')).status).toBe(200);
    expect((await stream(d, '127.0.0.3')).status).toBe(200);
    const overProcess = await stream(e, '127.0.0.4');
    expect(overProcess.status).toBe(429);
    expect(overProcess.body).toMatch(/the server already has 43 event streams open/);

    await mine[0].close();
    // The server sees the close on its own time: the slot comes back once it has.
    let again: Stream | undefined;
    for (let i = 0; i < 50 && again?.status !== 200; i++) {
      if (i) await idle();
      again = await stream(e, '127.0.0.4');
    }
    expect(again!.status).toBe(200);
  });
});
