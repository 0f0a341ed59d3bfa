import { describe, expect, it } from 'vitest';
import { askAgain, askAgainIfBehind, atOnce, doubling, every, growing, listed, nodeBehind } from '../src/util/ask-again.ts';

// The one retry (src/util/ask-again.ts): how many tries, which failures are tried again, and the pause
// each schedule asks for before each try. The pauses are read from what the schedule asks setTimeout
// for, never from the clock (tests share a loaded machine). Opens no database.

/** Runs `fn` with setTimeout answering at once, and the delays it was asked for. */
async function delaysOf<T>(fn: () => Promise<T>): Promise<{ out: T | Error; delays: number[] }> {
  const delays: number[] = [];
  const real = globalThis.setTimeout;
  globalThis.setTimeout = ((cb: () => void, ms?: number) => {
    delays.push(ms ?? 0);
    return real(cb, 0);
  }) as typeof setTimeout;
  try {
    return { out: await fn().catch((err: Error) => err), delays };
  } finally {
    globalThis.setTimeout = real;
  }
}

/** A read failing `n` times (with `fail(i)`), then answering `ok`. */
function failing(n: number, fail: (i: number) => unknown = (i) => new Error(`no ${i}`)) {
  const attempts: number[] = [];
  const read = async (attempt: number) => {
    attempts.push(attempt);
    if (attempts.length <= n) throw fail(attempts.length);
    return 'ok';
  };
  return { read, attempts };
}

describe('askAgain', () => {
  it('tries until an answer, at most `tries` times, and throws the last failure as it came', async () => {
    const a = failing(2);
    expect(await askAgain(a.read, () => true, 3, atOnce)).toBe('ok');
    expect(a.attempts).toEqual([1, 2, 3]);
    const b = failing(5);
    await expect(askAgain(b.read, () => true, 3, atOnce)).rejects.toThrow('no 3');
    expect(b.attempts).toEqual([1, 2, 3]);
  });

  it('a failure `again` refuses is thrown at once; `again` is asked only while tries are left', async () => {
    const asked: number[] = [];
    const a = failing(5, (i) => (i === 2 ? new TypeError('refused') : new Error('busy')));
    await expect(
      askAgain(
        a.read,
        (err, attempt) => {
          asked.push(attempt);
          return !(err instanceof TypeError);
        },
        5,
        atOnce,
      ),
    ).rejects.toThrow(TypeError);
    expect(asked).toEqual([1, 2]);
    const b = failing(5);
    const last: number[] = [];
    await expect(askAgain(b.read, (_e, attempt) => last.push(attempt) > 0, 2, atOnce)).rejects.toThrow('no 2');
    expect(last).toEqual([1]);
  });

  it('each schedule asks for the pauses it names, before the second try on', async () => {
    const pausesOf = async (pause: (attempt: number) => Promise<void>, tries: number) => (await delaysOf(() => askAgain(failing(tries).read, () => true, tries, pause))).delays;
    expect(await pausesOf(growing(100), 4)).toEqual([100, 200, 300]);
    expect(await pausesOf(doubling(500), 4)).toEqual([500, 1000, 2000]);
    expect(await pausesOf(every(20), 5)).toEqual([20, 20, 20, 20]);
    expect(await pausesOf(listed([50, 250]), 3)).toEqual([50, 250]);
    expect(await pausesOf(listed([50, 250]), 4)).toEqual([50, 250, 250]);
    expect(await pausesOf(atOnce, 3)).toEqual([]);
    // A node behind: the second try at once, then about 100 and 200 ms (half to one and a half times).
    const behind = await pausesOf(nodeBehind, 4);
    expect(behind).toHaveLength(2);
    expect(behind[0]).toBeGreaterThanOrEqual(50);
    expect(behind[0]).toBeLessThanOrEqual(150);
    expect(behind[1]).toBeGreaterThanOrEqual(100);
    expect(behind[1]).toBeLessThanOrEqual(300);
  });

  it('askAgainIfBehind tries three times on the node-behind schedule, only what `behind` accepts', async () => {
    const a = failing(2);
    const { out, delays } = await delaysOf(() =>
      askAgainIfBehind(
        () => a.read(0),
        () => true,
      ),
    );
    expect(out).toBe('ok');
    expect(a.attempts).toHaveLength(3);
    expect(delays).toHaveLength(1);
    const b = failing(1);
    await expect(
      askAgainIfBehind(
        () => b.read(0),
        () => false,
      ),
    ).rejects.toThrow('no 1');
    expect(b.attempts).toHaveLength(1);
  });
});
