#!/usr/bin/env node
// Writes test/durations.json (seconds per test file) from vitest JSON reports, for the longest-first
// sequencer (test/support/sequencer.ts). Usage, after a whole run:
//   npx vitest run --reporter=json --outputFile=/tmp/run.json && node scripts/test-durations.mjs /tmp/run.json [more.json]
// With several reports (the PGlite and the PostgreSQL half), a file's figure is the longest seen.
import { readFileSync, writeFileSync } from 'node:fs';
import { relative } from 'node:path';

const reports = process.argv.slice(2);
if (reports.length === 0) {
  console.error('usage: node scripts/test-durations.mjs <vitest-json-report> [...]');
  process.exit(2);
}
const out = {};
for (const file of reports) {
  const report = JSON.parse(readFileSync(file, 'utf8'));
  for (const r of report.testResults ?? []) {
    const seconds = Math.round((r.endTime - r.startTime) / 100) / 10;
    const key = relative(process.cwd(), r.name);
    out[key] = Math.max(out[key] ?? 0, seconds);
  }
}
const sorted = Object.fromEntries(Object.entries(out).sort((a, b) => b[1] - a[1]));
writeFileSync('test/durations.json', `${JSON.stringify(sorted, null, 2)}\n`);
console.log(
  `test/durations.json: ${Object.keys(sorted).length} files, ${Object.values(sorted)
    .reduce((a, b) => a + b, 0)
    .toFixed(0)} s in all`,
);
