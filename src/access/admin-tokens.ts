import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { Queryable } from '../store/db.ts';
import { secretDigest } from '../store/digest.ts';

export const ADMIN_TOKEN_PREFIX = 'mra_';

/**
 * Operator tokens: those listed in the config (admin.tokens) and those made by
 * `metarelay admin create`, of which the database keeps only a SHA-256 digest (32 random bytes:
 * nothing to gain from a slow hash).
 */
export function adminTokenStore(db: Queryable, configured: readonly string[]) {
  const configDigests = configured.map((t) => Buffer.from(secretDigest(t), 'hex'));
  return {
    /** Returns the plaintext token: the only time it exists outside the operator's hands. */
    async create(label = ''): Promise<{ token: string; id: number }> {
      const token = ADMIN_TOKEN_PREFIX + randomBytes(32).toString('base64url');
      const r = await db.query<{ id: number | string }>('INSERT INTO admin_tokens (token_hash, label) VALUES ($1, $2) RETURNING id', [secretDigest(token), label]);
      return { token, id: Number(r.rows[0].id) };
    },

    async revoke(id: number): Promise<boolean> {
      const r = await db.query('UPDATE admin_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL', [id]);
      return r.rowCount > 0;
    },

    async verify(token: string | undefined): Promise<boolean> {
      if (!token || token.length > 200) return false;
      const d = Buffer.from(secretDigest(token), 'hex');
      if (configDigests.some((x) => timingSafeEqual(x, d))) return true;
      const r = await db.query('SELECT 1 FROM admin_tokens WHERE token_hash = $1 AND revoked_at IS NULL', [d.toString('hex')]);
      return r.rows.length > 0;
    },
  };
}
export type AdminTokenStore = ReturnType<typeof adminTokenStore>;
