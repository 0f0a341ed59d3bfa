/**
 * The one schedule of reads a node behind may refuse or answer from an older state: at once, at once
 * again (a load balancer's next node may have the block), then 100 and 200 ms later (a node a block
 * behind catches up within a block time). `again` says which failures are worth another try; any other,
 * or the last try's, is thrown as it came.
 */
export async function askAgain<T>(read: (attempt: number) => Promise<T>, again: (err: unknown) => boolean, tries: number): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    if (attempt > 2) await pauseAbout(100 * (attempt - 2));
    try {
      return await read(attempt);
    } catch (err) {
      if (!again(err) || attempt >= tries) throw err;
    }
  }
}

/**
 * A read a node a block behind the one that gave the head refuses (load-balanced providers) is asked
 * again at once, then 100 ms later: another node may have the block. On a chain standing still, failing
 * at once put a refresh task back for retries that met the same node every time.
 */
export const askAgainIfBehind = <T>(read: () => Promise<T>, behind: (err: unknown) => boolean, tries = 3): Promise<T> => askAgain(read, behind, tries);

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
