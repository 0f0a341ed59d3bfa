// The CLI the tests spawn: src/ compiled to JavaScript (tsc, emit only, as `npm run build` does), run by
// plain node like the installed package, instead of the checkout's bin loading every module through
// tsx's loader (0.8 s of CPU more per call, seconds per `metarelay dev`). Built once per content of
// what it is made of and shared by every test process, every run and both database halves of
// `npm test`: a folder named by that content's hash, renamed into place whole, by one builder at a
// time (a lock folder; a builder that died leaves a lock its pid no longer holds).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative, resolve } from 'node:path';
import { abandoned, files } from './cache-lock.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const CACHE = join(ROOT, 'node_modules/.cache/metarelay');
/** What the build is made of: it is rebuilt when any of these changes. */
const INPUTS = ['src', 'bin', 'package.json', 'tsconfig.json', 'tsconfig.build.json'];

function contentHash(): string {
  // The checkout's path too: the build links to its contracts/, examples/ and console page, and
  // worktrees may share one node_modules.
  const h = createHash('sha256')
    .update(ROOT)
    .update(readFileSync(join(ROOT, 'node_modules/typescript/package.json')));
  for (const f of INPUTS.flatMap((i) => files(join(ROOT, i)))) h.update(relative(ROOT, f)).update('\0').update(readFileSync(f)).update('\0');
  return h.digest('hex').slice(0, 16);
}

function build(dir: string) {
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  const tsc = createRequire(join(ROOT, 'package.json')).resolve('typescript/bin/tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', join(tmp, 'dist')], { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`tsc (the CLI build for the tests) failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  // As scripts/build.mjs lays it out: migrations beside migrate.js, PGlite's worker beside pglite.js.
  cpSync(join(ROOT, 'src/store/migrations'), join(tmp, 'dist/store/migrations'), { recursive: true });
  cpSync(join(ROOT, 'src/store/pglite-worker.mjs'), join(tmp, 'dist/store/pglite-worker.mjs'));
  cpSync(join(ROOT, 'bin'), join(tmp, 'bin'), { recursive: true });
  cpSync(join(ROOT, 'package.json'), join(tmp, 'package.json'));
  // What the code reads beside itself, live from the checkout as the sources read it: the contracts
  // dev compiles (its compile cache is keyed by their content), the example the banner names, and the
  // console page `npm install` built. Modules resolve up the tree to the checkout's node_modules.
  for (const f of ['contracts', 'examples', 'dist/console-page']) {
    if (existsSync(join(ROOT, f))) symlinkSync(join(ROOT, f), join(tmp, f), 'dir');
  }
  writeFileSync(join(tmp, 'BUILT-FOR-TESTS'), 'test/support/build.ts: src/ compiled for the CLI tests; safe to delete.\n');
  try {
    renameSync(tmp, dir);
  } catch (err) {
    // Another run (a worktree sharing node_modules) renamed the same build into place first.
    rmSync(tmp, { recursive: true, force: true });
    if (!existsSync(join(dir, 'bin/metarelay.mjs'))) throw err;
  }
}

/** Builds older than a day, from earlier contents: each is a few MB. */
function prune(keep: string) {
  const dayAgo = Date.now() - 86_400_000;
  for (const f of readdirSync(CACHE)) {
    if (!f.startsWith('cli-build-') || join(CACHE, f) === keep || f.includes('.lock')) continue;
    try {
      if (statSync(join(CACHE, f)).mtimeMs < dayAgo) rmSync(join(CACHE, f), { recursive: true, force: true });
    } catch {
      // gone already
    }
  }
}

let built: string | undefined;

/** Blocks the thread (a test process waiting for another's build has nothing else to do). */
const sleepSync = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/**
 * The path of the built bin/metarelay.mjs for the current sources, building it first if needed
 * (synchronous: startCli hands back its process at once).
 */
export function builtBin(): string {
  if (built) return built;
  const dir = join(CACHE, `cli-build-${contentHash()}`);
  const bin = join(dir, 'bin/metarelay.mjs');
  mkdirSync(CACHE, { recursive: true });
  const lock = `${dir}.lock`;
  const deadline = Date.now() + 300_000;
  while (!existsSync(bin)) {
    try {
      mkdirSync(lock);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      if (abandoned(lock)) rmSync(lock, { recursive: true, force: true });
      if (Date.now() > deadline) throw new Error(`the CLI build at ${dir} was not finished in 300 s (lock ${lock})`);
      sleepSync(200);
      continue;
    }
    try {
      writeFileSync(join(lock, 'pid'), String(process.pid));
      if (!existsSync(bin)) {
        build(dir);
        prune(dir);
      }
    } finally {
      rmSync(lock, { recursive: true, force: true });
    }
  }
  built = bin;
  return bin;
}
