import type { AccessKeyRepo, ResolvedKey } from '../store/access-keys.ts';
import { LruCache } from '../util/lru.ts';
import type { Logger } from '../telemetry/logger.ts';
import { failureLevel } from '../store/outage.ts';

export type AuthOutcome = { kind: 'none' } | { kind: 'invalid' } | ({ kind: 'ok' } & ResolvedKey);

type KeyOutcome = Readonly<{ kind: 'ok' } & ResolvedKey>;

const NONE: AuthOutcome = Object.freeze({ kind: 'none' });
const INVALID: AuthOutcome = Object.freeze({ kind: 'invalid' });

/**
 * Resolves access keys and counts their use. Lookups are cached briefly (valid keys `cacheMs`,
 * unknown ones a fifth of it) so a busy key costs no query per request; a key revoked through
 * `revoke` is refused at once, one revoked by another process within `cacheMs`. Counts are
 * flushed in batches: one UPDATE every few seconds, not one per request.
 *
 * The caches are keyed by the key as sent, not its SHA-256: hashing on every request cost more
 * than the rest of a cache hit, and the plaintext is in this process's memory with each request
 * anyway. Only the database holds nothing but hashes.
 */
export class Authenticator {
  /** Per key, its uses since the last flush by method family (FAMILIES' order). */
  private pending = new Map<number, number[]>();
  private timer: NodeJS.Timeout | undefined;
  /** The outcome itself is cached, so a hit allocates nothing. */
  private readonly live: LruCache<KeyOutcome>;
  private readonly unknown: LruCache<true>;
  private readonly lookups = new Map<string, Promise<KeyOutcome | null>>();
  private readonly flushEveryMs: number;

  constructor(
    private readonly keys: AccessKeyRepo,
    private readonly log: Logger,
    opts: { cacheMs?: number; flushEveryMs?: number } = {},
  ) {
    const ms = opts.cacheMs ?? 30_000;
    this.live = new LruCache(10_000, ms);
    this.unknown = new LruCache(10_000, Math.floor(ms / 5));
    this.flushEveryMs = opts.flushEveryMs ?? 2_000;
  }

  private lookup(key: string): Promise<KeyOutcome | null> | KeyOutcome | null {
    const now = Date.now();
    const cached = this.live.get(key, now);
    if (cached) return cached;
    if (this.unknown.get(key, now)) return null;
    let p = this.lookups.get(key);
    if (!p) {
      p = this.keys.resolve(key).then((r) => {
        const outcome = r ? Object.freeze({ kind: 'ok' as const, ...r }) : null;
        // A revoke that ran while this query was in flight must not be undone by caching its answer.
        if (this.lookups.get(key) !== p) return outcome;
        if (outcome) this.live.set(key, outcome);
        else this.unknown.set(key, true);
        return outcome;
      });
      const entry = p;
      entry
        .finally(() => {
          if (this.lookups.get(key) === entry) this.lookups.delete(key);
        })
        .catch(() => undefined);
      this.lookups.set(key, p);
    }
    return p;
  }

  /** `family`: the index of the request's method family (access/usage-family.ts), what the use is counted under. */
  async authenticate(key: string | undefined, family = 3): Promise<AuthOutcome> {
    const known = this.authenticateCached(key, family);
    if (known) return known;
    const resolved = await this.lookup(key!);
    return resolved ? this.counted(resolved, family) : INVALID;
  }

  /**
   * The outcome when no query is needed (no key, a malformed or cached one), counted like
   * `authenticate`; undefined otherwise. Lets hot paths skip a promise per request.
   */
  authenticateCached(key: string | undefined, family = 3): AuthOutcome | undefined {
    const known = this.peek(key);
    return known?.kind === 'ok' ? this.counted(known, family) : known;
  }

  /**
   * What `authenticateCached` would answer, without counting the use (`counted` does, once the
   * request is taken): for a path that may still hand the request on to one that authenticates it.
   */
  peek(key: string | undefined): AuthOutcome | undefined {
    if (!key) return NONE;
    // Keys have a fixed shape; anything wildly off is refused before touching the database.
    if (key.length > 200) return INVALID;
    const found = this.lookup(key);
    if (found instanceof Promise) return undefined;
    return found ?? INVALID;
  }

  /** Counts one use of a key under a method family (flushed in batches). */
  counted<T extends KeyOutcome>(resolved: T, family = 3): T {
    let per = this.pending.get(resolved.keyId);
    if (!per) this.pending.set(resolved.keyId, (per = [0, 0, 0, 0]));
    per[family]++;
    if (!this.timer) {
      this.timer = setTimeout(() => void this.flush(), this.flushEveryMs);
      this.timer.unref?.();
    }
    return resolved;
  }

  /** Revokes a key and drops it from this process's cache, so the next request is refused. */
  async revoke(key: string): Promise<boolean> {
    const done = await this.keys.revoke(key);
    this.live.delete(key);
    this.lookups.delete(key);
    return done;
  }

  /** Drops every cached answer (a project archived, keys revoked by id). */
  forgetAll(): void {
    this.live.clear();
    this.unknown.clear();
    this.lookups.clear();
  }

  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    this.pending = new Map();
    try {
      await this.keys.recordUsage(batch);
    } catch (err) {
      this.log[failureLevel(err)]({ err }, 'could not record access key usage');
    }
  }
}
