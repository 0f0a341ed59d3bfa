import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { hashAccessKey, type AccessKeyRepo, type ResolvedKey } from '../store/access-keys.ts';
import { LruCache } from '../metadata/lru.ts';
import type { Logger } from '../telemetry/logger.ts';

export type AuthOutcome = { kind: 'none' } | { kind: 'invalid' } | ({ kind: 'ok' } & ResolvedKey);

export function readAccessKey(req: FastifyRequest, allowQuery: boolean): string | undefined {
  const header = req.headers['x-access-key'];
  const fromHeader = Array.isArray(header) ? header[0] : header;
  if (fromHeader && fromHeader.trim()) return fromHeader.trim();
  if (allowQuery) {
    const q = (req.query as Record<string, unknown> | undefined)?.accessKey;
    if (typeof q === 'string' && q.trim()) return q.trim();
  }
  return undefined;
}

/**
 * Resolves access keys and counts their use. Lookups are cached briefly (valid keys `cacheMs`,
 * unknown ones a fifth of it) so a busy key costs no query per request; a key revoked through
 * `revoke` is refused at once, one revoked by another process within `cacheMs`. Counts are
 * flushed in batches: one UPDATE every few seconds, not one per request.
 */
export class Authenticator {
  private pending = new Map<number, number>();
  private timer: NodeJS.Timeout | undefined;
  private readonly live: LruCache<ResolvedKey>;
  private readonly unknown: LruCache<true>;
  private readonly lookups = new Map<string, Promise<ResolvedKey | null>>();
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

  private lookup(key: string): Promise<ResolvedKey | null> {
    const h = hashAccessKey(key);
    const cached = this.live.get(h);
    if (cached) return Promise.resolve(cached);
    if (this.unknown.get(h)) return Promise.resolve(null);
    let p = this.lookups.get(h);
    if (!p) {
      p = this.keys.resolve(key).then((r) => {
        if (r) this.live.set(h, r);
        else this.unknown.set(h, true);
        return r;
      });
      p.finally(() => this.lookups.delete(h)).catch(() => undefined);
      this.lookups.set(h, p);
    }
    return p;
  }

  async authenticate(key: string | undefined): Promise<AuthOutcome> {
    if (!key) return { kind: 'none' };
    // Keys have a fixed shape; anything wildly off is refused before touching the database.
    if (key.length > 200) return { kind: 'invalid' };
    const resolved = await this.lookup(key);
    if (!resolved) return { kind: 'invalid' };
    this.pending.set(resolved.keyId, (this.pending.get(resolved.keyId) ?? 0) + 1);
    this.timer ??= setTimeout(() => void this.flush(), this.flushEveryMs);
    this.timer.unref?.();
    return { kind: 'ok', ...resolved };
  }

  /** Revokes a key and drops it from this process's cache, so the next request is refused. */
  async revoke(key: string): Promise<boolean> {
    const done = await this.keys.revoke(key);
    this.live.delete(hashAccessKey(key));
    return done;
  }

  /** Drops every cached answer (a project archived, keys revoked by id). */
  forgetAll(): void {
    this.live.clear();
    this.unknown.clear();
  }

  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    this.pending = new Map();
    try {
      await this.keys.recordUsage(batch);
    } catch (err) {
      this.log.warn({ err }, 'could not record access key usage');
    }
  }
}

/** `Authorization: Bearer <token>` (any case of "bearer"), or undefined. */
export function readBearer(req: FastifyRequest): string | undefined {
  const h = req.headers.authorization;
  const m = typeof h === 'string' ? /^bearer\s+(.+)$/i.exec(h.trim()) : null;
  return m ? m[1].trim() : undefined;
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** Operator tokens for the admin API, compared in constant time. */
export class AdminAuthenticator {
  private readonly digests: Buffer[];

  constructor(tokens: readonly string[]) {
    this.digests = tokens.map(digest);
  }

  verify(token: string | undefined): boolean {
    if (!token) return false;
    const d = digest(token);
    return this.digests.some((x) => timingSafeEqual(x, d));
  }
}
