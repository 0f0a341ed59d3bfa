// The figures the docs state that drift as the code grows, each computed from the code: `npx tsx
// scripts/docs-figures.ts` lists them and says which no longer match, `--write` puts the computed
// figure into the doc. test/docs-figures.test.ts fails while one is off. (The installed size and
// start time are measured, not computed: test/package.test.ts checks the docs' figure against its
// own measurement.)
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { WITHOUT_THE_RUNS_DATABASE } from '../test/support/without-db.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

const ONES = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten', 'eleven', 'twelve', 'thirteen', 'fourteen', 'fifteen', 'sixteen', 'seventeen', 'eighteen', 'nineteen'];
const TENS = ['', '', 'twenty', 'thirty', 'forty', 'fifty', 'sixty', 'seventy', 'eighty', 'ninety'];

/** 23 → "twenty-three" (0–99; the docs spell counts out in words at the start of a sentence). */
export function inWords(n: number): string {
  if (!Number.isInteger(n) || n < 0 || n > 99) throw new Error(`${n}: only 0–99 in words`);
  if (n < 20) return ONES[n];
  return TENS[Math.floor(n / 10)] + (n % 10 ? `-${ONES[n % 10]}` : '');
}

const capital = (s: string) => s[0].toUpperCase() + s.slice(1);

export interface Figure {
  /** The doc, from the repository's root. */
  doc: string;
  what: string;
  /** Finds the figure: group 1 is the figure itself. */
  pattern: RegExp;
  /** What it should read. */
  expected: string;
}

/** Every drifting figure with what it should read now. */
export function figures(): Figure[] {
  const migrations = readdirSync(`${ROOT}src/store/migrations`).filter((f) => /^\d{4}_.+\.sql$/.test(f)).length;
  const noDb = WITHOUT_THE_RUNS_DATABASE.length;
  return [
    {
      doc: 'docs/production.md',
      what: "the migrations doctor reports applied (src/store/migrations/*.sql)",
      pattern: /ok {4}migrations: all (\d+) applied/,
      expected: String(migrations),
    },
    {
      doc: 'docs/testing.md',
      what: 'the test files that open no database of the run\'s kind (WITHOUT_THE_RUNS_DATABASE)',
      pattern: /^([A-Z][a-z]+(?:-[a-z]+)?) files open no database of the run's kind/m,
      expected: capital(inWords(noDb)),
    },
  ];
}

/** Each figure as the doc has it now, and whether that is what it should read. */
export function check(): Array<Figure & { found: string | null; ok: boolean }> {
  return figures().map((f) => {
    const m = f.pattern.exec(readFileSync(`${ROOT}${f.doc}`, 'utf8'));
    return { ...f, found: m ? m[1] : null, ok: m?.[1] === f.expected };
  });
}

/** Puts the computed figures into the docs; returns the ones changed. */
export function write(): Figure[] {
  const changed: Figure[] = [];
  for (const f of check()) {
    if (f.ok || f.found === null) continue;
    const path = `${ROOT}${f.doc}`;
    const text = readFileSync(path, 'utf8');
    writeFileSync(path, text.replace(f.pattern, (whole, fig: string) => whole.replace(fig, f.expected)));
    changed.push(f);
  }
  return changed;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  if (process.argv.includes('--write')) for (const f of write()) console.log(`${f.doc}: ${f.what} now ${f.expected}`);
  let bad = 0;
  for (const f of check()) {
    console.log(`${f.ok ? 'ok ' : 'OFF'} ${f.doc}: ${f.what}: ${f.found ?? '(not found)'}${f.ok ? '' : `, should be ${f.expected}`}`);
    if (!f.ok) bad++;
  }
  process.exitCode = bad ? 1 : 0;
}
