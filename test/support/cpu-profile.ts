// Opt-in CPU per test file (METARELAY_TEST_CPU=/path/to/cpu.jsonl; vitest.config.ts adds this setup file
// only then). CPU seconds, unlike a file's wall time, hardly move with the machine's load, so they say
// which files cost the suite the most and whether a change made one cheaper. With `isolate: false` a
// worker process runs several files, so each file's figure is the difference of its process's counters
// across the file: its own CPU and that of the children it waited for (CLI processes, anvil, npm, all
// reaped by node), from the first beforeAll to the last afterAll: `cpuS`. A file's imports, evaluated
// between this setup file and its first hook, are `importS` apart: a worker imports src/, viem and
// PGlite once, for its first file, so that figure depends on the order files ran in.
// `node scripts/test-cpu.mjs /path/to/cpu.jsonl` sums and sorts the lines.
import { appendFileSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';

const CLOCK_TICKS = 100;

/** utime + stime + cutime + cstime of this process, in seconds (proc(5): fields 14-17 of /proc/self/stat). */
function cpuSeconds(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  // After the command's closing parenthesis (it may hold spaces) come field 3 onwards.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / CLOCK_TICKS;
}

const out = process.env.METARELAY_TEST_CPU;
if (out) {
  const loaded = cpuSeconds();
  let importS = 0;
  let start = 0;
  let file = '';
  beforeAll(() => {
    start = cpuSeconds();
    importS = Math.round((start - loaded) * 100) / 100;
    file = relative(process.cwd(), expect.getState().testPath ?? '');
  });
  // Registered before the file's own hooks, so with vitest's stacked hooks it runs after its afterAll.
  afterAll(() => {
    const cpuS = Math.round((cpuSeconds() - start) * 100) / 100;
    appendFileSync(out, `${JSON.stringify({ file, cpuS, importS, db: process.env.METARELAY_TEST_DB ?? 'pglite', pid: process.pid })}\n`);
  });
}
