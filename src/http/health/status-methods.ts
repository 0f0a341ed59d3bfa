import type { z } from 'zod';
import type { Services } from '../../services.ts';
import { APP_VERSION } from '../../version.ts';
import { runReadinessChecks, type ReadinessDeps } from './health.ts';
import { RpcError, type ErrorDef } from '../core/errors.ts';
import { method, type MethodDef, type RpcContext } from '../core/webrpc.ts';
import { NoArgs } from '../core/args.ts';

/** What RuntimeStatus reads: the readiness checks' and when the process started. */
export type StatusDeps = ReadinessDeps & Pick<Services, 'startedAt'>;

export function formatUptime(seconds: number): string {
  const d = Math.floor(seconds / 86400);
  const h = Math.floor((seconds % 86400) / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = Math.floor(seconds % 60);
  return `${d ? `${d}d` : ''}${h ? `${h}h` : ''}${m ? `${m}m` : ''}${s}s`;
}

export function versionInfo(schemaVersion: string, schemaHash: string) {
  return { webrpcVersion: 'v0.31.0', schemaVersion, schemaHash, appVersion: `metarelay@${APP_VERSION}` };
}

/**
 * Whether a RuntimeStatus call may see operational detail (a failing node's error, which names its
 * address; sender balances and queues): a caller with an access key or an admin token. A keyless
 * caller learns what is up, not why or with what.
 */
export const seesDetail = (ctx: Pick<RpcContext, 'project' | 'admin'>): boolean => ctx.project !== null || ctx.admin;

/** The Sequence RuntimeStatus shape; each dependency is one "runnable". `detailed`: the checks' details too (seesDetail). */
export async function runtimeStatus(s: StatusDeps, detailed: boolean) {
  const checks = (await runReadinessChecks(s)).map((c) => (detailed ? c : { ...c, detail: c.ok ? undefined : 'failed' }));
  const uptime = Math.floor((Date.now() - s.startedAt.getTime()) / 1000);
  const runnable: Record<string, { running: boolean; restarts: number; startTime: string; lastError: string | null }> = {};
  for (const c of checks) {
    runnable[c.name] = { running: c.ok, restarts: 0, startTime: s.startedAt.toISOString(), lastError: c.ok ? null : (c.detail ?? 'failed') };
  }
  return {
    healthOK: checks.every((c) => c.ok),
    startTime: s.startedAt.toISOString(),
    uptime,
    uptimeString: formatUptime(uptime),
    ver: APP_VERSION,
    branch: process.env.METARELAY_BRANCH ?? '',
    commitHash: process.env.METARELAY_COMMIT ?? '',
    runnable,
    // An object keyed by check name: the relayer schema's RuntimeChecks is an object (a Go client cannot decode an array into it).
    checks: Object.fromEntries(checks.map((c) => [c.name, { ok: c.ok, ...(c.detail ? { detail: c.detail } : {}) }])),
  };
}

/**
 * Methods of a schema this service refuses, each answering `notFound` with why and what to use instead: a
 * client gets a clear answer, never a call accepted and ignored. Arguments are not read.
 */
export function refusedMethodDefs(reasons: Record<string, string>, notFound: ErrorDef): Record<string, MethodDef<z.ZodType>> {
  return Object.fromEntries(
    Object.entries(reasons).map(([name, why]) => [
      name,
      method({
        input: NoArgs,
        handler: async () => {
          throw new RpcError(notFound, why);
        },
      }),
    ]),
  );
}
