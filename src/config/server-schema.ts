import { z } from 'zod';
import { LEADERSHIP_DEFAULTS } from '../store/leadership.ts';
import { PG_SESSION_DEFAULTS } from '../store/pg-session.ts';

// The config sections of a serving process itself: its database connections, who may call it (access
// keys, admin tokens), how it logs and counts its requests, and how it shuts down.

const AccessMode = z.enum(['required', 'optional']);

/**
 * PostgreSQL connections of each process (ignored on PGlite; docs/production.md): the main pool's
 * size (the relayer's dispatchers add 5 of their own), and the session bounds that keep a frozen
 * lock holder from stalling the fleet. 0 turns a bound off.
 */
export const PostgresConfigSchema = z
  .object({
    poolSize: z.number().int().min(1).max(1000).default(PG_SESSION_DEFAULTS.poolSize),
    lockTimeoutMs: z.number().int().min(0).default(PG_SESSION_DEFAULTS.lockTimeoutMs),
    idleInTransactionTimeoutMs: z.number().int().min(0).default(PG_SESSION_DEFAULTS.idleInTransactionTimeoutMs),
    /**
     * One process per chain follows it (leadership.ts): how often the others try to take over, and
     * the leader checks its lock connection. A dead leader is replaced within about this.
     */
    leaderCheckMs: z.number().int().min(100).max(600_000).default(LEADERSHIP_DEFAULTS.checkMs),
    /** The server ends a lock connection silent this long (a frozen or cut-off leader lets go); above leaderCheckMs. */
    leaderSessionTimeoutMs: z.number().int().min(1_000).max(3_600_000).default(LEADERSHIP_DEFAULTS.sessionTimeoutMs),
  })
  .refine((p) => p.leaderSessionTimeoutMs > 2 * p.leaderCheckMs, {
    message: 'postgres.leaderSessionTimeoutMs must be more than twice postgres.leaderCheckMs (a leader that checks in time must not lose its lock)',
  })
  .prefault({});

export const AuthConfigSchema = z
  .object({
    rpc: AccessMode.default('required'),
    rest: AccessMode.default('optional'),
    /** RPC methods answered without a key even when rpc is 'required'. */
    publicMethods: z.array(z.string()).default(['Ping', 'Version']),
    /** How long a key lookup is cached per process; a revocation elsewhere takes effect within this. */
    keyCacheMs: z.number().int().min(0).default(30_000),
    /**
     * Default token bucket of every access key (a key's own setting wins). No ratePerSec: keys
     * without their own limit are not limited, and cost no database write per request.
     */
    rateLimit: z
      .object({
        ratePerSec: z.number().positive().optional(),
        burst: z.number().int().min(1).optional(),
      })
      .prefault({}),
  })
  .prefault({});

export const AdminConfigSchema = z
  .object({
    /** Bearer tokens for the admin API (/rpc/Admin/); METARELAY_ADMIN_TOKEN adds one. Keep them secret. */
    tokens: z.array(z.string().min(16, 'admin tokens must be at least 16 characters')).default([]),
  })
  .prefault({});

/** SIGTERM/SIGINT: reads are answered this long after new work is refused; everything ends within deadlineMs. */
export const ShutdownConfigSchema = z.object({ graceMs: z.number().int().min(0).default(2_000), deadlineMs: z.number().int().positive().default(30_000) }).prefault({});

/**
 * serve's request lines. Errors (4xx/5xx) and requests slower than slowMs are always logged;
 * successful ones at most successPerSec a second ('all': every one; 0: none). One line per
 * request was ~12 % of a cached read's CPU.
 */
export const RequestLogConfigSchema = z
  .object({
    successPerSec: z.union([z.number().int().min(0), z.literal('all')]).default(10),
    slowMs: z.number().int().positive().default(1_000),
  })
  .strict()
  .prefault({});

/**
 * Prometheus metrics. On the API port `/metrics` answers an admin token only (Authorization: Bearer):
 * its counters, sender balances and prices are the operator's. `listen` also serves it without a
 * credential on a second address (`serve` only), for a scraper on a private interface.
 */
export const MetricsConfigSchema = z
  .object({
    listen: z
      .object({ host: z.string().min(1).default('127.0.0.1'), port: z.number().int().min(0).max(65535) })
      .strict()
      .optional(),
  })
  .strict()
  .prefault({});
