import { configDefaults, defineConfig } from 'vitest/config';
import LongFirstSequencer from './test/support/sequencer.ts';
import { ONLY_WITH_POSTGRES, WITHOUT_THE_RUNS_DATABASE } from './test/support/without-db.ts';


export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: [...configDefaults.exclude, ...(process.env.METARELAY_TEST_DB === 'postgres' ? WITHOUT_THE_RUNS_DATABASE : ONLY_WITH_POSTGRES)],
    globalSetup: ['test/support/global-setup.ts'],
    // CPU seconds per file, on request only (test/support/cpu-profile.ts; docs/testing.md).
    setupFiles: process.env.METARELAY_TEST_CPU ? ['test/support/cpu-profile.ts'] : [],
    // A guard against hangs, not a speed check: tests that spawn the CLI (a fresh node, tsx and PGlite
    // per call) took up to 53 s of the old 60 s on a busy 2-core machine.
    testTimeout: 180_000,
    hookTimeout: 180_000,
    // expect.poll gives up after 1 s by default: a console page's next poll or a click's round trip took
    // longer at load 20 (ui.test's sender toggle, 7 Dec). A bound on a hang, not a speed check.
    expect: { poll: { timeout: 30_000, interval: 100 } },
    // Three workers on two cores: many files spend their time waiting on blocks (1 s interval mining),
    // timers and child processes, and a third file's work fills that. Measured on this 2-core VM, 29 Nov:
    // the PostgreSQL half 309 s -> 262 s, the PGlite half 453-502 s -> 410 s (vmstat: 14 % idle -> ~1 %).
    pool: 'forks',
    maxWorkers: 3,
    // Each test file is a fresh process that compiles PGlite's 9 MB of WebAssembly: V8's optimising
    // tier recompiling it in the background cost more CPU than it saved for all but the heaviest
    // files (10 PGlite files: 49 s of CPU -> 37 s; token-search, 750 queries, even).
    execArgv: ['--liftoff-only'],
    // Longest files first (test/durations.json), so neither worker is left with a long file at the end.
    sequence: { sequencer: LongFirstSequencer },
    // One module cache per worker, not per file: importing src/, viem and PGlite again for each of ~100
    // files cost ~3 s of CPU apiece (310 s of a 1 237 s PGlite half). Every file starts its own services,
    // chain and database and closes them in afterAll, so nothing is shared but loaded code.
    isolate: false,
  },
});
