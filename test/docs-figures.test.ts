// The docs' figures that drift as the code grows (the number of migrations, of test files without the
// run's database) against the code: a figure left behind fails here, and `npx tsx
// scripts/docs-figures.ts --write` puts the right one in.
import { describe, expect, it } from 'vitest';
import { check, inWords } from '../scripts/docs-figures.ts';

describe('the figures in the docs', () => {
  it('spells counts in words', () => {
    expect([0, 7, 19, 20, 23, 40, 99].map(inWords)).toEqual(['zero', 'seven', 'nineteen', 'twenty', 'twenty-three', 'forty', 'ninety-nine']);
  });

  it('match the code (run `npx tsx scripts/docs-figures.ts --write` to fix)', () => {
    for (const f of check()) {
      expect(f.found, `${f.doc}: ${f.what}: the sentence that states it is gone (${f.pattern})`).not.toBeNull();
      expect(f.found, `${f.doc}: ${f.what}`).toBe(f.expected);
    }
  });
});
