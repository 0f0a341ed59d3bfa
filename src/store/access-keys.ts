import { randomBytes } from 'node:crypto';
import type { Queryable } from './db.ts';
import { secretDigest } from './digest.ts';
import { toProject, type Project } from './projects.ts';

export const KEY_PREFIX = 'mr_';
/** Secret keys say so in their first characters, so one pasted into an app's code is easy to spot. */
export const SECRET_KEY_PREFIX = 'mr_sk_';

/** What a key may do (access/key-kinds.ts decides): publishable keys read, relay and stream; secret keys also write. */
export const KEY_KINDS = ['publishable', 'secret'] as const;
export type KeyKind = (typeof KEY_KINDS)[number];

/** The method families requests are counted by (access/usage-family.ts reads a request's from its path). */
export const FAMILIES = ['metadata', 'relayer', 'indexer', 'other'] as const;
export type UsageFamily = (typeof FAMILIES)[number];

/** 24 random bytes: high entropy, so a fast unsalted digest is a sound way to store them. */
export function generateAccessKey(kind: KeyKind = 'publishable'): string {
  return (kind === 'secret' ? SECRET_KEY_PREFIX : KEY_PREFIX) + randomBytes(24).toString('base64url');
}

/** The part of a key kept in clear to tell keys apart in lists. */
const prefixOf = (key: string) => key.slice(0, (key.startsWith(SECRET_KEY_PREFIX) ? SECRET_KEY_PREFIX : KEY_PREFIX).length + 6);

export const hashAccessKey = secretDigest;

export interface AccessKeyInfo {
  id: number;
  projectId: number;
  prefix: string;
  label: string;
  kind: KeyKind;
  /** A publishable key's allowed origins; null: any. */
  allowedOrigins: string[] | null;
  createdAt: string;
  revokedAt: string | null;
  lastUsedAt: string | null;
  requestCount: number;
  /** The key's own token bucket; null: the configured default. */
  ratePerSec: number | null;
  rateBurst: number | null;
}

/** What a key list keeps: live or revoked keys, whose label or prefix contains a text. */
export interface KeyFilter {
  state?: 'live' | 'revoked';
  search?: string;
}
const KEY_FILTER = `($2::text IS NULL OR ($2 = 'live') = (revoked_at IS NULL)) AND ($3::text IS NULL OR position($3 in lower(label)) > 0 OR position($3 in lower(key_prefix)) > 0)`;

interface KeyRow {
  id: number | string;
  project_id: number | string;
  key_prefix: string;
  label: string;
  kind: KeyKind;
  allowed_origins: string[] | null;
  created_at: Date | string;
  revoked_at: Date | string | null;
  last_used_at: Date | string | null;
  request_count: number | string;
  rate_per_sec: number | string | null;
  rate_burst: number | string | null;
}

const iso = (v: Date | string | null): string | null => (v == null ? null : new Date(v).toISOString());

function toInfo(r: KeyRow): AccessKeyInfo {
  return {
    id: Number(r.id),
    projectId: Number(r.project_id),
    prefix: r.key_prefix,
    label: r.label,
    kind: r.kind,
    allowedOrigins: r.allowed_origins ?? null,
    createdAt: iso(r.created_at)!,
    revokedAt: iso(r.revoked_at),
    lastUsedAt: iso(r.last_used_at),
    requestCount: Number(r.request_count),
    ...limitsOf(r),
  };
}

const limitsOf = (r: KeyRow) => ({
  ratePerSec: r.rate_per_sec == null ? null : Number(r.rate_per_sec),
  rateBurst: r.rate_burst == null ? null : Number(r.rate_burst),
});

/** How a key is made: its kind (publishable unless said), a publishable key's allowed origins, its own rate limit. */
export interface KeyOptions {
  kind?: KeyKind;
  allowedOrigins?: string[] | null;
  ratePerSec?: number;
  rateBurst?: number;
}

export interface ResolvedKey {
  keyId: number;
  project: Project;
  /** `keyKind`: AuthOutcome's `kind` says whether the key was found. */
  keyKind: KeyKind;
  allowedOrigins: string[] | null;
  /** The key's own rate limit, when it has one. */
  ratePerSec: number | null;
  rateBurst: number | null;
}

export function accessKeyRepo(db: Queryable) {
  return {
    /**
     * Returns the plaintext key: the only time it exists outside the caller's hands. Its own rate limit,
     * if given, is written in the same row (no key ever exists without the limit it was made with).
     */
    async create(projectId: number, label = '', opts: KeyOptions = {}): Promise<{ key: string; info: AccessKeyInfo }> {
      const kind = opts.kind ?? 'publishable';
      const key = generateAccessKey(kind);
      const res = await db.query<KeyRow>(
        `INSERT INTO access_keys (project_id, key_hash, key_prefix, label, rate_per_sec, rate_burst, kind, allowed_origins) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`,
        [projectId, hashAccessKey(key), prefixOf(key), label, opts.ratePerSec ?? null, opts.rateBurst ?? null, kind, kind === 'secret' ? null : (opts.allowedOrigins ?? null)],
      );
      return { key, info: toInfo(res.rows[0]) };
    },

    /**
     * Replaces a live key of the project with a new one of the same kind, label, origins and limits, and
     * revokes the old one, in one statement (never both live, never neither). The new plaintext key, or
     * null when the project has no such live key.
     */
    async rotate(projectId: number, keyId: number): Promise<{ key: string; info: AccessKeyInfo } | null> {
      const publishable = generateAccessKey('publishable');
      const secret = generateAccessKey('secret');
      const res = await db.query<KeyRow>(
        `WITH old AS (UPDATE access_keys SET revoked_at = now() WHERE id = $2 AND project_id = $1 AND revoked_at IS NULL RETURNING *)
         INSERT INTO access_keys (project_id, key_hash, key_prefix, label, rate_per_sec, rate_burst, kind, allowed_origins)
         SELECT project_id, CASE WHEN kind = 'secret' THEN $5 ELSE $3 END, CASE WHEN kind = 'secret' THEN $6 ELSE $4 END, label, rate_per_sec, rate_burst, kind, allowed_origins FROM old
         RETURNING *`,
        [projectId, keyId, hashAccessKey(publishable), prefixOf(publishable), hashAccessKey(secret), prefixOf(secret)],
      );
      const row = res.rows[0];
      return row ? { key: row.kind === 'secret' ? secret : publishable, info: toInfo(row) } : null;
    },

    /**
     * Label, rate limit and allowed origins of a project's key; a rate or burst set to null falls back to
     * the configured default, one left out stays; origins null: any. The key as it now is; null: no such
     * key in the project, or origins given for a secret key (which has none: it is refused with any Origin).
     */
    async update(projectId: number, keyId: number, patch: { label?: string; ratePerSec?: number | null; rateBurst?: number | null; allowedOrigins?: string[] | null }): Promise<AccessKeyInfo | null> {
      const res = await db.query<KeyRow>(
        `UPDATE access_keys SET label = COALESCE($3, label),
           rate_per_sec = CASE WHEN $4::boolean THEN $5::float8 ELSE rate_per_sec END,
           rate_burst = CASE WHEN $6::boolean THEN $7::int ELSE rate_burst END,
           allowed_origins = CASE WHEN $8::boolean THEN $9::text[] ELSE allowed_origins END
         WHERE id = $2 AND project_id = $1 AND NOT ($9::text[] IS NOT NULL AND kind = 'secret') RETURNING *`,
        [
          projectId,
          keyId,
          patch.label ?? null,
          patch.ratePerSec !== undefined,
          patch.ratePerSec ?? null,
          patch.rateBurst !== undefined,
          patch.rateBurst ?? null,
          patch.allowedOrigins !== undefined,
          patch.allowedOrigins ?? null,
        ],
      );
      return res.rows[0] ? toInfo(res.rows[0]) : null;
    },

    /** A live key of a live project, or null. */
    async resolve(key: string): Promise<ResolvedKey | null> {
      const res = await db.query<KeyRow & { p_id: number; p_name: string; p_created_at: Date; p_archived_at: Date | null; p_allowed: number[] | null }>(
        `SELECT k.*, p.id AS p_id, p.name AS p_name, p.created_at AS p_created_at, p.archived_at AS p_archived_at, p.allowed_chain_ids AS p_allowed
           FROM access_keys k JOIN projects p ON p.id = k.project_id
          WHERE k.key_hash = $1 AND k.revoked_at IS NULL AND p.archived_at IS NULL`,
        [hashAccessKey(key)],
      );
      const r = res.rows[0];
      if (!r) return null;
      return {
        keyId: Number(r.id),
        project: toProject({ id: r.p_id, name: r.p_name, created_at: r.p_created_at, archived_at: r.p_archived_at, allowed_chain_ids: r.p_allowed }),
        keyKind: r.kind,
        allowedOrigins: r.allowed_origins ?? null,
        ...limitsOf(r),
      };
    },

    /** Revokes by plaintext key; false when no live key matched. */
    async revoke(key: string): Promise<boolean> {
      const res = await db.query('UPDATE access_keys SET revoked_at = now() WHERE key_hash = $1 AND revoked_at IS NULL', [hashAccessKey(key)]);
      return res.rowCount > 0;
    },

    /** Revokes a live key by id, only within `projectId` when given; false when no live key matched. */
    async revokeById(id: number, projectId?: number): Promise<boolean> {
      const res = await db.query('UPDATE access_keys SET revoked_at = now() WHERE id = $1 AND ($2::bigint IS NULL OR project_id = $2) AND revoked_at IS NULL', [id, projectId ?? null]);
      return res.rowCount > 0;
    },

    async list(projectId: number): Promise<AccessKeyInfo[]> {
      const res = await db.query<KeyRow>('SELECT * FROM access_keys WHERE project_id = $1 ORDER BY id', [projectId]);
      return res.rows.map(toInfo);
    },

    /** A project's keys newest first, before a key id (the cursor): live or revoked ones, whose label or prefix contains `search`. */
    async page(projectId: number, f: KeyFilter, before: number | undefined, limit: number): Promise<AccessKeyInfo[]> {
      const res = await db.query<KeyRow>(`SELECT * FROM access_keys WHERE project_id = $1 AND ${KEY_FILTER} AND ($4::bigint IS NULL OR id < $4) ORDER BY id DESC LIMIT $5`, [
        projectId,
        f.state ?? null,
        f.search?.toLowerCase() ?? null,
        before ?? null,
        limit,
      ]);
      return res.rows.map(toInfo);
    },

    /** How many of a project's keys match `search`, live and revoked. */
    async counts(projectId: number, f: KeyFilter): Promise<{ live: number; revoked: number }> {
      const res = await db.query<{ live: string; revoked: string }>(
        `SELECT count(*) FILTER (WHERE revoked_at IS NULL)::text AS live, count(*) FILTER (WHERE revoked_at IS NOT NULL)::text AS revoked
           FROM access_keys WHERE project_id = $1 AND ${KEY_FILTER}`,
        [projectId, null, f.search?.toLowerCase() ?? null],
      );
      return { live: Number(res.rows[0].live), revoked: Number(res.rows[0].revoked) };
    },

    /**
     * Adds batched request counts, per key either a total (counted as 'other') or one count per method
     * family (FAMILIES' order). One statement per flush rather than a write per request: it adds to the
     * keys' totals and to this hour's roll-up (key_usage_hourly) together, so the two never disagree.
     */
    async recordUsage(counts: Map<number, number | readonly number[]>): Promise<void> {
      const ids: number[] = [];
      const families: string[] = [];
      const n: number[] = [];
      for (const [id, c] of counts) {
        const per = typeof c === 'number' ? [0, 0, 0, c] : c;
        per.forEach((x, i) => {
          if (x > 0) ids.push(id), families.push(FAMILIES[i]), n.push(x);
        });
      }
      if (ids.length === 0) return;
      await db.query(
        `WITH u AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS u(id, family, n)),
              k AS (UPDATE access_keys k SET request_count = k.request_count + t.n, last_used_at = now()
                      FROM (SELECT id, SUM(n) AS n FROM u GROUP BY id) t WHERE k.id = t.id RETURNING k.id)
         INSERT INTO key_usage_hourly (key_id, hour, family, requests)
         SELECT u.id, to_timestamp(floor(extract(epoch FROM now()) / 3600) * 3600), u.family, u.n FROM u JOIN k ON k.id = u.id
         ON CONFLICT (key_id, hour, family) DO UPDATE SET requests = key_usage_hourly.requests + EXCLUDED.requests`,
        [ids, families, n],
      );
    },

    /** A project's requests per UTC day, key and family over the last `days` days, from the hourly roll-up. */
    async usageByDay(projectId: number, days: number): Promise<Array<{ day: string; keyId: number; family: UsageFamily; requests: number }>> {
      const r = await db.query<{ day: string; key_id: string; family: UsageFamily; n: string }>(
        `SELECT to_char(u.hour AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, u.key_id::text, u.family, SUM(u.requests)::text AS n
           FROM key_usage_hourly u JOIN access_keys k ON k.id = u.key_id
          WHERE k.project_id = $1 AND u.hour >= (((now() AT TIME ZONE 'UTC')::date - $2::int)::timestamp AT TIME ZONE 'UTC')
          GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
        [projectId, days - 1],
      );
      return r.rows.map((x) => ({ day: x.day, keyId: Number(x.key_id), family: x.family, requests: Number(x.n) }));
    },

    /** Every project's requests since `since`, from the hourly roll-up (the project list's totals). */
    async requestsByProject(since: Date): Promise<Map<number, number>> {
      const r = await db.query<{ project_id: string; n: string }>(
        `SELECT k.project_id::text, SUM(u.requests)::text AS n FROM key_usage_hourly u JOIN access_keys k ON k.id = u.key_id WHERE u.hour >= $1 GROUP BY 1`,
        [since],
      );
      return new Map(r.rows.map((x) => [Number(x.project_id), Number(x.n)]));
    },
  };
}
export type AccessKeyRepo = ReturnType<typeof accessKeyRepo>;
