// shareInFlight (util/single-flight.ts): the reads every sponsored intake makes of its project (its
// sponsorship rules, its tank) are shared by the intakes asking at the same moment, never reused after.

import { describe, expect, it } from 'vitest';
import { shareInFlight } from '../src/util/single-flight.ts';

describe('shareInFlight', () => {
  it('gives concurrent calls of one key one call, and a call made once it is answered a fresh one', async () => {
    let calls = 0;
    let version = 0;
    const read = shareInFlight(
      (project: number) => String(project),
      async (project: number) => {
        calls++;
        const seen = version;
        await new Promise((r) => setTimeout(r, 5));
        return `${project}@${seen}`;
      },
    );
    expect(await Promise.all([read(1), read(1), read(2), read(1)])).toEqual(['1@0', '1@0', '2@0', '1@0']);
    expect(calls).toBe(2);
    version = 1;
    expect(await read(1)).toBe('1@1');
    expect(calls).toBe(3);
  });

  it('gives the shared error to every caller of that moment, and tries again afterwards', async () => {
    let fail = true;
    const read = shareInFlight(
      () => 'k',
      async () => {
        await new Promise((r) => setTimeout(r, 5));
        if (fail) throw new Error('connection lost');
        return 'ok';
      },
    );
    const outcomes = await Promise.allSettled([read(), read()]);
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected']);
    fail = false;
    expect(await read()).toBe('ok');
  });
});
