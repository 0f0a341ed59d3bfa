/**
 * The one schedule of reads a node behind may refuse or answer from an older state: at once, at once
 * again (a load balancer's next node may have the block), then 100 and 200 ms later (a node a block
 * behind catches up within a block time). `again` says which failures are worth another try; any other,
 * or the last try's, is thrown as it came.
 */
export async function askAgain<T>(read: (attempt: number) => Promise<T>, again: (err: unknown) => boolean, tries: number): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    if (attempt > 2) await new Promise((r) => setTimeout(r, 100 * (attempt - 2)));
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
