import { z } from 'zod';

// The config section of the operator console: sign-in sessions, the per-project request log and alerts.

export const ConsoleConfigSchema = z
  .object({
    /** Serve the console page at /console and its API at /rpc/Console/. */
    enabled: z.boolean().default(true),
    /** How long a console sign-in lasts. */
    sessionTtlSec: z.number().int().min(60).default(43_200),
    /** Mark the session cookie Secure (set it when the console is served over HTTPS). */
    secureCookie: z.boolean().default(false),
    /**
     * Each project's recent requests (time, method, status, latency, client network; never the key),
     * written in batches every flushMs and cut to the newest keepPerProject rows of each project. At
     * most maxPending rows wait for a write; more are dropped and counted (a database that cannot keep
     * up must not grow the heap).
     */
    requestLog: z
      .object({
        enabled: z.boolean().default(true),
        keepPerProject: z.number().int().min(1).max(100_000).default(500),
        flushMs: z.number().int().min(100).max(60_000).default(2_000),
        maxPending: z.number().int().min(1).max(1_000_000).default(10_000),
      })
      .prefault({}),
    /**
     * When the console and the log warn: a sponsorship rule whose spend reached capShare of a cap (daily,
     * or total budget), and a project balance that covers fewer than tankRunwayDays days of its average
     * spend over the last 7 days (or is empty). Checked every checkEverySec by the background loop.
     */
    alerts: z
      .object({
        capShare: z.number().gt(0).max(1).default(0.8),
        tankRunwayDays: z.number().gt(0).max(365).default(3),
        checkEverySec: z.number().int().min(5).max(86_400).default(60),
      })
      .prefault({}),
  })
  .prefault({});
