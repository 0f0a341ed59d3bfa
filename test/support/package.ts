// The npm package as an operator gets it: `npm pack` of the checkout (its prepack builds) and
// `npm install --omit=dev` of the tarball into an empty app. That takes minutes on the loaded 2-core
// machine, and `npm test` ran it twice (once per database half) on the same sources: it is done once
// per content of what it is made of (PACK_INPUTS, node and npm) and per 12 h (a dependency's new
// release reaches the install no later than that), kept in os.tmpdir().
//
// Where it lives matters: out of any node_modules tree, so the installed package resolves its
// dependencies from its own node_modules only, as an operator's would (never from the checkout's,
// which holds the dev dependencies). Each test runs it from a folder of its own whose node_modules
// links to the installed one, so the cached install is never written to.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { abandoned, files } from './cache-lock.ts';

// npm run from `npm test` exports its own settings (npm_config_*): a nested npm must not inherit them.
export const cleanEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith('npm_')));

export function sh(cmd: string, args: string[], cwd: string, env: Record<string, string> = {}) {
  const r = spawnSync(cmd, args, { cwd, env: { ...cleanEnv, ...env }, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

// What `npm pack` needs of the checkout. The pack builds (prepack) in a copy, so it never empties the
// checkout's dist/ under another test serving the console page from it.
const PACK_INPUTS = [
  'bin',
  'console',
  'contracts',
  'scripts',
  'src',
  'package.json',
  'package-lock.json',
  'tsconfig.json',
  'tsconfig.build.json',
  'README.md',
  'docs',
  'LICENSE',
  'metarelay.example.json',
];

const CACHE = join(tmpdir(), 'metarelay-package-cache');
const PERIOD_MS = 12 * 3_600_000;
/**
 * A package unused for this long is deleted (each is a few hundred MB). Longer than a package
 * test lasts, so none is deleted under a run using it (another worktree's, of other sources).
 */
const UNUSED_MS = 3_600_000;

export interface PackedPackage {
  /** The tarball's paths, without the leading package/. */
  files: string[];
  /** npm install's stdout and stderr. */
  installOutput: string;
  /** The copy's package.json after `npm pack` (postpack must have put `prepare` back). */
  packedFromManifest: string;
  /** node_modules of the app the tarball was installed into. */
  nodeModules: string;
  packMs: number;
  installMs: number;
  /** Made by this call, not found in the cache. */
  fresh: boolean;
}

function contentKey(): string {
  const h = createHash('sha256').update(`node ${process.version}\0npm ${sh('npm', ['--version'], tmpdir()).trim()}\0`);
  for (const f of PACK_INPUTS.flatMap((i) => files(resolve(i))))
    h.update(relative(resolve('.'), f))
      .update('\0')
      .update(readFileSync(f))
      .update('\0');
  return h.digest('hex').slice(0, 16);
}

/** Packs the checkout and installs the tarball into an empty app, all under `dir`. */
function packAndInstall(dir: string): Omit<PackedPackage, 'fresh'> {
  const src = join(dir, 'src-copy');
  mkdirSync(src, { recursive: true });
  for (const f of PACK_INPUTS) cpSync(resolve(f), join(src, f), { recursive: true });
  symlinkSync(resolve('node_modules'), join(src, 'node_modules'), 'dir');
  const tPack = performance.now();
  const tgz = sh('npm', ['pack', '--silent', '--pack-destination', dir], src).trim().split('\n').pop()!;
  const packMs = Math.round(performance.now() - tPack);
  const packed = sh('tar', ['-tzf', join(dir, tgz)], dir)
    .trim()
    .split('\n')
    .map((f) => f.replace(/^package\//, ''));
  const packedFromManifest = readFileSync(join(src, 'package.json'), 'utf8');
  rmSync(src, { recursive: true, force: true });

  const app = join(dir, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'operator', private: true }));
  const tInstall = performance.now();
  const installed = spawnSync('npm', ['install', '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund', join(dir, tgz)], { cwd: app, env: cleanEnv, encoding: 'utf8' });
  const installOutput = `${installed.stdout}\n${installed.stderr}`;
  if (installed.status !== 0) throw new Error(`npm install of the tarball failed (${installed.status}):\n${installOutput}`);
  const installMs = Math.round(performance.now() - tInstall);
  return { files: packed, installOutput, packedFromManifest, nodeModules: join(app, 'node_modules'), packMs, installMs };
}

function prune(current: string) {
  for (const f of readdirSync(CACHE)) {
    const path = join(CACHE, f);
    // Locks are judged by their holder (packedAndInstalled).
    if (path === current || f.endsWith('.lock')) continue;
    try {
      if (Date.now() - statSync(path).mtimeMs > UNUSED_MS) rmSync(path, { recursive: true, force: true });
    } catch {
      // gone already
    }
  }
}

const RECORD = 'packed.json';

/**
 * The checkout packed and installed (from the cache when this content was, in this 12 h period).
 * One process packs at a time: a lock folder holding its pid; a packer that died leaves a lock its
 * pid no longer holds.
 */
export async function packedAndInstalled(): Promise<PackedPackage> {
  mkdirSync(CACHE, { recursive: true });
  const dir = join(CACHE, `${contentKey()}-${Math.floor(Date.now() / PERIOD_MS)}`);
  const lock = `${dir}.lock`;
  const deadline = Date.now() + 900_000;
  for (;;) {
    if (existsSync(join(dir, RECORD))) {
      // Used now: not pruned for the next hour.
      const now = new Date();
      utimesSync(dir, now, now);
      return { ...(JSON.parse(readFileSync(join(dir, RECORD), 'utf8')) as Omit<PackedPackage, 'fresh'>), fresh: false };
    }
    try {
      mkdirSync(lock);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      if (abandoned(lock)) rmSync(lock, { recursive: true, force: true });
      if (Date.now() > deadline) throw new Error(`the package at ${dir} was not packed in 900 s (lock ${lock})`);
      await new Promise((r) => setTimeout(r, 1_000));
      continue;
    }
    try {
      writeFileSync(join(lock, 'pid'), String(process.pid));
      if (existsSync(join(dir, RECORD))) continue;
      const tmp = mkdtempSync(`${dir}.tmp-`);
      try {
        const made = packAndInstall(tmp);
        // The path as it is once renamed.
        const record = { ...made, nodeModules: join(dir, relative(tmp, made.nodeModules)) };
        writeFileSync(join(tmp, RECORD), JSON.stringify(record));
        renameSync(tmp, dir);
        prune(dir);
        return { ...record, fresh: true };
      } finally {
        rmSync(tmp, { recursive: true, force: true });
      }
    } finally {
      rmSync(lock, { recursive: true, force: true });
    }
  }
}

export interface InstalledApp {
  /** A folder of the test's own, deleted with remove(). */
  work: string;
  /** The operator's app folder: package.json, and node_modules linking to the installed one. */
  app: string;
  /** node_modules/.bin/metarelay of the installed tarball. */
  bin: string;
  remove(): void;
}

/** A fresh app folder running the installed package. */
export function appOf(pkg: PackedPackage): InstalledApp {
  const work = mkdtempSync(join(tmpdir(), 'metarelay-pkg-'));
  const app = join(work, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'operator', private: true }));
  symlinkSync(pkg.nodeModules, join(app, 'node_modules'), 'dir');
  return { work, app, bin: join(app, 'node_modules', '.bin', 'metarelay'), remove: () => rmSync(work, { recursive: true, force: true }) };
}
