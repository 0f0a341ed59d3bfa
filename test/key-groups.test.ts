// KeyGroups (util/key-groups.ts), alone: which calls run together, which never do, and what a failed
// group's calls get. The intake's use of it is tested on the databases in intake-groups.test.ts.

import { describe, expect, it } from 'vitest';
import { KeyGroups, type Outcome } from '../src/util/key-groups.ts';

interface Call {
  name: string;
  keys: string[];
  fail?: boolean;
}

/** A KeyGroups whose work takes a macrotask and records what ran together and what overlapped. */
function harness(running: number, size = 32) {
  const groups: string[][] = [];
  const live = new Set<string>();
  const overlaps: string[] = [];
  const work = async (calls: Call[]) => {
    for (const c of calls) for (const k of c.keys) if (live.has(k)) overlaps.push(k);
    for (const c of calls) for (const k of c.keys) live.add(k);
    groups.push(calls.map((c) => c.name));
    await new Promise((r) => setTimeout(r, 5));
    for (const c of calls) for (const k of c.keys) live.delete(k);
  };
  const g = new KeyGroups<Call, string>({
    keys: (c) => c.keys,
    one: async (c) => {
      await work([c]);
      if (c.fail) throw new Error(`${c.name} refused`);
      return `${c.name} alone`;
    },
    many: async (calls): Promise<Outcome<string>[]> => {
      await work(calls);
      if (calls.some((c) => c.fail)) throw new Error('the group rolled back');
      return calls.map((c) => ({ ok: true, value: `${c.name} in a group` }));
    },
    size,
    running,
  });
  return { g, groups, overlaps };
}

describe('KeyGroups', () => {
  it('runs a call alone when nothing is under way, and the calls made meanwhile together', async () => {
    const { g, groups } = harness(1);
    const out = await Promise.all(['a', 'b', 'c', 'd'].map((name) => g.run({ name, keys: [name] })));
    expect(groups).toEqual([['a'], ['b', 'c', 'd']]);
    expect(out).toEqual(['a alone', 'b in a group', 'c in a group', 'd in a group']);
    expect(g.counts).toEqual({ groups: 1, grouped: 3, fallbacks: 0 });
  });

  it('never runs two calls of one key at once, in one group or in two, and runs them in the order made', async () => {
    const { g, groups, overlaps } = harness(3);
    const calls: Call[] = [
      { name: 'w1', keys: ['w'] },
      { name: 'x1', keys: ['x'] },
      { name: 'w2', keys: ['w', 'y'] },
      { name: 'y1', keys: ['y'] },
      { name: 'w3', keys: ['w'] },
      { name: 'z1', keys: ['z'] },
    ];
    await Promise.all(calls.map((c) => g.run(c)));
    expect(overlaps).toEqual([]);
    const at = (name: string) => groups.findIndex((grp) => grp.includes(name));
    expect(at('w1') < at('w2') && at('w2') < at('w3')).toBe(true);
    // y1 was made after w2, which holds y too: it does not overtake it.
    expect(at('w2') <= at('y1')).toBe(true);
    expect(groups.flat().sort()).toEqual(calls.map((c) => c.name).sort());
  });

  it('runs a group that fails again one call at a time, in order: each gets what it alone gets', async () => {
    const { g, groups } = harness(1);
    const out = await Promise.allSettled([g.run({ name: 'a', keys: ['a'] }), g.run({ name: 'b', keys: ['b'] }), g.run({ name: 'c', keys: ['c'], fail: true }), g.run({ name: 'd', keys: ['d'] })]);
    expect(groups).toEqual([['a'], ['b', 'c', 'd'], ['b'], ['c'], ['d']]);
    expect(out.map((o) => (o.status === 'fulfilled' ? o.value : String(o.reason)))).toEqual(['a alone', 'b alone', 'Error: c refused', 'd alone']);
    expect(g.counts.fallbacks).toBe(1);
  });

  it('keeps at most `running` groups under way and at most `size` calls in one', async () => {
    const { g, groups } = harness(2, 3);
    await Promise.all(Array.from({ length: 10 }, (_, i) => g.run({ name: `c${i}`, keys: [`k${i}`] })));
    expect(groups.every((grp) => grp.length <= 3)).toBe(true);
    expect(groups.slice(0, 2)).toEqual([['c0'], ['c1']]);
    expect(groups.flat()).toEqual(Array.from({ length: 10 }, (_, i) => `c${i}`));
  });

  it('with `more`, starts a group beside one under way only once that many calls wait, and with none under way at once', async () => {
    // Each group runs until the test lets it end: what starts when is seen without any timing.
    const started: string[][] = [];
    const gates: Array<() => void> = [];
    const work = (calls: Call[]) => {
      started.push(calls.map((c) => c.name));
      return new Promise<void>((r) => gates.push(r));
    };
    const g = new KeyGroups<Call, string>({
      keys: (c) => c.keys,
      one: async (c) => {
        await work([c]);
        return c.name;
      },
      many: async (calls) => {
        await work(calls);
        return calls.map((c) => ({ ok: true as const, value: c.name }));
      },
      size: 32,
      running: 2,
      more: 3,
    });
    const call = (name: string) => g.run({ name, keys: [name] });
    const done = [call('c0')];
    expect(started).toEqual([['c0']]);
    done.push(call('c1'), call('c2'));
    // Two wait: no group beside c0's (without `more`, c1 went at once, alone).
    expect(started).toEqual([['c0']]);
    done.push(call('c3'));
    expect(started).toEqual([['c0'], ['c1', 'c2', 'c3']]);
    done.push(call('c4'));
    expect(started).toHaveLength(2);
    // c0's group ends: c1's is still under way, and one call waiting is not enough for a group beside it.
    gates[0]!();
    await done[0];
    expect(started).toHaveLength(2);
    // c1's ends too: with nothing under way, the one waiting call goes at once, alone.
    gates[1]!();
    await done[1];
    expect(started).toEqual([['c0'], ['c1', 'c2', 'c3'], ['c4']]);
    for (const open of gates) open();
    expect(await Promise.all(done)).toEqual(['c0', 'c1', 'c2', 'c3', 'c4']);
  });
});
