import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { AccessKeyRepo, ResolvedKey } from '../store/access-keys.ts';
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
 * Resolves access keys and counts their use. Counts are flushed in batches so a busy key
 * costs one UPDATE every few seconds, not one per request.
 */
export class Authenticator {
  private pending = new Map<number, number>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly keys: AccessKeyRepo,
    private readonly log: Logger,
    private readonly flushEveryMs = 2_000,
  ) {}

  async authenticate(key: string | undefined): Promise<AuthOutcome> {
    if (!key) return { kind: 'none' };
    // Keys have a fixed shape; anything wildly off is refused before touching the database.
    if (key.length > 200) return { kind: 'invalid' };
    const resolved = await this.keys.resolve(key);
    if (!resolved) return { kind: 'invalid' };
    this.pending.set(resolved.keyId, (this.pending.get(resolved.keyId) ?? 0) + 1);
    this.timer ??= setTimeout(() => void this.flush(), this.flushEveryMs);
    this.timer.unref?.();
    return { kind: 'ok', ...resolved };
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
