import type { Address } from 'viem';
import { NetworkRegistry } from '../chain/registry.ts';
import { PolicyError, PolicyFields, SponsorConflict, SponsorKind, mergePolicy, policyPatch, sponsorRepo, sponsorWire } from '../relayer/index.ts';
import { z } from 'zod';
import { projectRepo } from '../store/projects.ts';
import { parse } from './args.ts';
import { DB_FLAGS, configFrom, withDb } from './db.ts';
import { UsageError } from './usage-error.ts';
import { onShutdown } from './shutdown.ts';
import { parseNative, readableNative } from '../util/units.ts';

/** `metarelay relayer`: the relayer dispatchers alone (signing, sending, receipts), no HTTP. */
export async function runRelayer(argv: string[]) {
  if (argv[0] === 'prune') return runPrune(argv.slice(1));
  const { values } = parse(argv, DB_FLAGS);
  // Without a file there are no chains to relay on: refused before a database is opened (and created).
  if (!values.config) throw new UsageError('relayer needs a config: metarelay relayer --config metarelay.json (the same file serve runs with)');
  const config = configFrom(values);
  // Imported here, not at the top: the whole service is 1 s of CPU to load, which `metarelay sponsors`
  // (this file too) has no use for.
  const { createServices } = await import('../services.ts');
  const s = await createServices(config);
  if (s.dispatchers.length === 0) {
    await s.close();
    throw new UsageError('no chain in the config has a "relayer" section');
  }
  s.startDispatchers();
  s.log.info({ chains: config.chains.filter((c) => c.relayer).map((c) => c.name), owner: s.dispatchers[0].owner }, 'relayer dispatchers started');
  onShutdown(s.log, { drain: () => s.drain(), close: () => s.close(), deadlineMs: config.shutdown.deadlineMs });
}

const PRUNE_USAGE = 'usage: metarelay relayer prune --older-than DURATION (e.g. 30d, 12h, 90m; at least 1h) [--dry-run] [--batch N] [--config FILE | --database URL]';

/** A duration as `30d`, `12h`, `90m` or `3600s`, in milliseconds. */
const Duration = z
  .string()
  .regex(/^\d+(d|h|m|s)$/, 'a whole number followed by d, h, m or s (30d, 12h, 90m)')
  .transform((v) => Number(v.slice(0, -1)) * { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1_000 }[v.slice(-1) as 'd' | 'h' | 'm' | 's']);

/**
 * `metarelay relayer prune --older-than 30d`: deletes finished meta-transactions, their attempts, bundles
 * and charges (relayer/prune.ts), in batches of short transactions; `--dry-run` prints what it would.
 */
async function runPrune(argv: string[]) {
  const { values } = parse(argv, { ...DB_FLAGS, 'older-than': { type: 'string' }, 'dry-run': { type: 'boolean' }, batch: { type: 'string' } });
  if (!values['older-than']) throw new UsageError(PRUNE_USAGE);
  const age = Duration.safeParse(values['older-than']);
  if (!age.success) throw new UsageError(`--older-than: ${age.error.issues[0]!.message}\n${PRUNE_USAGE}`);
  const { PRUNE_MIN_AGE_MS, pruneFinished } = await import('../relayer/prune.ts');
  if (age.data < PRUNE_MIN_AGE_MS) throw new UsageError(`--older-than must be at least 1h: younger rows may still be reopened by a reorg or recounted by the usage roll-up`);
  const batch = z.coerce
    .number()
    .int()
    .min(1)
    .max(10_000)
    .safeParse(values.batch ?? '500');
  if (!batch.success) throw new UsageError(`--batch: a whole number from 1 to 10000\n${PRUNE_USAGE}`);
  const cutoff = new Date(Date.now() - age.data);
  await withDb(values, async (db) => {
    const counts = await pruneFinished(db, { cutoff, batch: batch.data, dryRun: values['dry-run'] === true });
    console.log(JSON.stringify({ dryRun: values['dry-run'] === true, cutoff: cutoff.toISOString(), ...counts }));
  });
}

const SPONSOR_USAGE = `usage:
  metarelay sponsors add --project NAME --chain C --address 0x… [--kind ANY|WALLET|TOKEN|CONTRACT|ADDRESS] [--name TEXT] [POLICY]
  metarelay sponsors set ID --project NAME POLICY
  metarelay sponsors list --project NAME [--chain C]
  metarelay sponsors enable|disable|remove ID --project NAME
POLICY ("" clears a value, --allow/--deny "" clears a list; docs/sponsorship.md):
  --daily-cap ETH --daily-cap-wei N --daily-cap-usd D --wallet-daily-cap ETH --wallet-daily-cap-wei N --wallet-daily-cap-usd D
  --txn-cap ETH --txn-cap-wei N --txn-cap-usd D --total-budget ETH --total-budget-wei N --total-budget-usd D
  (ETH: the chain's native units, e.g. 0.05; N: wei; D: dollars)
  --valid-from ISO --valid-until ISO --allow 0x…,0x… --deny 0x…,0x…`;

/** CLI flag → policy field (the same names as AddGasSponsor's). */
const POLICY_FLAGS = {
  'daily-cap-wei': 'dailyCapWei',
  'daily-cap-usd': 'dailyCapUsd',
  'wallet-daily-cap-wei': 'walletDailyCapWei',
  'wallet-daily-cap-usd': 'walletDailyCapUsd',
  'txn-cap-wei': 'txnCapWei',
  'txn-cap-usd': 'txnCapUsd',
  'total-budget-wei': 'totalBudgetWei',
  'total-budget-usd': 'totalBudgetUsd',
  'valid-from': 'validFrom',
  'valid-until': 'validUntil',
  allow: 'allowWallets',
  deny: 'denyWallets',
} as const;

/** Caps typed in native units ("0.05"), beside their -wei forms: flag → the -wei flag they stand for. */
const NATIVE_FLAGS = { 'daily-cap': 'daily-cap-wei', 'wallet-daily-cap': 'wallet-daily-cap-wei', 'txn-cap': 'txn-cap-wei', 'total-budget': 'total-budget-wei' } as const;

/** The policy flags given, validated as the admin API validates them. */
function policyFlags(values: Record<string, unknown>) {
  const raw: Record<string, unknown> = {};
  for (const [flag, weiFlag] of Object.entries(NATIVE_FLAGS)) {
    const v = values[flag];
    if (typeof v !== 'string') continue;
    if (typeof values[weiFlag] === 'string') throw new UsageError(`--${flag} and --${weiFlag} are the same cap: give one`);
    const wei = v.trim() === '' ? '' : parseNative(v);
    if (wei === null) throw new UsageError(`--${flag}: "${v}" is not an amount in native units (e.g. 0.05, at most 18 decimals)`);
    raw[POLICY_FLAGS[weiFlag]] = wei.toString();
  }
  for (const [flag, field] of Object.entries(POLICY_FLAGS)) {
    const v = values[flag];
    if (typeof v !== 'string') continue;
    raw[field] = field.endsWith('Wallets')
      ? v
          .split(',')
          .map((x) => x.trim())
          .filter(Boolean)
      : v;
  }
  const parsed = z.object(PolicyFields).strict().safeParse(raw);
  if (!parsed.success) throw new UsageError(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
  return parsed.data;
}

const CAP_NAMES = ['dailyCap', 'walletDailyCap', 'txnCap', 'totalBudget'] as const;

/**
 * A rule as the admin API answers it, plus `readable`: each cap and spend in native units and dollars
 * ("0.05 ETH and $10"), for a person reading the line; the exact wei stays in the *Wei fields.
 */
export function readableRule(w: ReturnType<typeof sponsorWire>) {
  const readable: Record<string, string> = {};
  for (const c of CAP_NAMES) {
    const wei = w[`${c}Wei`];
    const usd = w[`${c}Usd`];
    const parts = [wei != null ? `${readableNative(wei)} ETH` : null, usd != null ? `$${usd}` : null].filter(Boolean);
    if (parts.length) readable[c] = parts.join(' and ');
  }
  readable.spentToday = `${readableNative(w.spentTodayWei)} ETH`;
  readable.spentTotal = `${readableNative(w.spentTotalWei)} ETH`;
  return { ...w, readable };
}

/** Sponsorship rules of a project, from the command line (the same rules the admin RPC manages). */
export async function runSponsors(argv: string[]) {
  const { values, positionals } = parse(argv, {
    ...DB_FLAGS,
    project: { type: 'string' },
    chain: { type: 'string' },
    address: { type: 'string' },
    kind: { type: 'string' },
    name: { type: 'string' },
    ...Object.fromEntries([...Object.keys(POLICY_FLAGS), ...Object.keys(NATIVE_FLAGS)].map((f) => [f, { type: 'string' as const }])),
  });
  const [sub, idText] = positionals;
  if (!sub || !values.project) throw new UsageError(SPONSOR_USAGE);
  await withDb(values, async (db, config) => {
    const project = await projectRepo(db).getByName(values.project!);
    if (!project) throw new UsageError(`no project named "${values.project}"`);
    const sponsors = sponsorRepo(db);
    const print = (rule: Parameters<typeof sponsorWire>[0]) => console.log(JSON.stringify(readableRule(sponsorWire(rule))));
    const policyFor = (chain: number, base?: Parameters<typeof mergePolicy>[0]) => {
      const relayer = config.chains.find((c) => c.chainId === chain)?.relayer;
      try {
        return mergePolicy(base, policyPatch(policyFlags(values)), { usdPriced: relayer?.nativeUsdFeed !== undefined, network: String(chain) }).patch;
      } catch (err) {
        if (err instanceof PolicyError) throw new UsageError(err.message);
        throw err;
      }
    };
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
          const policy = policyFor(chain);
          print(await sponsors.add({ projectId: project.id, chainId: chain, kind: kind.data, address: values.address.toLowerCase() as Address, name: values.name ?? '', active: true, policy }));
        } catch (err) {
          if (err instanceof SponsorConflict) throw new UsageError(err.message);
          throw err;
        }
        return;
      }
      case 'list':
        {
          const all = await sponsors.list(project.id, chainId(values.chain));
          if (!all.length) console.error(`no sponsorships in project ${project.name}${values.chain ? ` on ${values.chain}` : ''}: metarelay sponsors add --project ${project.name} …`);
          for (const r of all) print(r);
        }
        return;
      case 'set': {
        const current = await sponsors.get(project.id, id());
        if (!current) throw new UsageError(`no sponsorship ${idText} in project ${project.name}`);
        print((await sponsors.update(project.id, current.id, { policy: policyFor(current.chainId, current.policy) }))!);
        return;
      }
      case 'enable':
      case 'disable': {
        const rule = await sponsors.update(project.id, id(), { active: sub === 'enable' });
        if (!rule) throw new UsageError(`no sponsorship ${idText} in project ${project.name}`);
        print(rule);
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
