// Compare two V8 heap snapshots by what holds the memory: per constructor (objects, closures) or
// per kind (strings, code, arrays), the change in retained self size and count, largest first.
// Used with bench/relayer-memory.ts to tell a leak from a heap that V8 grows lazily.
//
//   npx tsx bench/heap-diff.ts /tmp/memory-start.heapsnapshot /tmp/memory-end.heapsnapshot [top=25]
import { readFileSync } from 'node:fs';

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
  nodes: number[];
  strings: string[];
}

function byKind(file: string): { kinds: Map<string, { n: number; bytes: number }>; total: number } {
  const s = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const fields = s.snapshot.meta.node_fields;
  const types = s.snapshot.meta.node_types[0];
  const width = fields.length;
  const [iType, iName, iSize] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const kinds = new Map<string, { n: number; bytes: number }>();
  let total = 0;
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + iType]];
    const key = type === 'object' || type === 'closure' ? `${type}:${s.strings[s.nodes[i + iName]]}` : type.endsWith('string') ? 'string' : type;
    const k = kinds.get(key) ?? { n: 0, bytes: 0 };
    k.n++;
    k.bytes += s.nodes[i + iSize];
    total += s.nodes[i + iSize];
    kinds.set(key, k);
  }
  return { kinds, total };
}

const [a, b, top = '25'] = process.argv.slice(2);
if (!a || !b) throw new Error('usage: npx tsx bench/heap-diff.ts <before.heapsnapshot> <after.heapsnapshot> [top]');
const before = byKind(a);
const after = byKind(b);
const rows = [...after.kinds].map(([kind, v]) => {
  const o = before.kinds.get(kind) ?? { n: 0, bytes: 0 };
  return { kind, bytes: v.bytes - o.bytes, count: v.n - o.n, now: v.n };
});
rows.sort((x, y) => y.bytes - x.bytes);
process.stdout.write(`${JSON.stringify({ totalMbBefore: +(before.total / 1e6).toFixed(1), totalMbAfter: +(after.total / 1e6).toFixed(1), grewMost: rows.slice(0, Number(top)) }, null, 2)}\n`);
