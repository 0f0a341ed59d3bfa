// Hedged requests: start the first task, start the next one whenever the
// running ones have been silent for `delayMs` or one of them has failed, and
// stop everything at the first win.

export type HedgeTask<T> = (signal: AbortSignal) => Promise<T>;

export type HedgeResult<T> = { winner: T | undefined; results: T[] };

/** Tasks must not reject; their results come back in completion order. */
export function hedge<T>(tasks: readonly HedgeTask<T>[], isWin: (result: T) => boolean, delayMs: number, parent: AbortSignal): Promise<HedgeResult<T>> {
  return new Promise((resolve) => {
    const controllers: AbortController[] = [];
    const running: Promise<void>[] = [];
    const results: T[] = [];
    let timer: NodeJS.Timeout | undefined;
    let winner: T | undefined;
    let done = false;
    let pending = 0;

    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      parent.removeEventListener('abort', onParentAbort);
      for (const c of controllers) c.abort(new Error('hedge: another attempt won'));
      // Losers settle promptly once aborted; waiting for them keeps the trace complete.
      void Promise.all(running).then(() => resolve({ winner, results }));
    };
    const onParentAbort = (): void => {
      for (const c of controllers) c.abort(parent.reason);
    };
    parent.addEventListener('abort', onParentAbort, { once: true });

    const startNext = (): void => {
      clearTimeout(timer);
      if (done) return;
      if (parent.aborted) {
        if (pending === 0) finish();
        return;
      }
      const index = controllers.length;
      if (index >= tasks.length) {
        if (pending === 0) finish();
        return;
      }
      const controller = new AbortController();
      controllers.push(controller);
      pending++;
      const signal = AbortSignal.any([parent, controller.signal]);
      running.push(
        tasks[index](signal).then((result) => {
          pending--;
          results.push(result);
          if (done) return;
          if (isWin(result)) {
            winner = result;
            finish();
          } else {
            startNext();
          }
        }),
      );
      if (controllers.length < tasks.length) timer = setTimeout(startNext, delayMs);
    };

    if (tasks.length === 0) finish();
    else startNext();
  });
}
