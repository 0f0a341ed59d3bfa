import { randomBytes } from 'node:crypto';
import type { Queryable } from '../store/db.ts';
import { secretDigest } from '../store/digest.ts';

export type SessionState = 'none' | 'valid' | 'expired';

/** Console sign-ins: the browser holds a random secret in a cookie, the database its digest. */
export function sessionStore(db: Queryable, ttlSec: number) {
  return {
    async create(): Promise<{ secret: string; expiresAt: Date }> {
      const secret = randomBytes(32).toString('base64url');
      const r = await db.query<{ expires_at: Date | string }>(
        `INSERT INTO console_sessions (id_hash, expires_at) VALUES ($1, now() + make_interval(secs => $2)) RETURNING expires_at`,
        [secretDigest(secret), ttlSec],
      );
      // Sign-ins are rare: a good moment to forget sessions long dead.
      await db.query(`DELETE FROM console_sessions WHERE expires_at < now() - interval '7 days'`);
      return { secret, expiresAt: new Date(r.rows[0].expires_at) };
    },

    async check(secret: string | undefined): Promise<SessionState> {
      if (!secret || secret.length > 200) return 'none';
      const r = await db.query<{ live: boolean; ended: boolean }>(
        'SELECT expires_at > now() AS live, ended_at IS NOT NULL AS ended FROM console_sessions WHERE id_hash = $1',
        [secretDigest(secret)],
      );
      const row = r.rows[0];
      if (!row || row.ended) return 'none';
      return row.live ? 'valid' : 'expired';
    },

    async end(secret: string | undefined): Promise<void> {
      if (!secret) return;
      await db.query('UPDATE console_sessions SET ended_at = now() WHERE id_hash = $1 AND ended_at IS NULL', [secretDigest(secret)]);
    },
  };
}
export type SessionStore = ReturnType<typeof sessionStore>;
