/**
 * The one retry of the service: `read` is tried up to `tries` times, with `pause(attempt)` awaited before
 * try `attempt` (2, 3, …). `again(err, attempt)` says whether a failure is worth another try, and is asked
 * only while tries are left (so it may log the retry); any other failure, or the last try's, is thrown as
 * it came. The schedule is the caller's: each retry keeps the pauses its case was measured with.
 */
export async function askAgain<T>(
  read: (attempt: number) => Promise<T>,
  again: (err: unknown, attempt: number) => boolean,
  tries: number,
  pause: (attempt: number) => Promise<void> = nodeBehind,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    if (attempt > 1) await pause(attempt);
    try {
      return await read(attempt);
    } catch (err) {
      if (attempt >= tries || !again(err, attempt)) throw err;
    }
  }
}

/**
 * The schedule of reads a node behind may refuse or answer from an older state: at once, at once again
 * (a load balancer's next node may have the block), then about 100, 200 … ms later (a node a block behind
 * catches up within a block time).
 */
export const nodeBehind = (attempt: number): Promise<void> => pauseAbout(100 * (attempt - 2));

/**
 * A read a node a block behind the one that gave the head refuses (load-balanced providers) is asked
 * again at once, then about 100 ms later: another node may have the block. On a chain standing still,
 * failing at once put a refresh task back for retries that met the same node every time.
 */
export const askAgainIfBehind = <T>(read: () => Promise<T>, behind: (err: unknown) => boolean, tries = 3): Promise<T> => askAgain(read, behind, tries);

/** Pauses of `stepMs` times the tries made so far: `stepMs`, 2 × `stepMs`, … */
export const growing =
  (stepMs: number) =>
  (attempt: number): Promise<void> =>
    sleep(stepMs * (attempt - 1));

/** Pauses from `firstMs`, doubling: `firstMs`, 2 × `firstMs`, 4 × `firstMs`, … */
export const doubling =
  (firstMs: number) =>
  (attempt: number): Promise<void> =>
    sleep(firstMs * 2 ** (attempt - 2));

/** The same pause before every retry. */
export const every = (ms: number) => (): Promise<void> => sleep(ms);

/** The pauses listed, in order (the last again should there be more tries). */
export const listed =
  (pausesMs: readonly number[]) =>
  (attempt: number): Promise<void> =>
    sleep(pausesMs[Math.min(attempt - 2, pausesMs.length - 1)]!);

/** No pause: the next try at once. */
export const atOnce = (): Promise<void> => Promise.resolve();

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * A pause of about `ms` (between half and one and a half times it). Retries whose pauses are fixed
 * multiples of the process's own polling period meet a round-robin of nodes at the same turn each time:
 * a node behind got every pinned retry of a simulation, nine in a row (a flake of the lag tests, and a
 * refusal a real provider could give too). A random pause decorrelates them.
 */
export function pauseAbout(ms: number): Promise<void> {
  if (ms <= 0) return Promise.resolve();
  return new Promise((r) => setTimeout(r, ms * (0.5 + Math.random())));
}
