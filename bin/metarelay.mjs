#!/usr/bin/env node
// A checkout (src/ present, tsx installed as a dev dependency) runs the TypeScript sources through tsx,
// so `npm start` needs no build and never runs a stale one. An installed package has no src/ and no
// tsx: it runs the compiled dist/ with plain node. METARELAY_FROM=dist forces the build in a checkout.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';

const root = new URL('../', import.meta.url);
const fromSource = process.env.METARELAY_FROM !== 'dist' && existsSync(new URL('src/cli/main.ts', root)) && resolvable('tsx');

function resolvable(name) {
  try {
    createRequire(import.meta.url).resolve(`${name}/package.json`);
    return true;
  } catch {
    return false;
  }
}

// npm runs a package's bin (`npx metarelay serve`) through `sh -c`, and forwards SIGTERM/SIGINT to that
// shell only; dash dies of it without passing it on, npm exits 143, and the server, re-parented, would
// keep the port and relay with no drain. So a long-running command started by npm takes the loss of
// its parent as the signal it never got. (`npm run serve` execs node, so npm signals it directly.)
const LONG_RUNNING = new Set(['serve', 'relayer', 'worker', 'dev']);
if ((process.env.npm_lifecycle_event || process.env.npm_command) && LONG_RUNNING.has(process.argv[2])) {
  const parent = process.ppid;
  const watch = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(watch);
    process.kill(process.pid, 'SIGTERM');
  }, 200);
  // It must not keep a finished command alive.
  watch.unref();
}

let main;
if (fromSource) {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import('../src/cli/main.ts'));
} else if (existsSync(new URL('dist/cli/main.js', root))) {
  // Stack traces point at the TypeScript lines (the maps carry the sources).
  process.setSourceMapsEnabled(true);
  ({ main } = await import('../dist/cli/main.js'));
} else {
  console.error('metarelay: no build found (dist/cli/main.js); run `npm run build`, or `npm install` for the dev dependencies');
  process.exit(1);
}
await main(process.argv.slice(2));
