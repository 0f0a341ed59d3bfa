import type { Queryable } from './db.ts';

export interface Project {
  id: number;
  name: string;
  createdAt: string;
  archivedAt: string | null;
  /** The networks (chain ids) the project's keys may use; null: every network. */
  allowedChainIds: number[] | null;
  /** The ecosystem it is in (its sponsorship rules cover the project too); null: none. */
  ecosystemId: number | null;
}

interface ProjectRow {
  id: number | string;
  name: string;
  created_at: Date | string;
  archived_at: Date | string | null;
  allowed_chain_ids?: (number | string)[] | null;
  ecosystem_id?: number | string | null;
}

const iso = (v: Date | string | null): string | null => (v == null ? null : new Date(v).toISOString());

export function toProject(r: ProjectRow): Project {
  return {
    id: Number(r.id),
    name: r.name,
    createdAt: iso(r.created_at)!,
    archivedAt: iso(r.archived_at),
    allowedChainIds: r.allowed_chain_ids?.length ? r.allowed_chain_ids.map(Number) : null,
    ecosystemId: r.ecosystem_id == null ? null : Number(r.ecosystem_id),
  };
}

export class ProjectExistsError extends Error {}

export function projectRepo(db: Queryable) {
  return {
    /** `allowedChainIds` null or empty: every network. ProjectExistsError when the name is taken. */
    async create(name: string, allowedChainIds: number[] | null = null): Promise<Project> {
      const res = await db.query<ProjectRow>('INSERT INTO projects (name, allowed_chain_ids) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING *', [
        name,
        allowedChainIds?.length ? allowedChainIds : null,
      ]);
      if (res.rows.length === 0) throw new ProjectExistsError(`project "${name}" already exists`);
      return toProject(res.rows[0]);
    },
    /**
     * `archived`: true archives (its keys stop working), false restores; `allowedChainIds` [] means every
     * network; what is left out stays. False: no such project. ProjectExistsError when the new name is taken.
     */
    async update(id: number, patch: { name?: string; archived?: boolean; allowedChainIds?: number[] }): Promise<boolean> {
      try {
        const res = await db.query(
          `UPDATE projects SET name = COALESCE($2, name),
             archived_at = CASE WHEN $3::boolean IS NULL THEN archived_at WHEN $3 THEN COALESCE(archived_at, now()) ELSE NULL END,
             allowed_chain_ids = CASE WHEN $4::bigint[] IS NULL THEN allowed_chain_ids WHEN cardinality($4::bigint[]) = 0 THEN NULL ELSE $4::bigint[] END
           WHERE id = $1`,
          [id, patch.name ?? null, patch.archived ?? null, patch.allowedChainIds ?? null],
        );
        return res.rowCount > 0;
      } catch (err) {
        if ((err as { code?: string }).code === '23505') throw new ProjectExistsError(`project "${patch.name}" already exists`);
        throw err;
      }
    },
    async getByName(name: string): Promise<Project | null> {
      const res = await db.query<ProjectRow>('SELECT * FROM projects WHERE name = $1', [name]);
      return res.rows[0] ? toProject(res.rows[0]) : null;
    },
    async getById(id: number): Promise<Project | null> {
      const res = await db.query<ProjectRow>('SELECT * FROM projects WHERE id = $1', [id]);
      return res.rows[0] ? toProject(res.rows[0]) : null;
    },
    /** Puts a project in an ecosystem (null: in none); a project is in at most one. False: no such project. */
    async setEcosystem(projectId: number, ecosystemId: number | null): Promise<boolean> {
      const res = await db.query('UPDATE projects SET ecosystem_id = $2 WHERE id = $1', [projectId, ecosystemId]);
      return res.rowCount > 0;
    },
    async list(): Promise<Project[]> {
      const res = await db.query<ProjectRow>('SELECT * FROM projects ORDER BY id');
      return res.rows.map(toProject);
    },
  };
}
export type ProjectRepo = ReturnType<typeof projectRepo>;
