// The house drawing's figures (docs/architecture.md): import circles in src/ (type imports included),
// files over 500 lines, and which files write each table (INSERT/UPDATE/DELETE). `node scripts/house.mjs`.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';

const root = new URL('../src', import.meta.url).pathname;
const files = new Map();
(function walk(dir) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p);
    else if (p.endsWith('.ts')) files.set(p, readFileSync(p, 'utf8'));
  }
})(root);

const edges = new Map();
const IMPORT = /(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\s+from\s+)?['"](\.[^'"]+)['"]/gs;
for (const [p, text] of files) {
  const to = new Set();
  for (const m of text.matchAll(IMPORT)) {
    const t = normalize(join(dirname(p), m[1]));
    if (files.has(t)) to.add(t);
  }
  edges.set(p, to);
}

// Tarjan's strongly connected components: each of more than one file is a circle.
let index = 0;
const idx = new Map();
const low = new Map();
const stack = [];
const on = new Set();
const circles = [];
function visit(v) {
  idx.set(v, index);
  low.set(v, index++);
  stack.push(v);
  on.add(v);
  for (const w of edges.get(v)) {
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
      c.push(relative(root, w));
    } while (w !== v);
    if (c.length > 1) circles.push(c.sort());
  }
}
for (const v of edges.keys()) if (!idx.has(v)) visit(v);

const long = [...files].map(([p, t]) => [relative(root, p), t.split('\n').length - 1]).filter(([, n]) => n > 500);
const writers = new Map();
for (const [p, text] of files) {
  for (const m of text.matchAll(/\b(?:INSERT INTO|UPDATE|DELETE FROM)\s+([a-z_]+)\b/g)) {
    if (!writers.has(m[1])) writers.set(m[1], new Set());
    writers.get(m[1]).add(relative(root, p));
  }
}

console.log(`import circles: ${circles.length}`);
for (const c of circles) console.log(`  ${c.join(' <-> ')}`);
console.log(`files over 500 lines: ${long.length}`);
for (const [p, n] of long) console.log(`  ${p} (${n})`);
console.log('tables written from more than one file:');
for (const [t, ws] of [...writers].sort()) if (ws.size > 1) console.log(`  ${t}: ${[...ws].join(', ')}`);
