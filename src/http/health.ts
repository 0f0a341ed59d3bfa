import type { FastifyInstance } from 'fastify';
import type { Services } from '../services.ts';

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

/** Database and every configured chain, checked concurrently with a bound on each. */
export async function runReadinessChecks(s: Services, timeoutMs = 2_000): Promise<CheckResult[]> {
  return Promise.all([
    timed('database', async () => {
      await s.db.query('SELECT 1');
      return s.db.kind;
    }, timeoutMs),
    ...[...s.chains.values()].map((c) =>
      timed(`chain:${c.name}`, async () => `block ${await c.public.getBlockNumber()}`, timeoutMs),
    ),
  ]);
}

export function registerHealthRoutes(app: FastifyInstance, s: Services) {
  app.get('/health', async () => ({ status: 'ok', uptime: Math.round((Date.now() - s.startedAt.getTime()) / 1000) }));
  app.get('/ready', async (_req, reply) => {
    // A draining process is alive but should get no new traffic.
    if (s.draining) return reply.code(503).send({ ready: false, draining: true, checks: [] });
    const checks = await runReadinessChecks(s);
    const ok = checks.every((c) => c.ok);
    return reply.code(ok ? 200 : 503).send({ ready: ok, checks });
  });
  app.get('/metrics', async (_req, reply) => {
    reply.type(s.metrics.registry.contentType);
    return s.metrics.registry.metrics();
  });
}
