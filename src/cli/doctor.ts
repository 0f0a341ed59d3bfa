import { createPublicClient, formatEther, http, parseEther, type Address } from 'viem';
import type { AppConfig, ChainConfig } from '../config/schema.ts';
import { maskUrl } from '../config/mask.ts';
import { MULTICALL3_ADDRESS } from '../chain/multicall.ts';
import { SEQUENCE_V2_CONTEXT } from '../relayer/context.ts';
import { senderAccounts } from '../relayer/engine/sender-pool.ts';
import { existsSync } from 'node:fs';
import { isPostgresUrl, openDb } from '../store/db.ts';
import { loadMigrations } from '../store/migrate.ts';
import { parse } from './args.ts';
import { causeOf } from '../util/cause.ts';
import { configFrom, DB_FLAGS } from './db.ts';

type Level = 'ok' | 'warn' | 'FAIL' | 'skip';
interface Check {
  level: Level;
  name: string;
  detail: string;
}

const TIMEOUT_MS = 5_000;

function bounded<T>(p: Promise<T>, what: string, ms = TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([p, new Promise<never>((_, r) => (timer = setTimeout(() => r(new Error(`${what}: no answer within ${ms / 1000} s`)), ms)))]).finally(() => clearTimeout(timer));
}

/** Database reachable and every migration of this version applied (doctor never migrates). */
async function databaseChecks(config: AppConfig, relayerChains: ChainConfig[]): Promise<Check[]> {
  const where = maskUrl(config.database);
  // Opening a PGlite folder that is not there would create one: a doctor only looks.
  if (!isPostgresUrl(config.database) && !config.database.startsWith('memory://') && !existsSync(config.database)) {
    return [{ level: 'FAIL', name: 'database', detail: `no PGlite database at ${where} (\`metarelay migrate\` creates it)` }];
  }
  let db;
  try {
    db = await bounded(openDb(config.database, config.postgres), 'database', 20_000);
    await bounded(db.query('SELECT 1'), 'database');
  } catch (err) {
    await db?.close().catch(() => undefined);
    return [{ level: 'FAIL', name: 'database', detail: `${where} unreachable: ${causeOf(err)}` }];
  }
  const out: Check[] = [{ level: 'ok', name: 'database', detail: `${where} (${db.kind}) answers` }];
  try {
    const table = await db.query<{ t: string | null }>(`SELECT to_regclass('schema_migrations')::text AS t`);
    const done = new Set(table.rows[0]?.t ? (await db.query<{ id: number }>('SELECT id FROM schema_migrations')).rows.map((r) => Number(r.id)) : []);
    const pending = loadMigrations().filter((m) => !done.has(m.id));
    out.push(
      pending.length
        ? // serve, relayer and worker apply them at start (under an advisory lock): nothing is broken, the first start just does more.
          { level: 'warn', name: 'migrations', detail: `${pending.length} pending (${pending[0].name}…): serve applies them at start, or run \`metarelay migrate\` first` }
        : { level: 'ok', name: 'migrations', detail: `all ${done.size} applied` },
    );
    if (relayerChains.length) {
      // Fee quotes are signed with the quote secret; without one each process makes its own, and a
      // quote from one process is refused by the next. Only PostgreSQL is shared between processes.
      if (config.relayer.quoteSecret) out.push({ level: 'ok', name: 'quote secret', detail: 'set' });
      else if (db.kind === 'postgres')
        out.push({ level: 'FAIL', name: 'quote secret', detail: 'unset on a database several processes can share: set METARELAY_QUOTE_SECRET (or relayer.quoteSecret[File])' });
      else out.push({ level: 'warn', name: 'quote secret', detail: 'unset: fine for one process (PGlite), set it before running several' });
    }
  } finally {
    await db.close();
  }
  return out;
}

async function chainChecks(c: ChainConfig): Promise<Check[]> {
  const out: Check[] = [];
  let client;
  // Every URL: a failover URL that is wrong is found now, not when the first one goes down.
  for (const url of c.rpcUrls) {
    const name = `chain ${c.name}`;
    try {
      const probe = createPublicClient({ transport: http(url, { timeout: TIMEOUT_MS, retryCount: 0 }) });
      const id = await bounded(probe.getChainId(), 'RPC');
      if (id !== c.chainId) out.push({ level: 'FAIL', name, detail: `${maskUrl(url)} answers chainId ${id}, configured ${c.chainId}` });
      else {
        out.push({ level: 'ok', name, detail: `${maskUrl(url)} answers chainId ${id} (block ${await bounded(probe.getBlockNumber(), 'RPC')})` });
        client ??= probe;
      }
    } catch (err) {
      out.push({ level: 'FAIL', name, detail: `${maskUrl(url)} unreachable: ${causeOf(err)}` });
    }
  }
  if (!client) return out;
  const hasCode = async (a: Address) => ((await bounded(client.getCode({ address: a }), 'RPC')) ?? '0x') !== '0x';
  out.push(
    (await hasCode(MULTICALL3_ADDRESS))
      ? { level: 'ok', name: `multicall3 ${c.name}`, detail: `deployed at ${MULTICALL3_ADDRESS}` }
      : { level: 'warn', name: `multicall3 ${c.name}`, detail: 'absent: contract reads fall back to one eth_call each (slower)' },
  );
  const r = c.relayer;
  if (!r) return out;
  const context = r.context ?? SEQUENCE_V2_CONTEXT;
  const missing: string[] = [];
  for (const [k, a] of Object.entries(context)) if (!(await hasCode(a as Address))) missing.push(`${k} ${a}`);
  out.push(
    missing.length
      ? { level: 'FAIL', name: `sequence context ${c.name}`, detail: `no code at ${missing.join(', ')}: wallets cannot be deployed or simulated` }
      : { level: 'ok', name: `sequence context ${c.name}`, detail: `all ${Object.keys(context).length} contracts deployed` },
  );
  const floor = parseEther(r.minSenderBalance);
  for (const a of senderAccounts(r)) {
    const balance = await bounded(client.getBalance({ address: a.address }), 'RPC');
    // An empty sender cannot pay any gas, whatever the configured floor.
    const ok = balance > floor && balance > 0n;
    out.push({ level: ok ? 'ok' : 'FAIL', name: `sender ${c.name}`, detail: `${a.address} holds ${formatEther(balance)} (floor ${r.minSenderBalance})${ok ? '' : ': fund it'}` });
  }
  return out;
}

/** The empty-content identity CID: a gateway answers it without touching the IPFS network. */
const EMPTY_CID = 'bafkqaaa';

async function gatewayCheck(gateway: string): Promise<Check> {
  const url = `${gateway.replace(/\/?$/, '/')}${EMPTY_CID}`;
  try {
    const res = await bounded(fetch(url, { signal: AbortSignal.timeout(TIMEOUT_MS) }), 'gateway');
    await res.body?.cancel();
    return res.ok
      ? { level: 'ok', name: 'ipfs gateway', detail: `${maskUrl(gateway)} answers (HTTP ${res.status})` }
      : { level: 'warn', name: 'ipfs gateway', detail: `${maskUrl(gateway)} answers HTTP ${res.status}` };
  } catch (err) {
    // A warning: metadata falls back to the next gateway, and whatever is not on IPFS is unaffected.
    return { level: 'warn', name: 'ipfs gateway', detail: `${maskUrl(gateway)} unreachable: ${causeOf(err)}` };
  }
}

/**
 * `metarelay doctor --config FILE [--offline]`: what a first deployment gets wrong, one line per check;
 * exit 1 on a failure. --offline (a host without Internet access, a build step) skips the IPFS gateways.
 */
export async function runDoctor(argv: string[]) {
  const { values } = parse(argv, { ...DB_FLAGS, offline: { type: 'boolean' } });
  const config = configFrom(values);
  const relayerChains = config.chains.filter((c) => c.relayer);
  const groups = await Promise.all([
    databaseChecks(config, relayerChains),
    ...config.chains.map((c) => chainChecks(c).catch((err): Check[] => [{ level: 'FAIL', name: `chain ${c.name}`, detail: causeOf(err) }])),
    values.offline ? [{ level: 'skip' as Level, name: 'ipfs gateways', detail: 'not checked (--offline)' }] : Promise.all(config.ipfsGateways.map(gatewayCheck)),
  ]);
  const checks = [{ level: 'ok' as Level, name: 'config', detail: values.config ?? '(defaults and environment)' }, ...groups.flat()];
  for (const c of checks) console.log(`${c.level.padEnd(4)}  ${c.name}: ${c.detail}`);
  const failed = checks.filter((c) => c.level === 'FAIL').length;
  console.log(failed ? `${failed} check(s) failed` : 'all checks passed');
  if (failed) process.exitCode = 1;
}
