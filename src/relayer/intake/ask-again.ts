import { askAgain } from '../../util/ask-again.ts';

/** Reads pinned to a block seen are made up to this many times in all (util/ask-again.ts's nodeBehind schedule). */
export const STALE_TRIES = 4;
/** Reads and simulations answered from a block older than one seen (a node behind) are made again, pausing a little longer each time from this. */
export const STALE_PAUSE_MS = 100;

const NOT_YET = Symbol('not yet');

/**
 * The one retry schedule of reads pinned to a block seen (wallet recognition, EIP-7702 account reads,
 * code at the block seen): `read` is asked until it answers; a throw (most often a node without the
 * block yet) or `undefined` asks again. Undefined when no try answered, for the caller to say what that
 * means (a default, or Unavailable).
 */
export async function askAgainWhileBehind<T>(read: (attempt: number) => Promise<T | undefined>): Promise<T | undefined> {
  try {
    return await askAgain(
      async (attempt) => {
        const answer = await read(attempt);
        if (answer === undefined) throw NOT_YET;
        return answer;
      },
      () => true,
      STALE_TRIES,
    );
  } catch {
    return undefined;
  }
}
