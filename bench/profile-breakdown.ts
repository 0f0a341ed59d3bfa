// Where a server's CPU goes, from a V8 .cpuprofile (node --cpu-prof), by part of the request path.
//
//   npx tsx bench/profile-breakdown.ts <file.cpuprofile> [gapMs=1500]
//
// The cached-read bench loads the server in windows (1 s warm-up + the measured seconds) with idle
// gaps between them (its bare twin is measured then), so the profile's busy windows are found from
// the samples themselves and reported one by one, in the order the bench ran them. Each sample is
// given to the part of the code nearest its leaf that a rule below names (JSON.stringify called by
// pino is logging; a socket write called by fastify is node's HTTP). Idle samples are left out.
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

// First match from the leaf up wins; order matters only among rules that can match the same frame.
const RULES: Array<[string, (f: Node['callFrame']) => boolean]> = [
  ['child logger per request', (f) => f.url.includes('request-logger') || (f.url.includes('/pino/') && f.functionName === 'child')],
  [
    'logging (pino, redaction, request line)',
    (f) => /\/(pino|sonic-boom|fast-redact|@pinojs|pino-std-serializers)\//.test(f.url) || f.url.includes('telemetry/redact') || f.url.includes('telemetry/logger'),
  ],
  ['metrics (prom-client)', (f) => f.url.includes('/prom-client/') || f.url.includes('telemetry/metrics')],
  ['CORS', (f) => f.url.includes('/@fastify/cors/') || f.url.endsWith('/http/core/cors.ts')],
  ['drain guard', (f) => f.url.endsWith('/http/core/drain.ts')],
  ['response cache', (f) => f.url.includes('access/response-cache') || f.url.includes('http/fast-path')],
  ['access: key, auth, rate limit, networks', (f) => /access\/(authenticator|rate-limiter|allowed-networks)|(http\/(auth|access-pipeline)|util\/ip-buckets)\.ts/.test(f.url)],
  ['route: REST/RPC handler, send', (f) => /http\/(rest|webrpc|health)\.ts|http\/services\//.test(f.url)],
  ['app hooks (counter, request line)', (f) => f.url.endsWith('/http/app.ts')],
  ['PGlite (WASM, on the event loop)', (f) => f.url.includes('@electric-sql/pglite') || f.url.startsWith('wasm://')],
  ['pg client', (f) => /\/(pg|pg-protocol|pg-pool|pg-types)\//.test(f.url)],
  ['chain client (viem)', (f) => f.url.includes('/viem/') || f.url.includes('/ox/') || f.url.includes('/@noble/')],
  ['background: relayer, indexer, refresh, watcher, webhooks, events', (f) => /src\/(relayer|indexer|metadata|events|media|chain|store|webhooks|console)\//.test(f.url)],
  ['fastify core (routing, hooks, reply)', (f) => /\/(fastify|find-my-way|fast-querystring|light-my-request|avvio|@fastify\/[a-z-]+)\//.test(f.url)],
  ['node HTTP (parse, write, socket)', (f) => f.url.startsWith('node:') && /_http|http|net|stream|internal\/streams|events|buffer|timers/.test(f.url)],
  ['garbage collector', (f) => f.functionName === '(garbage collector)'],
  ['(program): native, kernel writes', (f) => f.functionName === '(program)'],
];
const OTHER = 'other';

function categorise(p: Profile): Map<number, string> {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const cat = new Map<number, string>();
  for (const n of p.nodes) {
    let found = OTHER;
    for (let id: number | undefined = n.id; id !== undefined; id = parent.get(id)) {
      const f = byId.get(id)!.callFrame;
      const rule = RULES.find(([, m]) => m(f));
      if (rule) {
        found = rule[0];
        break;
      }
    }
    cat.set(n.id, n.callFrame.functionName === '(idle)' ? 'idle' : found);
  }
  return cat;
}

const file = process.argv[2];
if (!file) throw new Error('usage: profile-breakdown.ts <file.cpuprofile> [gapMs]');
const gapMs = Number(process.argv[3] ?? 1500);
const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const cat = categorise(p);

// Sample times (ms from the profile's start) and categories.
let t = 0;
const samples = p.samples.map((id, i) => {
  t += p.timeDeltas[i] / 1000;
  return { t, c: cat.get(id)! };
});

// Busy windows: 250 ms bins with more than 40 % busy samples, merged across gaps shorter than gapMs.
const BIN = 250;
const bins = new Map<number, { busy: number; all: number }>();
for (const s of samples) {
  const b = Math.floor(s.t / BIN);
  const e = bins.get(b) ?? { busy: 0, all: 0 };
  e.all++;
  if (s.c !== 'idle') e.busy++;
  bins.set(b, e);
}
const busyBins = [...bins.entries()]
  .filter(([, e]) => e.busy / e.all > 0.4)
  .map(([b]) => b)
  .sort((a, b) => a - b);
const windows: Array<[number, number]> = [];
for (const b of busyBins) {
  const last = windows.at(-1);
  if (last && (b - last[1]) * BIN <= gapMs) last[1] = b;
  else windows.push([b, b]);
}
const loadWindows = windows.filter(([a, b]) => (b - a + 1) * BIN >= 3000);

function table(from: number, to: number, title: string) {
  const counts = new Map<string, number>();
  let busy = 0;
  for (const s of samples) {
    if (s.t < from || s.t >= to || s.c === 'idle') continue;
    busy++;
    counts.set(s.c, (counts.get(s.c) ?? 0) + 1);
  }
  console.log(`\n${title}: ${((to - from) / 1000).toFixed(1)} s, ${busy} busy samples`);
  for (const [c, n] of [...counts.entries()].sort((a, b) => b[1] - a[1])) console.log(`  ${((100 * n) / busy).toFixed(1).padStart(5)} %  ${c}`);
}

console.log(`${file}: ${samples.length} samples over ${(t / 1000).toFixed(1)} s; ${loadWindows.length} load windows`);
loadWindows.forEach(([a, b], i) => table(a * BIN, (b + 1) * BIN, `window ${i + 1} (${((a * BIN) / 1000).toFixed(1)}–${(((b + 1) * BIN) / 1000).toFixed(1)} s)`));
// Between windows: what the process does with no request load (background loops, timers).
if (loadWindows.length >= 2) {
  const idleCounts = new Map<string, number>();
  let all = 0;
  let ms = 0;
  for (let i = 1; i < loadWindows.length; i++) {
    const from = (loadWindows[i - 1][1] + 2) * BIN;
    const to = (loadWindows[i][0] - 1) * BIN;
    if (to <= from) continue;
    ms += to - from;
    for (const s of samples) {
      if (s.t < from || s.t >= to) continue;
      all++;
      if (s.c !== 'idle') idleCounts.set(s.c, (idleCounts.get(s.c) ?? 0) + 1);
    }
  }
  const busy = [...idleCounts.values()].reduce((a, b) => a + b, 0);
  console.log(`\nbetween windows (no load): ${(ms / 1000).toFixed(1)} s, busy ${((100 * busy) / Math.max(1, all)).toFixed(1)} % of samples`);
  for (const [c, n] of [...idleCounts.entries()].sort((a, b) => b[1] - a[1]).slice(0, 8)) console.log(`  ${((100 * n) / Math.max(1, all)).toFixed(1).padStart(5)} % of time  ${c}`);
}
