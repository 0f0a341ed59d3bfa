/**
 * Reads a node behind may refuse (a block it does not have yet) or answer from an older state are made
 * up to this many times in all: at once, at once again (a load balancer's next node may have the
 * block), then 100 and 200 ms later (a node a block behind catches up within a block time).
 */
export const STALE_TRIES = 4;
const STALE_PAUSE_MS = 100;

/**
 * The one retry schedule of reads pinned to a block seen (wallet recognition, EIP-7702 account reads,
 * code at the block seen): `read` is asked until it answers; a throw or `undefined` asks again.
 * Undefined when no try answered, for the caller to say what that means (a default, or Unavailable).
 */
export async function askAgainWhileBehind<T>(read: (attempt: number) => Promise<T | undefined>): Promise<T | undefined> {
  for (let attempt = 1; attempt <= STALE_TRIES; attempt++) {
    if (attempt > 2) await new Promise((r) => setTimeout(r, STALE_PAUSE_MS * (attempt - 2)));
    try {
      const answer = await read(attempt);
      if (answer !== undefined) return answer;
    } catch {
      // Refused: most often a node without the block yet; the next try may reach one that has it.
    }
  }
  return undefined;
}
