// What the per-key rate limiter costs: the same keyed request, from a key without a limit (no
// database write) and from a key whose limit is never reached (one atomic UPDATE ... RETURNING per
// request), in alternating rounds of one run. Every limited request hits the same bucket row, the
// worst case for row-lock contention.
//
//   npx tsx bench/rate-limit.ts                      # PGlite in a temp folder
//   BENCH_DB=postgres npx tsx bench/rate-limit.ts
//   BENCH_SECONDS=5 BENCH_ROUNDS=2 BENCH_CONNECTIONS=20
//
// Result JSON on stdout; progress on stderr.
import { parseConfig } from '../src/config/load.ts';
import { buildApp } from '../src/cli/app.ts';
import { createServices } from '../src/services.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { closeNow, dbKindFromEnv, envNumber, machineInfo, openBenchDb, progress, runBench, type Cleanup } from './lib/harness.ts';
import { startLoadGenerator, type LoadSummary } from './lib/load.ts';

runBench(async (cleanup: Cleanup) => {
  const seconds = envNumber('BENCH_SECONDS', 5);
  const rounds = envNumber('BENCH_ROUNDS', 2);
  const connections = envNumber('BENCH_CONNECTIONS', 20);
  const dbKind = dbKindFromEnv();
  const bdb = await openBenchDb(dbKind, cleanup);
  const services = await createServices(parseConfig({ database: bdb.location, logLevel: 'silent' }), { db: bdb.db, log: createLogger('silent'), migrate: false });
  cleanup.add('close services', () => services.close());
  const app = await buildApp(services);
  cleanup.add('close http', () => closeNow(app));
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as { port: number }).port;

  const project = await services.projects.create('bench');
  const free = (await services.accessKeys.create(project.id, 'no limit')).key;
  const limitedKey = await services.accessKeys.create(project.id, 'limited');
  // A bucket far larger than the run can drain: every request pays for the check, none is refused.
  await services.db.query('UPDATE access_keys SET rate_per_sec = 1e9, rate_burst = 1000000000 WHERE id = $1', [limitedKey.info.id]);
  const limited = limitedKey.key;

  const load = startLoadGenerator();
  cleanup.add('stop load generator', () => load.stop());
  // Version with a key: the key is checked (and limited) and the answer is tiny, so the limiter's share shows.
  const target = (key: string) => ({ url: `http://127.0.0.1:${port}/rpc/Metadata/Version`, method: 'POST' as const, headers: { 'content-type': 'application/json', 'x-access-key': key }, body: '{}' });

  progress('warm-up');
  await load.run(target(free), { connections, seconds: 1 });
  await load.run(target(limited), { connections, seconds: 1 });

  const runs: { without: LoadSummary[]; with: LoadSummary[] } = { without: [], with: [] };
  for (let i = 0; i < rounds; i++) {
    progress(`round ${i + 1}/${rounds}: without limiter`);
    runs.without.push(await load.run(target(free), { connections, seconds }));
    progress(`round ${i + 1}/${rounds}: with limiter`);
    runs.with.push(await load.run(target(limited), { connections, seconds }));
  }
  const sum = (xs: LoadSummary[]) => ({
    rps: Math.round(xs.reduce((a, x) => a + x.rps, 0) / xs.length),
    p50Ms: Math.max(...xs.map((x) => x.p50Ms)),
    p99Ms: Math.max(...xs.map((x) => x.p99Ms)),
    non2xx: xs.reduce((a, x) => a + x.non2xx, 0),
    requests: xs.reduce((a, x) => a + x.requests, 0),
  });
  const without = sum(runs.without);
  const withLimiter = sum(runs.with);
  return {
    bench: 'rate-limit',
    db: dbKind,
    connections,
    secondsPerRun: seconds,
    rounds,
    withoutLimiter: without,
    withLimiter,
    throughputRatio: Math.round((withLimiter.rps / without.rps) * 1000) / 1000,
    machine: machineInfo(),
  };
});
