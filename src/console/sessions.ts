import { randomBytes } from 'node:crypto';
import type { Queryable } from '../store/db.ts';
import { secretDigest } from '../store/digest.ts';

export type SessionState = 'none' | 'valid' | 'expired';

/**
 * Console sign-ins: the browser holds a random secret in a cookie, the database its digest and the
 * digest of the admin token it signed in with. A session lasts no longer than that token: it is checked
 * on every request, in the same single query (a revoked token's sessions end at once, not after 12 h).
 * `configured` are the digests of the config's admin tokens, which the database does not hold.
 */
export function sessionStore(db: Queryable, ttlSec: number, configured: ReadonlySet<string>) {
  const read = async (secret: string | undefined) => {
    if (!secret || secret.length > 200) return undefined;
    const r = await db.query<{ live: boolean; ended: boolean; token_hash: string | null; db_token: boolean }>(
      `SELECT s.expires_at > now() AS live, s.ended_at IS NOT NULL AS ended, s.token_hash,
              EXISTS (SELECT 1 FROM admin_tokens t WHERE t.token_hash = s.token_hash AND t.revoked_at IS NULL) AS db_token
         FROM console_sessions s WHERE s.id_hash = $1`,
      [secretDigest(secret)],
    );
    return r.rows[0];
  };
  return {
    /** A session for a verified admin token. */
    async create(adminToken: string): Promise<{ secret: string; expiresAt: Date }> {
      const secret = randomBytes(32).toString('base64url');
      const r = await db.query<{ expires_at: Date | string }>(
        `INSERT INTO console_sessions (id_hash, token_hash, expires_at) VALUES ($1, $2, now() + make_interval(secs => $3)) RETURNING expires_at`,
        [secretDigest(secret), secretDigest(adminToken), ttlSec],
      );
      // Sign-ins are rare: a good moment to forget sessions long dead.
      await db.query(`DELETE FROM console_sessions WHERE expires_at < now() - interval '7 days'`);
      return { secret, expiresAt: new Date(r.rows[0].expires_at) };
    },

    async check(secret: string | undefined): Promise<SessionState> {
      const row = await read(secret);
      if (!row || row.ended) return 'none';
      // Its admin token revoked (or gone from the config): the session is over, whatever its expiry.
      if (row.token_hash === null || !(row.db_token || configured.has(row.token_hash))) return 'none';
      return row.live ? 'valid' : 'expired';
    },

    async end(secret: string | undefined): Promise<void> {
      if (!secret) return;
      await db.query('UPDATE console_sessions SET ended_at = now() WHERE id_hash = $1 AND ended_at IS NULL', [secretDigest(secret)]);
    },

    /** Ends every session signed in with the same admin token as this session (or this bearer token); how many ended. */
    async endEverywhere(who: { session?: string; adminToken?: string }): Promise<number> {
      const tokenHash = who.adminToken !== undefined ? secretDigest(who.adminToken) : (await read(who.session))?.token_hash;
      if (!tokenHash) return 0;
      const r = await db.query('UPDATE console_sessions SET ended_at = now() WHERE token_hash = $1 AND ended_at IS NULL', [tokenHash]);
      return r.rowCount;
    },
  };
}
export type SessionStore = ReturnType<typeof sessionStore>;
