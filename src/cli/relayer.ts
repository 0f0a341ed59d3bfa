import type { Address } from 'viem';
import { NetworkRegistry } from '../chain/registry.ts';
import { SponsorConflict, SponsorKind, sponsorRepo } from '../relayer/intake/sponsors.ts';
import { createServices } from '../services.ts';
import { projectRepo } from '../store/projects.ts';
import { parse } from './args.ts';
import { DB_FLAGS, configFrom, withDb } from './db.ts';
import { UsageError } from './main.ts';
import { onShutdown } from './shutdown.ts';

/** `metarelay relayer`: the relayer dispatchers alone (signing, sending, receipts), no HTTP. */
export async function runRelayer(argv: string[]) {
  const { values } = parse(argv, DB_FLAGS);
  const config = configFrom(values);
  const s = await createServices(config);
  if (s.dispatchers.length === 0) {
    await s.close();
    throw new UsageError('no chain in the config has a "relayer" section');
  }
  s.startDispatchers();
  s.log.info({ chains: config.chains.filter((c) => c.relayer).map((c) => c.name), owner: s.dispatchers[0].owner }, 'relayer dispatchers started');
  onShutdown(s.log, { drain: () => s.drain(), close: () => s.close(), deadlineMs: config.shutdown.deadlineMs });
}

const SPONSOR_USAGE = `usage:
  metarelay sponsors add --project NAME --chain C --address 0x… [--kind ANY|WALLET|TOKEN|CONTRACT|ADDRESS] [--name TEXT]
  metarelay sponsors list --project NAME [--chain C]
  metarelay sponsors enable|disable|remove ID --project NAME`;

/** Sponsorship rules of a project, from the command line (the same rules the admin RPC manages). */
export async function runSponsors(argv: string[]) {
  const { values, positionals } = parse(argv, {
    ...DB_FLAGS,
    project: { type: 'string' },
    chain: { type: 'string' },
    address: { type: 'string' },
    kind: { type: 'string' },
    name: { type: 'string' },
  });
  const [sub, idText] = positionals;
  if (!sub || !values.project) throw new UsageError(SPONSOR_USAGE);
  await withDb(values, async (db, config) => {
    const project = await projectRepo(db).getByName(values.project!);
    if (!project) throw new UsageError(`no project named "${values.project}"`);
    const sponsors = sponsorRepo(db);
    const chainId = (input: string | undefined) => {
      if (!input) return null;
      const id = new NetworkRegistry(config.chains).chainIdOf(input);
      if (id === undefined) throw new UsageError(`unknown chain "${input}"`);
      return id;
    };
    const id = () => {
      const n = Number(idText);
      if (!Number.isInteger(n) || n <= 0) throw new UsageError(SPONSOR_USAGE);
      return n;
    };
    switch (sub) {
      case 'add': {
        const chain = chainId(values.chain);
        if (chain == null || !values.address) throw new UsageError(SPONSOR_USAGE);
        if (!/^0x[0-9a-fA-F]{40}$/.test(values.address)) throw new UsageError('--address must be a 20-byte 0x address');
        const kind = SponsorKind.safeParse((values.kind ?? 'ANY').toUpperCase());
        if (!kind.success) throw new UsageError(`--kind must be one of ${SponsorKind.options.join(', ')}`);
        try {
          const rule = await sponsors.add({ projectId: project.id, chainId: chain, kind: kind.data, address: values.address.toLowerCase() as Address, name: values.name ?? '', active: true });
          console.log(JSON.stringify(rule));
        } catch (err) {
          if (err instanceof SponsorConflict) throw new UsageError(err.message);
          throw err;
        }
        return;
      }
      case 'list':
        for (const r of await sponsors.list(project.id, chainId(values.chain))) console.log(JSON.stringify(r));
        return;
      case 'enable':
      case 'disable': {
        const rule = await sponsors.update(project.id, id(), { active: sub === 'enable' });
        if (!rule) throw new UsageError(`no sponsorship ${idText} in project ${project.name}`);
        console.log(JSON.stringify(rule));
        return;
      }
      case 'remove':
        if (!(await sponsors.remove(project.id, id()))) throw new UsageError(`no sponsorship ${idText} in project ${project.name}`);
        console.log('removed');
        return;
      default:
        throw new UsageError(SPONSOR_USAGE);
    }
  });
}
