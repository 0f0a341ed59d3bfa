import type { Logger } from '../telemetry/logger.ts';

export interface ShutdownPlan {
  /** First: stop taking new work and hand shared work back (leases), so other processes carry on at once. */
  drain?: () => Promise<void>;
  /** Reads are still answered this long from the signal (the drain runs meanwhile), */
  graceMs?: number;
  /** then close everything (HTTP, database). */
  close: () => Promise<void>;
  /** All of it within this, or the process exits 1 anyway: an orchestrator's kill should not be what ends it. */
  deadlineMs?: number;
}

/**
 * What bin/metarelay.mjs emits on `process` for a signal npm's shell did not pass on (the shell's loss:
 * SIGTERM; the shell woken while it waits: SIGINT). It starts the drain if none runs, and is never
 * taken as a second signal: a signal sent to the whole process group reaches the server and its shell.
 */
export const PARENT_SIGNAL = 'metarelay:parent-signal';

/**
 * The same signal again within this long of the first is the same Ctrl-C, not a second one: a terminal's
 * Ctrl-C reaches every process of its group, so `npm start` (npm execs nothing: node is its child) gets
 * one and passes it on to node, which already had its own. That copy was taken for a second Ctrl-C:
 * exit 130 at once, no drain, no database close (9 of 13 stops of `npm start`). A person pressing
 * Ctrl-C twice to force the exit does it after this.
 */
export const SAME_SIGNAL_MS = 1_500;

/** SIGINT/SIGTERM run the plan once and exit 0; a second signal, or the deadline, exits at once. */
export function onShutdown(log: Logger, plan: ShutdownPlan | (() => Promise<void>)) {
  const p: ShutdownPlan = typeof plan === 'function' ? { close: plan } : plan;
  let stopping = false;
  let first: { signal: string; at: number } | undefined;
  /**
   * A drain started by PARENT_SIGNAL on behalf of a group's signal: the server's own copy of that signal
   * may be handled after it (the watch's timer and the signal become due in one turn of a busy event
   * loop). That copy is the same signal, not a second one: absorbed once.
   */
  let lateCopyOf: string | null = null;
  const handler = (signal: string) => {
    if (stopping && lateCopyOf === signal) {
      lateCopyOf = null;
      log.info({ signal }, 'the same signal reached this process too: still draining');
      return;
    }
    if (stopping && first?.signal === signal && Date.now() - first.at < SAME_SIGNAL_MS) {
      log.info({ signal, afterMs: Date.now() - first.at }, 'the same signal again at once (npm passes on the Ctrl-C this process had too): still draining');
      return;
    }
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(130);
    }
    stopping = true;
    first = { signal, at: Date.now() };
    const t0 = Date.now();
    log.info({ signal, graceMs: p.graceMs ?? 0, deadlineMs: p.deadlineMs }, 'shutting down: draining');
    if (p.deadlineMs) {
      setTimeout(() => {
        log.error({ deadlineMs: p.deadlineMs }, 'shutdown deadline passed: exiting with work unfinished');
        process.exit(1);
      }, p.deadlineMs).unref();
    }
    (async () => {
      // Reads are answered for graceMs from the signal, while the drain runs (its dispatchers finish
      // their pass meanwhile): the two overlap rather than add up.
      await Promise.all([p.drain?.(), p.graceMs ? new Promise((r) => setTimeout(r, p.graceMs)) : undefined]);
      log.info({ ms: Date.now() - t0 }, 'drained: closing');
      await p.close();
    })()
      .then(() => {
        log.info({ ms: Date.now() - t0 }, 'shut down cleanly');
        process.exit(0);
      })
      .catch((err) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGINT', () => handler('SIGINT'));
  process.on('SIGTERM', () => handler('SIGTERM'));
  process.on(PARENT_SIGNAL, (signal: string) => {
    if (stopping) return;
    log.info({ signal }, "npm's shell was sent the signal: taken as this process's own");
    handler(signal);
    lateCopyOf = signal;
  });
}
