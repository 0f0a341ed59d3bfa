import { existsSync, readFileSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/*
 * Longest files first, from the durations committed in test/durations.json (seconds per file, from a
 * whole run: `node scripts/test-durations.mjs <vitest json report>`). Two workers drain one queue, so
 * the run ends when the last long file ends: started last, a 2-minute file adds up to 2 minutes to the
 * wall clock. Vitest orders by its own cache of the last run's durations, which a fresh clone (CI) does
 * not have; the committed figures stand in for it. A file missing from them goes first (it may be long).
 */
const DURATIONS = resolve('test/durations.json');

export default class LongFirstSequencer extends BaseSequencer {
  async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const known: Record<string, number> = existsSync(DURATIONS) ? JSON.parse(readFileSync(DURATIONS, 'utf8')) : {};
    const seconds = (f: TestSpecification) => known[relative(process.cwd(), f.moduleId)] ?? Number.POSITIVE_INFINITY;
    return [...files].sort((a, b) => seconds(b) - seconds(a));
  }
}
