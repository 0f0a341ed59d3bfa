import { EcosystemExistsError, ecosystemRepo } from '../store/ecosystems.ts';
import { projectRepo } from '../store/projects.ts';
import { parse } from './args.ts';
import { DB_FLAGS, withDb } from './db.ts';
import { UsageError } from './usage-error.ts';

const USAGE = `usage:
  metarelay ecosystems add NAME
  metarelay ecosystems list
  metarelay ecosystems join NAME --project PROJECT     (a project is in at most one ecosystem)
  metarelay ecosystems leave --project PROJECT`;

/**
 * `metarelay ecosystems`: groups of projects. An ecosystem's gas sponsorship rules
 * (…EcosystemGasSponsor, docs/sponsorship.md) cover the bundles of every project in it.
 */
export async function runEcosystems(argv: string[]) {
  const { values, positionals } = parse(argv, { ...DB_FLAGS, project: { type: 'string' } });
  const [sub, name] = positionals;
  // Usage mistakes are answered before the database is opened (opening creates and migrates it).
  if ((sub === 'add' || sub === 'join') && !name) throw new UsageError(USAGE);
  if ((sub === 'join' || sub === 'leave') && !values.project) throw new UsageError(USAGE);
  if (!['add', 'list', 'join', 'leave'].includes(sub ?? '')) throw new UsageError(USAGE);
  await withDb(values, async (db) => {
    const ecosystems = ecosystemRepo(db);
    const projects = projectRepo(db);
    if (sub === 'add') {
      try {
        console.log(JSON.stringify(await ecosystems.create(name!)));
      } catch (err) {
        if (err instanceof EcosystemExistsError) throw new UsageError(err.message);
        throw err;
      }
      return;
    }
    if (sub === 'list') {
      const all = await ecosystems.list();
      if (!all.length) console.error('no ecosystems yet: metarelay ecosystems add NAME');
      for (const e of all) console.log(JSON.stringify(e));
      return;
    }
    const project = await projects.getByName(values.project!);
    if (!project) throw new UsageError(`no project named "${values.project}"`);
    const ecosystem = sub === 'join' ? await ecosystems.getByName(name!) : null;
    if (sub === 'join' && !ecosystem) throw new UsageError(`no ecosystem named "${name}" (metarelay ecosystems add ${name})`);
    await projects.setEcosystem(project.id, ecosystem?.id ?? null);
    console.log(JSON.stringify({ project: project.name, ecosystem: ecosystem ? { id: ecosystem.id, name: ecosystem.name } : null }));
  });
}
