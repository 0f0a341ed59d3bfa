#!/usr/bin/env node
// Sums and sorts the per-file CPU that METARELAY_TEST_CPU=FILE wrote (test/support/cpu-profile.ts):
//   METARELAY_TEST_CPU=/tmp/cpu.jsonl METARELAY_TEST_DB=pglite npx vitest run test/cli.test.ts
//   node scripts/test-cpu.mjs /tmp/cpu.jsonl [more.jsonl]
// A file seen more than once (several runs appended to one file) shows each figure and their median.
// The figure is the file's hooks and tests (cpuS); the imports before them (importS) are summed apart.
import { readFileSync } from 'node:fs';

const inputs = process.argv.slice(2);
if (inputs.length === 0) {
  console.error('usage: node scripts/test-cpu.mjs <cpu.jsonl> [...]');
  process.exit(2);
}
const byFile = new Map();
let imports = 0;
for (const input of inputs) {
  for (const line of readFileSync(input, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const { file, cpuS, importS = 0, db } = JSON.parse(line);
    imports += importS;
    const key = `${file} (${db})`;
    byFile.set(key, [...(byFile.get(key) ?? []), cpuS]);
  }
}
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const rows = [...byFile].map(([key, xs]) => ({ key, xs, m: median(xs) })).sort((a, b) => b.m - a.m);
const total = rows.reduce((a, r) => a + r.m, 0);
for (const r of rows) {
  console.log(`${r.m.toFixed(1).padStart(7)} s  ${((100 * r.m) / total).toFixed(1).padStart(5)} %  ${r.key}${r.xs.length > 1 ? `  [${r.xs.map((x) => x.toFixed(1)).join(', ')}]` : ''}`);
}
console.log(`${total.toFixed(1).padStart(7)} s  in ${rows.length} files (and ${imports.toFixed(1)} s importing them, all lines)`);
