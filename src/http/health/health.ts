import type { FastifyInstance } from 'fastify';
import type { Services } from '../../services.ts';
import type { ChainClient } from '../../chain/client.ts';
import type { ChainState } from '../../chain/health.ts';
import { relayerSnapshot } from '../../relayer/index.ts';
import { MetadataErrors } from '../core/errors.ts';
import { sendError } from '../core/webrpc.ts';
import type { AccessPipeline } from '../core/access-pipeline.ts';

/** What the readiness checks ask: the database and every configured chain's node. */
export type ReadinessDeps = Pick<Services, 'db' | 'chains'>;
/** What /health, /ready and /metrics read: the checks', each relayer's snapshot (its metaTxns), draining, the start, the fleet's count and the metrics. */
export type HealthRouteDeps = ReadinessDeps & Pick<Services, 'relayers' | 'metaTxns' | 'draining' | 'startedAt' | 'fleet' | 'metrics'>;

export interface CheckResult {
  name: string;
  ok: boolean;
  detail?: string;
  ms: number;
}

async function timed(name: string, fn: () => Promise<string | undefined>, timeoutMs: number): Promise<CheckResult> {
  const t0 = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    const detail = await Promise.race([
      fn(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    return { name, ok: true, detail, ms: Math.round(performance.now() - t0) };
  } catch (err) {
    return { name, ok: false, detail: (err as Error).message.split('\n')[0], ms: Math.round(performance.now() - t0) };
  } finally {
    clearTimeout(timer);
  }
}

/** One chain's node asked for its head, bounded; what it answers (or not) is kept in its health. */
async function probeChain(c: ChainClient, timeoutMs: number): Promise<CheckResult> {
  const check = await timed(
    `chain:${c.name}`,
    async () => {
      const block = await c.head.probe(c.public);
      return `block ${block}`;
    },
    timeoutMs,
  );
  // A node slower than the bound has not failed at the transport yet: for readiness it is down now.
  if (!check.ok && c.health.ok) c.health.failed(check.detail ?? 'failed');
  return check;
}

function checkDatabase(s: Pick<Services, 'db'>, timeoutMs: number): Promise<CheckResult> {
  return timed(
    'database',
    async () => {
      await s.db.query('SELECT 1');
      return s.db.kind;
    },
    timeoutMs,
  );
}

/** Database and every configured chain, checked concurrently with a bound on each. */
export async function runReadinessChecks(s: ReadinessDeps, timeoutMs = 2_000): Promise<CheckResult[]> {
  return Promise.all([checkDatabase(s, timeoutMs), ...[...s.chains.values()].map((c) => probeChain(c, timeoutMs))]);
}

function chainNamed(s: Pick<Services, 'chains'>, name: string): ChainClient | undefined {
  for (const c of s.chains.values()) if (c.name === name || String(c.chainId) === name) return c;
  return undefined;
}

/**
 * One chain in /ready's body: its node's state (last head and when, down since, cause) and, where a
 * relayer runs, its queue and senders as last known, read from the database so they stay through an
 * outage (and are left out, null, when the database itself does not answer).
 */
async function chainView(s: Pick<Services, 'relayers' | 'db' | 'metaTxns'>, c: ChainClient, dbOk: boolean): Promise<ChainState & { relayer?: Awaited<ReturnType<typeof relayerSnapshot>> | null }> {
  const state = c.health.state();
  const r = s.relayers.get(c.chainId);
  if (!r) return state;
  const relayer = dbOk ? await relayerSnapshot(s, r).catch(() => null) : null;
  return { ...state, relayer };
}

/**
 * /health, /ready and /metrics. What a node answers, sender balances, queue sizes and the counters are
 * the operator's: /ready gives anonymous callers (probes, balancers) its status and `{ready}` only, and
 * the full body with an admin token; /metrics answers an admin token only (or, without one, on the
 * `metrics.listen` address: http/health/metrics-server.ts).
 */
export function registerHealthRoutes(app: FastifyInstance, s: HealthRouteDeps, access: Pick<AccessPipeline, 'isOperator'>, started: () => boolean = () => true) {
  app.get('/health', async () => ({ status: 'ok', uptime: Math.round((Date.now() - s.startedAt.getTime()) / 1000) }));
  // Ready means this process can serve: the database answers and it is not draining. A chain that is
  // down does not take the instance out of the balancer (metadata for the other chains, receipts and
  // reads from the database still work; calls that need that node answer 503 naming it). Its state is
  // in the body, and `?chain=<name>` answers for that chain alone, for routing per chain.
  app.get('/ready', async (req, reply) => {
    const only = (req.query as Record<string, unknown>).chain;
    if (only !== undefined && typeof only !== 'string') return sendError(reply, MetadataErrors.InvalidArgument, 'chain: give one chain name or chainId');
    const chain = only === undefined ? undefined : chainNamed(s, only);
    if (only !== undefined && !chain) {
      const names = [...s.chains.values()].map((c) => c.name).join(', ') || 'none';
      return sendError(reply, { ...MetadataErrors.ChainNotFound, status: 404 }, `no chain named "${only}" is configured (configured: ${names})`);
    }
    // A stored admin token is looked up in the database: while it cannot answer, the caller gets the
    // short answer (a token in the config is still known), not an error in place of /ready's 503.
    const full = await access.isOperator(req).catch(() => false);
    // A draining process is alive but should get no new traffic.
    if (s.draining) return reply.code(503).send(full ? { ready: false, draining: true, checks: [], chains: [] } : { ready: false, draining: true });
    if (!started()) return reply.code(503).send(full ? { ready: false, starting: true, checks: [], chains: [] } : { ready: false, starting: true });
    const checks = await Promise.all([checkDatabase(s, 2_000), ...(chain ? [chain] : [...s.chains.values()]).map((c) => probeChain(c, 2_000))]);
    const database = checks[0];
    if (!full) {
      const ready = database.ok && (!chain || chain.health.ok);
      return reply.code(ready ? 200 : 503).send({ ready });
    }
    const chains = await Promise.all((chain ? [chain] : [...s.chains.values()]).map((c) => chainView(s, c, database.ok)));
    const ready = database.ok && (!chain || chains[0].ok);
    // The API processes this one counts on the database: each holds 1/apiProcesses of every in-memory rate.
    const fleet = { apiProcesses: s.fleet.size };
    return reply.code(ready ? 200 : 503).send({ ready, database, chains, fleet, checks });
  });
  app.get('/metrics', async (req, reply) => {
    if (!(await access.isOperator(req))) {
      return sendError(reply, MetadataErrors.Unauthorized, 'metrics need an admin token (Authorization: Bearer <token>), or scrape the metrics.listen address');
    }
    reply.type(s.metrics.registry.contentType);
    return s.metrics.registry.metrics();
  });
}
