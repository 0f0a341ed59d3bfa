import type { Logger } from '../telemetry/logger.ts';

export interface ShutdownPlan {
  /** First: stop taking new work and hand shared work back (leases), so other processes carry on at once. */
  drain?: () => Promise<void>;
  /** Then wait this long (reads are still answered), */
  graceMs?: number;
  /** then close everything (HTTP, database). */
  close: () => Promise<void>;
  /** All of it within this, or the process exits 1 anyway: an orchestrator's kill should not be what ends it. */
  deadlineMs?: number;
}

/** SIGINT/SIGTERM run the plan once and exit 0; a second signal, or the deadline, exits at once. */
export function onShutdown(log: Logger, plan: ShutdownPlan | (() => Promise<void>)) {
  const p: ShutdownPlan = typeof plan === 'function' ? { close: plan } : plan;
  let stopping = false;
  const handler = (signal: string) => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(130);
    }
    stopping = true;
    const t0 = Date.now();
    log.info({ signal, graceMs: p.graceMs ?? 0, deadlineMs: p.deadlineMs }, 'shutting down: draining');
    if (p.deadlineMs) {
      setTimeout(() => {
        log.error({ deadlineMs: p.deadlineMs }, 'shutdown deadline passed: exiting with work unfinished');
        process.exit(1);
      }, p.deadlineMs).unref();
    }
    (async () => {
      await p.drain?.();
      if (p.graceMs) await new Promise((r) => setTimeout(r, p.graceMs));
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
}
