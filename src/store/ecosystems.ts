import type { Queryable } from './db.ts';

/**
 * Ecosystems (Sequence's): a named group of projects. What they are for is sponsorship: an ecosystem's
 * gas sponsorship rules cover the bundles of every project in it (relayer/intake/sponsors.ts). The one
 * module with SQL on `ecosystems` (a project joins one with projects.setEcosystem).
 */
export interface Ecosystem {
  id: number;
  name: string;
  createdAt: string;
  /** The projects in it, by id. */
  projectIds: number[];
}

interface Row {
  id: string | number;
  name: string;
  created_at: Date | string;
  project_ids: (string | number)[] | null;
}

const toEcosystem = (r: Row): Ecosystem => ({ id: Number(r.id), name: r.name, createdAt: new Date(r.created_at).toISOString(), projectIds: (r.project_ids ?? []).map(Number) });
const SELECT = `SELECT e.id, e.name, e.created_at, (SELECT array_agg(p.id ORDER BY p.id) FROM projects p WHERE p.ecosystem_id = e.id) AS project_ids FROM ecosystems e`;

export class EcosystemExistsError extends Error {}

export function ecosystemRepo(db: Queryable) {
  return {
    async create(name: string): Promise<Ecosystem> {
      const r = await db.query<{ id: string }>('INSERT INTO ecosystems (name) VALUES ($1) ON CONFLICT (name) DO NOTHING RETURNING id', [name]);
      if (!r.rows[0]) throw new EcosystemExistsError(`ecosystem "${name}" already exists`);
      return (await this.getById(Number(r.rows[0].id)))!;
    },
    async getById(id: number): Promise<Ecosystem | null> {
      const r = await db.query<Row>(`${SELECT} WHERE e.id = $1`, [id]);
      return r.rows[0] ? toEcosystem(r.rows[0]) : null;
    },
    async getByName(name: string): Promise<Ecosystem | null> {
      const r = await db.query<Row>(`${SELECT} WHERE e.name = $1`, [name]);
      return r.rows[0] ? toEcosystem(r.rows[0]) : null;
    },
    async list(): Promise<Ecosystem[]> {
      return (await db.query<Row>(`${SELECT} ORDER BY e.id`)).rows.map(toEcosystem);
    },
  };
}
export type EcosystemRepo = ReturnType<typeof ecosystemRepo>;
