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
