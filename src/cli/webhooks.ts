import { EVENT_TYPES } from '../events/outbox.ts';
import { targetProblem } from '../untrusted/post.ts';
import { webhookStore } from '../events/webhook-store.ts';
import { projectRepo } from '../store/projects.ts';
import { NetworkRegistry } from '../chain/registry.ts';
import { parse } from './args.ts';
import { UsageError } from './usage-error.ts';
import { DB_FLAGS, withDb } from './db.ts';

const USAGE = `usage: metarelay webhooks add --project NAME --url URL [--events metatxn.status,…|*] [--chains C1,C2] [--description TEXT]
       metarelay webhooks list --project NAME
       metarelay webhooks remove ID`;

/** `metarelay webhooks add|list|remove`: the console's webhook endpoints from a shell (the secret is printed once). */
export async function runWebhooks(argv: string[]) {
  const { values, positionals } = parse(argv, {
    ...DB_FLAGS,
    project: { type: 'string' },
    url: { type: 'string' },
    events: { type: 'string' },
    chains: { type: 'string' },
    description: { type: 'string' },
  });
  const [sub, arg] = positionals;
  // What each verb needs, checked before withDb opens (and would create and migrate) a database.
  if ((sub === 'add' && (!values.project || !values.url)) || (sub === 'list' && !values.project) || (sub === 'remove' && !arg)) throw new UsageError(USAGE);
  await withDb(values, async (db, config) => {
    const hooks = webhookStore(db);
    const project = async () => {
      if (!values.project) throw new UsageError(USAGE);
      const p = await projectRepo(db).getByName(values.project);
      if (!p) throw new UsageError(`no project named "${values.project}"`);
      return p;
    };
    if (sub === 'add') {
      const p = await project();
      if (!values.url) throw new UsageError(USAGE);
      const problem = targetProblem(values.url);
      if (problem) throw new UsageError(`--url: ${problem}`);
      const events = (values.events ?? '*')
        .split(',')
        .map((e) => e.trim())
        .filter(Boolean);
      const unknown = events.find((e) => e !== '*' && !(EVENT_TYPES as readonly string[]).includes(e));
      if (unknown || events.length === 0) throw new UsageError(`--events: "${unknown ?? ''}" is not one of ${EVENT_TYPES.join(', ')} or *`);
      const networks = new NetworkRegistry(config.chains);
      const chainIds = values.chains
        ? values.chains.split(',').map((c) => {
            const id = networks.chainIdOf(c.trim());
            if (id === undefined) throw new UsageError(`--chains: unknown chain "${c.trim()}"`);
            return id;
          })
        : null;
      const { webhook, secret } = await hooks.create({ projectId: p.id, url: values.url, events: [...new Set(events)], chainIds, description: values.description ?? '' });
      console.log(JSON.stringify({ ...webhook, secret }));
      console.error('Store the signing secret now: it is not shown again.');
    } else if (sub === 'list') {
      const all = await hooks.list((await project()).id);
      if (!all.length) console.error(`no webhooks in project ${values.project}: metarelay webhooks add --project ${values.project} --url URL`);
      for (const w of all) console.log(JSON.stringify(w));
    } else if (sub === 'remove') {
      const id = Number(arg);
      if (!Number.isSafeInteger(id) || id <= 0) throw new UsageError(USAGE);
      if (!(await hooks.remove(id))) throw new UsageError(`no webhook ${id}`);
      console.log('removed');
    } else {
      throw new UsageError(USAGE);
    }
  });
}
