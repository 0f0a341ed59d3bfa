// What pipelining (pg ≥ 8.23, `pipeline: true`, src/store/postgres.ts) saves an intake-shaped transaction
// on PostgreSQL: BEGIN, three statements issued together (a lock, a look-up, a count), then a last
// statement with the COMMIT, each transaction on a pooled connection, four at once.
//
//   npx tsx bench/pg-pipeline.ts                 # PostgreSQL at 127.0.0.1:5432 (BENCH_PG_URL)
//
// Options: BENCH_TXNS (4 000 a round), BENCH_ROUNDS (2, serial and pipelined alternated). CPU of this
// process per transaction (process.cpuUsage) and of the database's server processes (/proc), wall time.
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';
import { envNumber, machineInfo, progress, runBench } from './lib/harness.ts';

const URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const TXNS = envNumber('BENCH_TXNS', 4000);
const ROUNDS = envNumber('BENCH_ROUNDS', 2);
const TICK_MS = 1000 / 100;

/** CPU ms of every process named postgres (the server's backends), from /proc. */
function postgresCpuMs(): number {
  let ticks = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (name !== 'postgres') continue;
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      /* gone meanwhile */
    }
  }
  return ticks * TICK_MS;
}

async function round(pipeline: boolean) {
  const pool = new pg.Pool({ connectionString: URL, max: 4, pipeline } as pg.PoolConfig);
  const one = async (i: number) => {
    const c = await pool.connect();
    try {
      const begun = c.query('BEGIN');
      begun.catch(() => undefined);
      if (!pipeline) await begun;
      const together = [
        c.query({ name: 'lock', text: 'SELECT pg_advisory_xact_lock(7, $1::int)', values: [i] }),
        c.query({ name: 'known', text: 'SELECT $1::text AS id WHERE $1::text = $2::text', values: ['a', 'b'] }),
        c.query({ name: 'count', text: 'SELECT count(*) FROM generate_series(1, $1::int)', values: [3] }),
      ];
      if (!pipeline) for (const q of together) await q;
      else await Promise.all(together);
      await Promise.all([begun, c.query({ name: 'last', text: 'SELECT $1::int AS n', values: [i] }), c.query('COMMIT')]);
    } finally {
      c.release();
    }
  };
  for (let i = 0; i < 200; i++) await one(i);
  const p0 = postgresCpuMs();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  let k = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (k < TXNS) await one(k++);
    }),
  );
  const cpu = process.cpuUsage(c0);
  const wallMs = performance.now() - t0;
  const pgMs = postgresCpuMs() - p0;
  await pool.end();
  const r = (x: number) => Math.round(x * 1000) / 1000;
  return { pipeline, processCpuMsPerTxn: r((cpu.user + cpu.system) / 1000 / TXNS), postgresCpuMsPerTxn: r(pgMs / TXNS), wallMsPerTxn: r(wallMs / TXNS) };
}

runBench(async () => {
  const rounds = [];
  for (let i = 0; i < ROUNDS; i++) {
    for (const pipeline of [false, true]) {
      const r = await round(pipeline);
      progress(`${pipeline ? 'pipelined' : 'serial   '}: process ${r.processCpuMsPerTxn} ms, PostgreSQL ${r.postgresCpuMsPerTxn} ms, wall ${r.wallMsPerTxn} ms a transaction`);
      rounds.push(r);
    }
  }
  return { bench: 'pg-pipeline', command: 'npx tsx bench/pg-pipeline.ts', txns: TXNS, machine: machineInfo(), rounds };
});
