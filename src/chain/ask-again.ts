/**
 * A read a node a block behind the one that gave the head refuses (load-balanced providers) is asked
 * again at once, then 100 ms later: another node may have the block. Any other failure, or the last
 * try's, is thrown as it came. On a chain standing still, failing at once put a refresh task back for
 * retries that met the same node every time.
 */
export async function askAgainIfBehind<T>(read: () => Promise<T>, behind: (err: unknown) => boolean, tries = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await read();
    } catch (err) {
      if (!behind(err) || attempt >= tries) throw err;
      if (attempt > 1) await new Promise((r) => setTimeout(r, 100 * (attempt - 1)));
    }
  }
}
