import type { Queryable } from './db.ts';

/** One answered request of a project, as the console's request log shows it (never the key, never a query string). */
export interface ProjectRequest {
  projectId: number;
  keyId: number | null;
  at: Date;
  method: string;
  status: number;
  ms: number;
  clientNet: string | null;
}

export interface ProjectRequestRow {
  id: string;
  key_id: string | null;
  at: Date;
  method: string;
  status: number;
  ms: number;
  client_net: string | null;
}

/** The project_requests table: written in batches by the request journal, pruned to the newest rows per project. */
export function projectRequestRepo(db: Queryable) {
  return {
    /** Inserts a batch, then keeps the newest `keep` rows of each project written to (one statement each). */
    async append(rows: readonly ProjectRequest[], keep: number): Promise<void> {
      if (rows.length === 0) return;
      await db.query(
        `INSERT INTO project_requests (project_id, key_id, at, method, status, ms, client_net)
         SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[], $4::text[], $5::int[], $6::real[], $7::text[])`,
        [
          rows.map((r) => r.projectId),
          rows.map((r) => r.keyId),
          rows.map((r) => r.at.toISOString()),
          rows.map((r) => r.method),
          rows.map((r) => r.status),
          rows.map((r) => r.ms),
          rows.map((r) => r.clientNet),
        ],
      );
      const projects = [...new Set(rows.map((r) => r.projectId))];
      // Per project, the id of its keep-th newest row: everything older goes (the index on (project_id, id DESC) finds it).
      await db.query(
        `DELETE FROM project_requests r USING (
           SELECT p.id AS project_id,
                  (SELECT x.id FROM project_requests x WHERE x.project_id = p.id ORDER BY x.id DESC OFFSET $2 LIMIT 1) AS cut
             FROM unnest($1::bigint[]) AS p(id)) c
          WHERE r.project_id = c.project_id AND c.cut IS NOT NULL AND r.id <= c.cut`,
        [projects, keep],
      );
    },

    /** A project's requests newest first, `limit` of them before id `before` (exclusive; null: the newest). */
    async page(projectId: number, before: string | null, limit: number): Promise<ProjectRequestRow[]> {
      const r = await db.query<ProjectRequestRow>(
        `SELECT id::text, key_id::text, at, method, status, ms, client_net FROM project_requests
          WHERE project_id = $1 AND ($2::bigint IS NULL OR id < $2::bigint) ORDER BY id DESC LIMIT $3`,
        [projectId, before, limit],
      );
      return r.rows;
    },

    /** How many a project has (at most keepPerProject, give or take a flush). */
    async count(projectId: number): Promise<number> {
      const r = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM project_requests WHERE project_id = $1', [projectId]);
      return r.rows[0].n;
    },
  };
}

export type ProjectRequestRepo = ReturnType<typeof projectRequestRepo>;
