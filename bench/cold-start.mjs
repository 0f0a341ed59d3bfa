// Cold start of `metarelay serve` to its first 200 from /ready, for an installed package or a checkout.
//   node bench/cold-start.mjs <folder holding node_modules/.bin/metarelay, or a checkout> [runs=3]
// Plain node (no tsx), so it measures an installed tarball as an operator runs it. It starts its own
// anvil and a throwaway PostgreSQL database (METARELAY_TEST_PG_URL, default postgres@127.0.0.1:5432),
// migrates once, then times `runs` starts and prints each time and the median.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createRequire } from 'node:module';

const here = createRequire(import.meta.url);
const pg = here('pg');
const dir = resolve(process.argv[2] ?? '.');
const runs = Number(process.argv[3] ?? 3);
const bin = [join(dir, 'node_modules/.bin/metarelay'), join(dir, 'bin/metarelay.mjs')].find(existsSync);
if (!bin) throw new Error(`no metarelay binary under ${dir}`);

const freePort = () =>
  new Promise((r) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => r(port));
    });
  });

const anvilBin = process.env.METARELAY_ANVIL ?? join(dirnameOf(here.resolve('@foundry-rs/anvil-linux-amd64/package.json')), 'bin/anvil');
function dirnameOf(p) {
  return p.slice(0, p.lastIndexOf('/'));
}
const anvilPort = await freePort();
const anvil = spawn(anvilBin, ['--host', '127.0.0.1', '--port', String(anvilPort)], { stdio: 'ignore' });

const base = new URL(process.env.METARELAY_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
const name = `metarelay_coldstart_${process.pid}`;
const admin = new pg.Client({ connectionString: base.toString() });
await admin.connect();
await admin.query(`CREATE DATABASE ${name}`);
const dbUrl = new URL(base);
dbUrl.pathname = `/${name}`;

const port = await freePort();
const cfgDir = mkdtempSync(join(tmpdir(), 'metarelay-coldstart-'));
const cfg = join(cfgDir, 'metarelay.json');
writeFileSync(cfg, JSON.stringify({ port, database: dbUrl.toString(), logLevel: 'warn', chains: [{ chainId: 31337, name: 'anvil', rpcUrls: [`http://127.0.0.1:${anvilPort}`] }] }));

try {
  const m = spawnSync(process.execPath, [bin, 'migrate', '--config', cfg], { encoding: 'utf8' });
  if (m.status !== 0) throw new Error(`migrate failed: ${m.stderr}`);
  const times = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const child = spawn(process.execPath, [bin, 'serve', '--config', cfg], { stdio: 'ignore' });
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/ready`).then((r) => r.status === 200, () => false);
      if (ok) break;
      if (child.exitCode !== null) throw new Error(`serve exited ${child.exitCode}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    times.push(Math.round(performance.now() - t0));
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
  const sorted = [...times].sort((a, b) => a - b);
  console.log(JSON.stringify({ bin, runs: times, medianMs: sorted[Math.floor(sorted.length / 2)] }));
} finally {
  anvil.kill();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
}
