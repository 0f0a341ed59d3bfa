/** What became of work given a bounded wait: finished, still running, or failed. */
export type Bounded<T> = { state: 'done'; value: T } | { state: 'pending' } | { state: 'failed'; error: unknown };

/** Waits at most `ms` for `work`; work still running goes on in the background, its failure swallowed. */
export async function within<T>(work: Promise<T>, ms: number): Promise<Bounded<T>> {
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    work.then(
      (value): Bounded<T> => ({ state: 'done', value }),
      (error): Bounded<T> => ({ state: 'failed', error }),
    ),
    new Promise<Bounded<T>>((r) => (timer = setTimeout(() => r({ state: 'pending' }), ms))),
  ]);
  clearTimeout(timer);
  if (outcome.state === 'pending') work.catch(() => undefined);
  return outcome;
}
