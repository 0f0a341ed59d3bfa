import { UsageError } from './usage-error.ts';
import { ConfigError } from '../config/load.ts';
import { FolderInUseError } from '../store/folder-lock.ts';

const USAGE = `metarelay — token metadata service and meta-transaction relayer

Usage:
  metarelay dev [--port N] [--manifest PATH] [--data DIR]     local chain + service, offline
  metarelay serve --config metarelay.json [--port N]          production server
  metarelay worker --config metarelay.json                    refresh worker + chain watchers, no HTTP
  metarelay relayer --config metarelay.json                   relayer dispatchers (sign, send, receipts), no HTTP
  metarelay relayer prune --older-than 30d [--dry-run]        delete finished meta-transactions, their attempts and charges
  metarelay refresh --chain C --contract A (--tokens 1,2 | --all)   enqueue a refresh and follow it
  metarelay indexer backfill --chain C --from N [--to M] --config FILE   index old blocks as a task, with a progress bar
  metarelay indexer work [--backfill ID] --config FILE        one more backfill worker process
  metarelay indexer status ID | watch --chain C --contract A --config FILE
  metarelay migrate [--config FILE]                           apply database migrations
  metarelay doctor --config FILE [--offline]                  check chains, contracts, senders, database, gateways (--offline: not gateways)
  metarelay config --print [--config FILE]                    the effective config (file + env + secret files), secrets masked
  metarelay projects create NAME [--config FILE]
  metarelay projects list [--config FILE]
  metarelay keys create --project NAME [--secret] [--origin URL ...] [--label TEXT] [--config FILE]
                         (publishable unless --secret: reads and relays; --origin holds it to those origins)
  metarelay keys list --project NAME [--config FILE]
  metarelay keys rotate ID --project NAME [--config FILE]   a new key of the same kind; the old one is revoked
  metarelay keys revoke KEY [--config FILE]
  metarelay admin create [--label TEXT] [--config FILE]       a console/admin token, printed once
  metarelay admin revoke ID [--config FILE]
  metarelay sponsors add --project NAME --chain C --address A [--kind ANY|WALLET|TOKEN|CONTRACT|ADDRESS] [--name N] [policy flags]
  metarelay sponsors set ID --project NAME [policy flags: --daily-cap (ETH), --daily-cap-wei, --total-budget-usd, --valid-until, --allow …]
  metarelay sponsors list --project NAME [--chain C]
  metarelay sponsors enable|disable|remove ID --project NAME
  metarelay ecosystems add NAME | list | join NAME --project P | leave --project P
  metarelay webhooks add --project NAME --url URL [--events T1,T2|*] [--chains C1,C2] [--description D]
  metarelay webhooks list --project NAME | webhooks remove ID   (the signing secret is printed once, at add)
  metarelay tokenlist import <file-or-url> [--config FILE]      Uniswap-format token list
  metarelay contracts override --chain C --address A [--name N] [--symbol S] [--decimals D]
                               [--logo URL] [--type T] [--description D] [--link URL] [--verified] | --clear

The database is config.database, or DATABASE_URL (postgres://… or a PGlite folder).`;

/**
 * The verbs of each command that has them: a command given none answers its usage before anything
 * opens (a database opened first would be created and migrated in the current folder).
 */
const VERBS: Record<string, readonly string[]> = {
  projects: ['create', 'list'],
  keys: ['create', 'list', 'rotate', 'revoke'],
  admin: ['create', 'revoke'],
  sponsors: ['add', 'set', 'list', 'enable', 'disable', 'remove'],
  ecosystems: ['add', 'list', 'join', 'leave'],
  webhooks: ['add', 'list', 'remove'],
  indexer: ['backfill', 'work', 'status', 'watch'],
  tokenlist: ['import'],
  contracts: ['override'],
};

/** USAGE's lines for one command (with their continuation lines), or undefined for an unknown one. */
export function usageOf(cmd: string): string | undefined {
  const lines = USAGE.split('\n');
  const out: string[] = [];
  let inside = false;
  for (const line of lines) {
    if (line.startsWith('  metarelay ')) inside = line.startsWith(`  metarelay ${cmd} `) || line === `  metarelay ${cmd}`;
    else if (!/^ {20,}/.test(line)) inside = false;
    if (inside) out.push(line);
  }
  return out.length ? `Usage:\n${out.join('\n')}` : undefined;
}

export async function main(argv: string[]): Promise<void> {
  const [cmd, ...rest] = argv;
  // `metarelay <cmd> --help` anywhere on the line: the usage, and nothing opened or run.
  const help = cmd !== undefined && (rest.includes('--help') || rest.includes('-h')) ? usageOf(cmd) : undefined;
  if (help) {
    console.log(help);
    return;
  }
  const verbs = cmd !== undefined ? VERBS[cmd] : undefined;
  if (verbs && !rest.some((a) => verbs.includes(a))) {
    console.error(`metarelay ${cmd}: give one of ${verbs.join(', ')}\n${usageOf(cmd)}`);
    process.exitCode = 2;
    return;
  }
  try {
    switch (cmd) {
      case 'dev':
        return await (await import('./dev-command.ts')).runDev(rest);
      case 'serve':
        return await (await import('./serve.ts')).runServe(rest);
      case 'worker':
        return await (await import('./worker.ts')).runWorker(rest);
      case 'refresh':
        return await (await import('./worker.ts')).runRefresh(rest);
      case 'indexer':
        return await (await import('./indexer.ts')).runIndexer(rest);
      case 'doctor':
        return await (await import('./doctor.ts')).runDoctor(rest);
      case 'config':
        return await (await import('./config.ts')).runConfig(rest);
      case 'migrate':
        return await (await import('./admin.ts')).runMigrate(rest);
      case 'projects':
        return await (await import('./admin.ts')).runProjects(rest);
      case 'keys':
        return await (await import('./admin.ts')).runKeys(rest);
      case 'admin':
        return await (await import('./admin-tokens.ts')).runAdmin(rest);
      case 'relayer':
        return await (await import('./relayer.ts')).runRelayer(rest);
      case 'sponsors':
        return await (await import('./relayer.ts')).runSponsors(rest);
      case 'ecosystems':
        return await (await import('./ecosystems.ts')).runEcosystems(rest);
      case 'webhooks':
        return await (await import('./webhooks.ts')).runWebhooks(rest);
      case 'tokenlist':
        return await (await import('./contracts.ts')).runTokenList(rest);
      case 'contracts':
        return await (await import('./contracts.ts')).runContracts(rest);
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        console.log(USAGE);
        return;
      default:
        console.error(`unknown command "${cmd}"\n\n${USAGE}`);
        process.exitCode = 2;
    }
  } catch (err) {
    if (err instanceof ConfigError || err instanceof UsageError) {
      console.error(`metarelay: ${err.message}`);
      process.exitCode = 2;
      return;
    }
    if (err instanceof FolderInUseError) {
      console.error(`metarelay: ${err.message}`);
      process.exitCode = 1;
      return;
    }
    // Anything else (a node that refused, a database gone) is one line an operator can act on; the
    // stack is for a bug report, behind METARELAY_DEBUG.
    console.error(`metarelay ${cmd}: ${oneLine(err)}`);
    if (process.env.METARELAY_DEBUG) console.error((err as Error)?.stack ?? err);
    process.exitCode = 1;
  }
}

/** An error in one line: viem's short message and what the node said, else the message's first line. */
export function oneLine(err: unknown): string {
  const e = err as { shortMessage?: unknown; details?: unknown; message?: unknown };
  const short = typeof e?.shortMessage === 'string' ? e.shortMessage : undefined;
  const details = typeof e?.details === 'string' && e.details && e.details !== short ? e.details : undefined;
  const text = short ? (details ? `${short} (${details})` : short) : typeof e?.message === 'string' ? e.message : String(err);
  return text.split('\n')[0]!.trim();
}

export { UsageError };
