// Where a CPU profile's time went (bench/webhooks.ts BENCH_PROFILE=…, or node --cpu-prof):
//   node bench/lib/profile-summary.mjs <file.cpuprofile> [functionName,…]
// Self time by category (idle, GC, syscalls such as writev, the pg driver, node's HTTP client, each
// src/ file), the functions with the most self time, and the inclusive time of the functions named.
import { readFileSync } from 'node:fs';

const p = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const self = new Map();
let total = 0;
for (let i = 0; i < p.samples.length; i++) {
  const d = p.timeDeltas[i] ?? 0;
  total += d;
  self.set(p.samples[i], (self.get(p.samples[i]) ?? 0) + d);
}

function category(n) {
  const { url, functionName: f } = n.callFrame;
  if (f === '(idle)') return 'idle';
  if (f === '(garbage collector)') return 'gc';
  if (f === '(program)') return 'program';
  if (/node_modules\/pg/.test(url)) return 'pg driver';
  if (/_http_|node:http/.test(url)) return 'node http';
  if (/node:net|stream/.test(url)) return 'net/streams';
  if (/crypto/.test(url)) return 'crypto';
  if (/\/src\//.test(url)) return `src/${url.split('/src/')[1]}`;
  if (/\/bench\//.test(url)) return 'bench';
  // Native functions (syscalls such as writev show here by name).
  if (url === '') return `native: ${f}`;
  return url.replace(/.*node_modules\//, '').replace(/^node:internal\//, 'node internal: ');
}

const cats = new Map();
const fns = new Map();
for (const [id, t] of self) {
  const n = byId.get(id);
  const c = category(n);
  cats.set(c, (cats.get(c) ?? 0) + t);
  const k = `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.split('/').slice(-2).join('/')}:${n.callFrame.lineNumber}`;
  fns.set(k, (fns.get(k) ?? 0) + t);
}
const named = (process.argv[3] ?? '').split(',').filter(Boolean);
const inclusive = new Map();
for (const [id, t] of self) {
  // Each named function counted once per sample, however deep its recursion.
  const seen = new Set();
  for (let cur = id; cur != null; cur = parent.get(cur)) {
    const f = byId.get(cur).callFrame.functionName;
    if (named.includes(f) && !seen.has(f)) {
      seen.add(f);
      inclusive.set(f, (inclusive.get(f) ?? 0) + t);
    }
  }
}
const pct = (t) => `${((100 * t) / total).toFixed(1).padStart(5)} %`;
const top = (m, n) => [...m].sort((a, b) => b[1] - a[1]).slice(0, n);
console.log(`${(total / 1000).toFixed(0)} ms profiled`);
for (const [k, t] of top(cats, 25)) console.log(pct(t), k);
console.log('--- functions, self time');
for (const [k, t] of top(fns, 30)) console.log(pct(t), k);
if (named.length) {
  console.log('--- inclusive');
  for (const [k, t] of inclusive) console.log(pct(t), k);
}
