import { openDb } from '../store/db.ts';
import { migrate } from '../store/migrate.ts';
import { accessKeyRepo } from '../store/access-keys.ts';
import { projectRepo, ProjectExistsError } from '../store/projects.ts';
import { parse } from './args.ts';
import { UsageError } from './main.ts';
import { DB_FLAGS as common, databaseFor, withDb } from './db.ts';

export async function runMigrate(argv: string[]) {
  const { values } = parse(argv, common);
  const db = await openDb(databaseFor(values).database);
  try {
    const applied = await migrate(db);
    console.log(applied.length ? `applied: ${applied.join(', ')}` : 'database is up to date');
  } finally {
    await db.close();
  }
}

export async function runProjects(argv: string[]) {
  const { values, positionals } = parse(argv, common);
  const [sub, name] = positionals;
  // Usage mistakes are answered before the database is opened (opening creates and migrates it).
  if (sub === 'create' && !name) throw new UsageError('usage: metarelay projects create NAME');
  await withDb(values, async (db) => {
    const projects = projectRepo(db);
    if (sub === 'create') {
      try {
        const p = await projects.create(name);
        console.log(JSON.stringify(p));
      } catch (err) {
        if (err instanceof ProjectExistsError) throw new UsageError(err.message);
        throw err;
      }
    } else if (sub === 'list') {
      const all = await projects.list();
      // The list goes to stdout as JSON lines; the note that it is empty to stderr, so scripts see nothing.
      if (!all.length) console.error('no projects yet: metarelay projects create NAME');
      for (const p of all) console.log(JSON.stringify(p));
    } else {
      throw new UsageError('usage: metarelay projects create NAME | projects list');
    }
  });
}

export async function runKeys(argv: string[]) {
  const { values, positionals } = parse(argv, { ...common, project: { type: 'string' }, label: { type: 'string' } });
  const [sub, arg] = positionals;
  if ((sub === 'create' || sub === 'list') && !values.project) throw new UsageError(`usage: metarelay keys ${sub} --project NAME`);
  if (sub === 'revoke' && !arg) throw new UsageError('usage: metarelay keys revoke KEY');
  await withDb(values, async (db) => {
    const projects = projectRepo(db);
    const keys = accessKeyRepo(db);
    const project = async () => {
      if (!values.project) throw new UsageError(`usage: metarelay keys ${sub} --project NAME`);
      const p = await projects.getByName(values.project);
      if (!p) throw new UsageError(`no project named "${values.project}"`);
      return p;
    };
    if (sub === 'create') {
      const p = await project();
      const { key, info } = await keys.create(p.id, values.label ?? '');
      console.log(JSON.stringify({ project: p.name, accessKey: key, id: info.id, label: info.label }));
      console.error('Store this key now: it is kept only as a hash and cannot be shown again.');
    } else if (sub === 'list') {
      const p = await project();
      const all = await keys.list(p.id);
      if (!all.length) console.error(`no access keys in project ${p.name}: metarelay keys create --project ${p.name}`);
      for (const k of all) console.log(JSON.stringify(k));
    } else if (sub === 'revoke') {
      if (!arg) throw new UsageError('usage: metarelay keys revoke KEY');
      if (!(await keys.revoke(arg))) throw new UsageError('no live key matches');
      console.log('revoked');
    } else {
      throw new UsageError('usage: metarelay keys create|list|revoke');
    }
  });
}
