// The house as data (docs/architecture.md#measured): every import between files of src/ (type imports,
// re-exports and dynamic import() included) and what each floor may import. Read by scripts/house.mjs
// (the printed figures) and test/layering.test.ts (the rules, in `npm test`).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';

export const SRC = new URL('../src', import.meta.url).pathname;

/** src/ files (relative paths) and their text. */
export function readSources(root = SRC) {
  const files = new Map();
  (function walk(dir) {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (p.endsWith('.ts')) files.set(relative(root, p), readFileSync(p, 'utf8'));
    }
  })(root);
  return files;
}

const STATIC = /(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\s+from\s+)?['"](\.[^'"]+)['"]/gs;
const DYNAMIC = /\bimport\(\s*['"](\.[^'"]+)['"]\s*\)/g;

/** Each file's imports of other src/ files: Map<file, Set<file>>. */
export function importGraph(files) {
  const edges = new Map();
  for (const [p, text] of files) {
    const to = new Set();
    for (const re of [STATIC, DYNAMIC])
      for (const m of text.matchAll(re)) {
        const t = normalize(join(dirname(p), m[1]));
        if (files.has(t) && t !== p) to.add(t);
      }
    edges.set(p, to);
  }
  return edges;
}

/** Strongly connected components of more than one file (Tarjan): the import circles. */
export function circles(edges) {
  let index = 0;
  const idx = new Map();
  const low = new Map();
  const stack = [];
  const on = new Set();
  const out = [];
  const visit = (v) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const c = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        c.push(w);
      } while (w !== v);
      if (c.length > 1) out.push(c.sort());
    }
  };
  for (const v of edges.keys()) if (!idx.has(v)) visit(v);
  return out;
}

/** The floors, lowest first. A file may import its own folder, any lower floor, and a domain's front door. */
export const FLOORS = {
  ground: ['util', 'telemetry', 'store', 'chain', 'config', 'untrusted', 'version.ts', 'common.ts'],
  domain: ['access', 'prices', 'metadata', 'media', 'collections', 'relayer', 'indexer', 'events'],
  face: ['http', 'console', 'cli'],
  wiring: ['services.ts'],
  kit: ['devchain'],
};
const floorOf = (top) => Object.entries(FLOORS).find(([, tops]) => tops.includes(top))?.[0];
export const topOf = (file) => (file.includes('/') ? file.split('/')[0] : file);

/**
 * Imports that break the house's rules, as "from -> to: rule":
 * - the ground floor imports nothing above it;
 * - a domain imports another domain only through its front door (`<domain>/index.ts`), and no face,
 *   the wiring or the dev kit;
 * - `http/` imports no other face; the console takes the wire layer's shared core through `http/index.ts`
 *   only (the CLI mounts the console on the app); the wiring imports no face.
 */
export function brokenRules(edges) {
  const out = [];
  for (const [from, tos] of edges) {
    const a = topOf(from);
    const fa = floorOf(a);
    for (const to of tos) {
      const b = topOf(to);
      if (a === b) continue;
      const fb = floorOf(b);
      if (fa === 'ground' && fb !== 'ground') out.push(`${from} -> ${to}: the ground floor imports nothing above it`);
      else if (fa === 'domain' && (fb === 'face' || fb === 'wiring' || fb === 'kit')) out.push(`${from} -> ${to}: a domain imports no face, wiring or dev kit`);
      else if (fa === 'domain' && fb === 'domain' && to !== `${b}/index.ts`) out.push(`${from} -> ${to}: a domain meets another through its front door (${b}/index.ts)`);
      else if (fa === 'face' && fb === 'face' && a !== 'cli' && !(a === 'console' && to === 'http/index.ts'))
        out.push(`${from} -> ${to}: http/ imports no other face, the console only http/ through its front door (http/index.ts)`);
      else if (fa === 'wiring' && fb === 'face') out.push(`${from} -> ${to}: the wiring imports no face`);
    }
  }
  return out.sort();
}

/** Files that write each table (INSERT/UPDATE/DELETE in their SQL): Map<table, Set<file>>. */
export function tableWriters(files) {
  const writers = new Map();
  for (const [p, text] of files)
    for (const m of text.matchAll(/\b(?:INSERT INTO|UPDATE|DELETE FROM)\s+([a-z_]+)\b/g)) {
      if (!writers.has(m[1])) writers.set(m[1], new Set());
      writers.get(m[1]).add(p);
    }
  return writers;
}

/** Files over `max` lines: [file, lines]. */
export const longFiles = (files, max = 500) => [...files].map(([p, t]) => [p, t.split('\n').length - 1]).filter(([, n]) => n > max);

/** Folders with more than `max` source files directly in them: [folder, count]. */
export function crowdedFolders(files, max = 24) {
  const count = new Map();
  for (const p of files.keys()) count.set(dirname(p), (count.get(dirname(p)) ?? 0) + 1);
  return [...count].filter(([, n]) => n > max);
}
