// A second client's stream while an attacker resumes GET /events from position 1 again and again
// (issue 54, finding 5): the victim's time from opening a resume 10 events back to having those 10, unloaded
// and under the flood, and how many outbox events the flood made the database read. The attacker rotates
// the addresses of its /24, so a per-address reconnect limit alone does not stop it. Runs on any version
// of the service (it sets no new config), so before/after compare like for like.
//
//   npx tsx bench/stream-resume-flood.ts            # PGlite in a temp folder
//   BENCH_DB=postgres npx tsx bench/stream-resume-flood.ts
//
// Result JSON on stdout; progress on stderr.
import http from 'node:http';
import { appendEvents, type NewEvent } from '../src/events/outbox.ts';
import { dbKindFromEnv, envNumber, machineInfo, openBenchDb, progress, runBench, startChain, startMetarelay, type Cleanup } from './lib/harness.ts';

const EVENTS = envNumber('BENCH_EVENTS', 20_000);
const VICTIM_RESUMES = 10;
const ATTACKERS = 4;

function p50(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
}

runBench(async (cleanup: Cleanup) => {
  const chain = await startChain(cleanup);
  const db = await openBenchDb(dbKindFromEnv(), cleanup);
  const mr = await startMetarelay(chain, db, cleanup, { config: { webhooks: { maxStreams: 10_000, maxStreamsPerKey: 10_000, maxStreamsPerAddress: 10_000 } } });
  const port = Number(new URL(mr.baseUrl).port);
  const projectId = Number((await mr.services.db.query<{ id: number }>(`SELECT id FROM projects WHERE name = 'bench'`)).rows[0].id);
  const ev = (n: number): NewEvent => ({ type: 'metatxn.status', chainId: chain.anvil.chainId, projectId, subject: null, data: { n, pad: 'x'.repeat(200) } });
  for (let i = 0; i < EVENTS; i += 2_000)
    await appendEvents(
      mr.services.db,
      Array.from({ length: Math.min(2_000, EVENTS - i) }, (_, k) => ev(i + k)),
    );
  while ((await mr.services.events.outbox.sequence()) > 0);
  const head = await mr.services.events.outbox.head();
  progress(`${EVENTS} events in the outbox (head ${head})`);

  /** Opens a resume from `after` at `from`; resolves after `want` messages (or the first, or a refusal) with the time taken. */
  const resume = (from: string, after: number, want: number) =>
    new Promise<{ ms: number; status: number; messages: number }>((resolve, reject) => {
      const t0 = performance.now();
      const req = http.get({ host: '127.0.0.1', port, path: '/events', localAddress: from, headers: { 'x-access-key': mr.accessKey, 'last-event-id': String(after) } }, (res) => {
        let messages = 0;
        const done = () => {
          req.destroy();
          resolve({ ms: performance.now() - t0, status: res.statusCode ?? 0, messages });
        };
        if (res.statusCode !== 200) return done();
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          messages += chunk.split('\n\n').length - 1;
          if (messages >= want) done();
        });
        res.on('end', done);
      });
      req.on('error', reject);
    });

  const victimRun = async () => {
    const ms: number[] = [];
    for (let i = 0; i < VICTIM_RESUMES; i++) ms.push((await resume('127.0.5.1', head - 10, 10)).ms);
    return ms;
  };
  const unloaded = await victimRun();
  progress(`unloaded: victim p50 ${p50(unloaded).toFixed(0)} ms`);

  // The flood: ATTACKERS loops, each resuming from position 1 and hanging up after what it gets in 1.5 s
  // or all of it, rotating through the addresses of 127.0.4.0/24.
  let stop = false;
  let resumes = 0;
  let refused = 0;
  let messagesRead = 0;
  let next = 1;
  const flood = Array.from({ length: ATTACKERS }, async () => {
    while (!stop) {
      const from = `127.0.4.${(next++ % 250) + 1}`;
      const r = await Promise.race([resume(from, 1, EVENTS), new Promise<null>((done) => setTimeout(() => done(null), 1_500))]);
      resumes++;
      if (r && r.status !== 200) {
        refused++;
        await new Promise((done) => setTimeout(done, 200));
      } else if (r) messagesRead += r.messages;
    }
  });
  await new Promise((r) => setTimeout(r, 1_000));
  const attacked = await victimRun();
  stop = true;
  await Promise.all(flood);
  progress(`attacked: victim p50 ${p50(attacked).toFixed(0)} ms; ${resumes} attacker resumes (${refused} refused), ${messagesRead} messages sent to it`);

  return {
    bench: 'stream-resume-flood',
    machine: machineInfo(),
    events: EVENTS,
    unloaded: { victimP50Ms: Math.round(p50(unloaded)) },
    attacked: { victimP50Ms: Math.round(p50(attacked)), attackerResumes: resumes, attackerRefused: refused, attackerMessages: messagesRead },
  };
});
