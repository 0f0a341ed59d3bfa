// Test hook: dies like `kill -9` at a named point of the dispatcher, so the crash-recovery test can
// kill the relayer exactly where recovery is hardest (signed and committed but not yet broadcast;
// broadcast but not yet recorded) instead of wherever a timed kill happens to land.
//
// METARELAY_CRASH_AT=<point>[:<n>] arms it: the process SIGKILLs itself the n-th time (default the
// first) that point is reached with work in hand. Unset, crashPoint is one string comparison.

export type CrashPointName = 'after-persist' | 'after-broadcast';

let armed: { point: string; remaining: number } | null | undefined;

function parse(spec: string | undefined): { point: string; remaining: number } | null {
  if (!spec) return null;
  const [point, count] = spec.split(':');
  const n = count === undefined ? 1 : Number(count);
  if (!point || !Number.isInteger(n) || n < 1) throw new Error(`METARELAY_CRASH_AT must be <point>[:<count>], not "${spec}"`);
  return { point, remaining: n };
}

/** Kills this process (SIGKILL: no cleanup, no exit handlers) when METARELAY_CRASH_AT names `name`. */
export function crashPoint(name: CrashPointName, items = 1): void {
  if (armed === undefined) armed = parse(process.env.METARELAY_CRASH_AT);
  // A pass that signed or sent nothing is not the state the test wants to crash in.
  if (armed === null || armed.point !== name || items === 0) return;
  if (--armed.remaining > 0) return;
  process.kill(process.pid, 'SIGKILL');
}
