import { openDb } from '../store/db.ts';
import { migrate } from '../store/migrate.ts';
import { accessKeyRepo, type AccessKeyInfo } from '../store/access-keys.ts';
import { normalOrigin } from '../access/key-kinds.ts';
import { projectRepo, ProjectExistsError } from '../store/projects.ts';
import { parse } from './args.ts';
import { UsageError } from './usage-error.ts';
import { DB_FLAGS as common, databaseFor, withDb } from './db.ts';

export async function runMigrate(argv: string[]) {
  const { values } = parse(argv, common);
  const config = databaseFor(values);
  const db = await openDb(config.database, config.postgres);
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
  const { values, positionals } = parse(argv, {
    ...common,
    project: { type: 'string' },
    label: { type: 'string' },
    secret: { type: 'boolean' },
    origin: { type: 'string', multiple: true },
  });
  const [sub, arg] = positionals;
  if ((sub === 'create' || sub === 'list' || sub === 'rotate') && !values.project) throw new UsageError(`usage: metarelay keys ${sub}${sub === 'rotate' ? ' ID' : ''} --project NAME`);
  if (sub === 'revoke' && !arg) throw new UsageError('usage: metarelay keys revoke KEY');
  if (sub === 'rotate' && !/^\d{1,15}$/.test(arg ?? '')) throw new UsageError('usage: metarelay keys rotate ID --project NAME (the id from keys list)');
  if (values.secret && values.origin?.length) throw new UsageError('a secret key has no allowed origins: it is refused from every browser');
  const origins = values.origin?.map((o) => normalOrigin(o) ?? badOrigin(o));
  await withDb(values, async (db) => {
    const projects = projectRepo(db);
    const keys = accessKeyRepo(db);
    const project = async () => {
      if (!values.project) throw new UsageError(`usage: metarelay keys ${sub} --project NAME`);
      const p = await projects.getByName(values.project);
      if (!p) throw new UsageError(`no project named "${values.project}"`);
      return p;
    };
    const shown = (p: { name: string }, made: { key: string; info: AccessKeyInfo }) => {
      const { info } = made;
      console.log(JSON.stringify({ project: p.name, accessKey: made.key, id: info.id, kind: info.kind, label: info.label, allowedOrigins: info.allowedOrigins }));
      console.error('Store this key now: it is kept only as a hash and cannot be shown again.');
    };
    if (sub === 'create') {
      const p = await project();
      shown(p, await keys.create(p.id, values.label ?? '', { kind: values.secret ? 'secret' : 'publishable', allowedOrigins: origins?.length ? [...new Set(origins)] : null }));
    } else if (sub === 'list') {
      const p = await project();
      const all = await keys.list(p.id);
      if (!all.length) console.error(`no access keys in project ${p.name}: metarelay keys create --project ${p.name}`);
      for (const k of all) console.log(JSON.stringify(k));
    } else if (sub === 'rotate') {
      const p = await project();
      const rotated = await keys.rotate(p.id, Number(arg));
      if (!rotated) throw new UsageError(`no live key ${arg} in project ${p.name}`);
      shown(p, rotated);
    } else if (sub === 'revoke') {
      if (!arg) throw new UsageError('usage: metarelay keys revoke KEY');
      if (!(await keys.revoke(arg))) throw new UsageError('no live key matches');
      console.log('revoked');
    } else {
      throw new UsageError('usage: metarelay keys create|list|rotate|revoke');
    }
  });
}

function badOrigin(o: string): never {
  throw new UsageError(`--origin "${o}" is not an origin: scheme://host[:port], http or https, no path`);
}
