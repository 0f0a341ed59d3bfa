// Limiter (util/limiter.ts), alone: the bound holds at every moment, order is arrival order, and a
// failed task frees its slot. The metadata fetchers and PostgreSQL's transactions run on it.
import { describe, expect, it } from 'vitest';
import { Limiter, LimiterFull } from '../src/util/limiter.ts';

/** Runs `f` after `n` microtasks. */
function afterTicks(n: number, f: () => Promise<unknown>): Promise<unknown> {
  let p: Promise<unknown> = Promise.resolve();
  for (let i = 0; i < n; i++) p = p.then(() => undefined);
  return p.then(f);
}

describe('Limiter', () => {
  it('never runs more than its limit, even for a task arriving while a waiter is being handed a slot', async () => {
    for (const limit of [1, 2]) {
      for (let ticks = 0; ticks < 8; ticks++) {
        const l = new Limiter(limit);
        let active = 0;
        let most = 0;
        const task = (gate?: Promise<void>) => async () => {
          active++;
          most = Math.max(most, active);
          await (gate ?? new Promise((r) => setTimeout(r, 1)));
          active--;
        };
        let open!: () => void;
        const gate = new Promise<void>((r) => (open = r));
        const all: Promise<unknown>[] = Array.from({ length: limit }, () => l.run(task(gate)));
        all.push(l.run(task()));
        await new Promise((r) => setTimeout(r, 2));
        open();
        // A newcomer after `ticks` microtasks: some land between a slot's release and the waiter's start.
        all.push(afterTicks(ticks, () => l.run(task())));
        await Promise.all(all);
        expect({ limit, ticks, most }).toEqual({ limit, ticks, most: limit });
      }
    }
  });

  it('starts waiting tasks in arrival order, and a failed task frees its slot for the next', async () => {
    const l = new Limiter(1);
    const order: number[] = [];
    const runs = [0, 1, 2, 3, 4].map((i) =>
      l.run(async () => {
        order.push(i);
        await new Promise((r) => setTimeout(r, 1));
        if (i === 1) throw new Error('task 1 fails');
        return i;
      }),
    );
    const settled = await Promise.allSettled(runs);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled', 'fulfilled']);
  });

  it('with maxWaiting, refuses a task at once when that many already wait (LimiterFull), and takes one again once a place is free', async () => {
    const l = new Limiter(1, 2);
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const running = l.run(() => gate);
    const waiting = [l.run(async () => 1), l.run(async () => 2)];
    await expect(l.run(async () => 3)).rejects.toBeInstanceOf(LimiterFull);
    open();
    await running;
    expect(await Promise.all(waiting)).toEqual([1, 2]);
    expect(await l.run(async () => 4)).toBe(4);
  });
});
