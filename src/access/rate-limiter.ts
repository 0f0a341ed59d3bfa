import type { Queryable } from '../store/db.ts';
import type { AuthOutcome } from './authenticator.ts';

export interface BucketLimit {
  ratePerSec: number;
  burst: number;
}

export interface RateLimitDefaults {
  ratePerSec?: number;
  burst?: number;
}

/*
 * One statement takes up to $4 tokens: refill by the time since the last take (capped at the burst),
 * then grant what is there (whole tokens, at most $4), only if at least one is. The row lock of
 * ON CONFLICT DO UPDATE serialises concurrent takes on one key, across every process on the
 * database, and the WHERE is re-checked on the row as the previous take left it, so two processes
 * cannot both spend the last token. GREATEST keeps the clock monotonic when a statement that started
 * earlier commits later.
 */
const LEVEL_EXPR = `LEAST($3::float8, b.tokens + GREATEST(0, EXTRACT(EPOCH FROM now() - b.updated_at)::float8) * $2::float8)`;
const TAKE = `
INSERT INTO rate_buckets AS b (key_id, tokens, updated_at, last_grant)
VALUES ($1, $3::float8 - LEAST($4::float8, FLOOR($3::float8)), now(), LEAST($4::float8, FLOOR($3::float8)))
ON CONFLICT (key_id) DO UPDATE
  SET tokens = ${LEVEL_EXPR} - LEAST($4::float8, FLOOR(${LEVEL_EXPR})),
      last_grant = LEAST($4::float8, FLOOR(${LEVEL_EXPR})),
      updated_at = GREATEST(b.updated_at, now())
  WHERE ${LEVEL_EXPR} >= 1
RETURNING last_grant`;

const LEVEL = `SELECT ${LEVEL_EXPR} AS tokens FROM rate_buckets b WHERE key_id = $1`;

/** Tokens a process holds for this long at most: what it has not spent by then is given up, never reused. */
const LOCAL_HOLD_MS = 100;

/**
 * How many tokens one database write may take: a tenth of a second's worth, at most a quarter of the
 * burst and 100. A slow key (a few per second) takes one at a time, so its limit stays exact.
 */
export function grantSize(limit: BucketLimit): number {
  return Math.max(1, Math.min(100, Math.floor(limit.ratePerSec / 10), Math.floor(limit.burst / 4)));
}

export type TakeResult = { ok: true } | { ok: false; retryAfterSec: number };

/** Per access key token buckets, kept in the database so the limit holds for a fleet of processes. */
export class RateLimiter {
  /** Tokens this process took from a key's bucket and has not spent yet. */
  private readonly local = new Map<number, { tokens: number; until: number }>();

  constructor(
    private readonly db: Queryable,
    private readonly defaults: RateLimitDefaults,
  ) {}

  /** The key's own bucket, else the configured default; null: not limited. */
  limitFor(key: { ratePerSec: number | null; rateBurst: number | null }): BucketLimit | null {
    const ratePerSec = key.ratePerSec ?? this.defaults.ratePerSec;
    if (!ratePerSec) return null;
    // A burst below one request could never admit anything.
    const burst = key.rateBurst ?? this.defaults.burst ?? Math.max(1, Math.ceil(ratePerSec));
    return { ratePerSec, burst: Math.max(1, burst) };
  }

  /** Spends a token held locally, without a query; false when none is left (or they are too old). */
  private spendLocal(keyId: number): boolean {
    const held = this.local.get(keyId);
    if (!held || held.tokens < 1 || Date.now() > held.until) return false;
    held.tokens--;
    return true;
  }

  async take(keyId: number, limit: BucketLimit): Promise<TakeResult> {
    const r = await this.db.query<{ last_grant: number | string }>(TAKE, [keyId, limit.ratePerSec, limit.burst, grantSize(limit)]);
    if (r.rows.length > 0) {
      const granted = Number(r.rows[0].last_grant);
      if (granted > 1) this.local.set(keyId, { tokens: granted - 1, until: Date.now() + LOCAL_HOLD_MS });
      return { ok: true };
    }
    const level = await this.db.query<{ tokens: number | string }>(LEVEL, [keyId, limit.ratePerSec, limit.burst]);
    const have = Number(level.rows[0]?.tokens ?? 0);
    return { ok: false, retryAfterSec: Math.max(1, Math.ceil((1 - have) / limit.ratePerSec)) };
  }

  /**
   * Spends a token when that needs no query (no limit, or one held locally): true. False when only the
   * database can say, and then nothing is taken (`admit` will).
   */
  spendNow(outcome: AuthOutcome): boolean {
    if (outcome.kind !== 'ok') return true;
    const limit = this.limitFor(outcome);
    return !limit || this.spendLocal(outcome.keyId);
  }

  /**
   * Spends a token of the caller's key; resolves to the refusal when the bucket is empty. Returns
   * undefined (no promise, no query) for callers with no limit or a token held locally, to keep the
   * hot path free.
   */
  admit(outcome: AuthOutcome | undefined): Promise<RateRefusal | undefined> | undefined {
    if (outcome?.kind !== 'ok') return undefined;
    const limit = this.limitFor(outcome);
    if (!limit) return undefined;
    if (this.spendLocal(outcome.keyId)) return undefined;
    return this.take(outcome.keyId, limit).then((r) => (r.ok ? undefined : { ...limit, retryAfterSec: r.retryAfterSec }));
  }
}

/** Why a request was not admitted: the key's limit and when to come back. */
export interface RateRefusal extends BucketLimit {
  retryAfterSec: number;
}
