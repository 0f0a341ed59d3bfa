// BENCH_PROFILE=1 hooks for bench/relayer-intake.ts (issue #19): where a SendMetaTxn's time goes.
//
// - Database: every statement run inside ChainRelayer.send (an AsyncLocalStorage marks the request),
//   counted by statement shape, with its wall time; transactions (BEGIN..COMMIT) with their wall time.
// - Stages of ChainRelayer.send, timed by wrapping the instance's methods (wall time, so waits for the
//   probe window, the pool and locks are in them).
// - CPU: an inspector CPU profile of this process over the measured window, self time grouped by
//   what the code is (pino, zod, viem hashing/ecrecover, pg/PGlite, fastify, undici client, ...).
//
// The bench client runs in the same process (fetch over a socket), so its share of CPU is listed apart.
import { AsyncLocalStorage } from 'node:async_hooks';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import type { Db, Queryable } from '../../src/store/db.ts';

const inSend = new AsyncLocalStorage<{ sends: number }>();

interface Stat {
  n: number;
  ms: number;
}
const add = (m: Map<string, Stat>, k: string, ms: number) => {
  const s = m.get(k) ?? { n: 0, ms: 0 };
  s.n++;
  s.ms += ms;
  m.set(k, s);
};

const shape = (sql: string) => sql.replace(/\s+/g, ' ').trim().slice(0, 90);

export class IntakeProfile {
  readonly statements = new Map<string, Stat>();
  readonly stages = new Map<string, Stat>();
  readonly transactions: Stat = { n: 0, ms: 0 };
  /** Every statement of the window, wherever it ran (dispatcher and receipts too), with one run's values. */
  readonly everyStatement = new Map<string, { sql: string; params: unknown[]; n: number }>();
  sends = 0;
  enabled = false;

  /** Counts the statements of `db` run inside a send (the Db object is shared by every repository). */
  wrapDb(db: Db) {
    const self = this;
    const query = db.query.bind(db);
    const transaction = db.transaction.bind(db);
    const timed = (q: Queryable['query']) =>
      async function (this: unknown, sql: string, params?: unknown[]) {
        const on = self.enabled && inSend.getStore();
        const k = self.enabled ? shape(sql) : '';
        if (self.enabled) {
          const seen = self.everyStatement.get(k);
          if (seen) seen.n++;
          else self.everyStatement.set(k, { sql, params: params ?? [], n: 1 });
        }
        const t0 = performance.now();
        try {
          return await q(sql, params);
        } finally {
          if (on) add(self.statements, k, performance.now() - t0);
        }
      } as Queryable['query'];
    (db as { query: Queryable['query'] }).query = timed(query);
    (db as { transaction: Db['transaction'] }).transaction = async (fn) => {
      const on = self.enabled && inSend.getStore();
      const t0 = performance.now();
      try {
        return await transaction((tx) => fn({ ...tx, exec: tx.exec.bind(tx), query: timed(tx.query.bind(tx)) }));
      } finally {
        if (on) {
          self.transactions.n++;
          self.transactions.ms += performance.now() - t0;
        }
      }
    };
  }

  /** Times the named methods of `obj` (wall time, inside sends only); `root` marks the request. */
  wrapMethods(obj: object, names: string[], root?: string) {
    const o = obj as Record<string, (...a: unknown[]) => unknown>;
    for (const name of names) {
      // A stage renamed or moved fails here, not as an undefined property deep in a run.
      if (typeof o[name] !== 'function') throw new Error(`intake profile: no method ${name} on ${obj.constructor.name}`);
      const f = o[name].bind(obj);
      o[name] = (...a: unknown[]) => {
        const run = async () => {
          const on = this.enabled && (name === root || inSend.getStore());
          const t0 = performance.now();
          try {
            return await f(...a);
          } finally {
            if (on) add(this.stages, name, performance.now() - t0);
          }
        };
        if (name === root) {
          if (this.enabled) this.sends++;
          return inSend.run({ sends: 1 }, run);
        }
        return run();
      };
    }
  }

  report(cpu?: CpuSummary) {
    const per = (x: number) => Math.round((x / Math.max(1, this.sends)) * 1000) / 1000;
    const stmts = [...this.statements.entries()].sort((a, b) => b[1].ms - a[1].ms);
    const totalN = stmts.reduce((x, [, s]) => x + s.n, 0);
    const totalMs = stmts.reduce((x, [, s]) => x + s.ms, 0);
    return {
      sends: this.sends,
      db: {
        statementsPerSend: per(totalN),
        statementMsPerSend: per(totalMs),
        transactionsPerSend: per(this.transactions.n),
        transactionMsPerSend: per(this.transactions.ms),
        byStatement: stmts.slice(0, 30).map(([sql, s]) => ({ sql, perSend: per(s.n), msPerSend: per(s.ms), msEach: Math.round((s.ms / s.n) * 100) / 100 })),
      },
      stagesMsPerSend: Object.fromEntries([...this.stages.entries()].map(([k, s]) => [k, { calls: per(s.n), ms: per(s.ms) }])),
      cpu,
    };
  }
}

export interface CpuSummary {
  wallMs: number;
  sampledMs: number;
  processCpuMs: number;
  byCategory: Record<string, number>;
  topFunctions: Array<{ fn: string; ms: number }>;
}

const CATEGORIES: Array<[string, RegExp]> = [
  ['gc', /^\(garbage collector\)$/],
  ['idle', /^\(idle\)$/],
  ['program (native, I/O)', /^\(program\)$/],
  ['pino logging', /node_modules\/(pino|sonic-boom|thread-stream|fast-redact|quick-format)/],
  ['zod parsing', /node_modules\/zod/],
  ['hashing/ecrecover (noble)', /node_modules\/@noble/],
  ['viem encode/decode', /node_modules\/(viem|ox|abitype)/],
  ['pg driver', /node_modules\/(pg|pg-protocol|pg-types|pg-pool|postgres-)/],
  ['PGlite', /node_modules\/@electric-sql/],
  ['fastify/http server', /node_modules\/(fastify|@fastify|find-my-way|light-my-request|avvio|fast-json-stringify|secure-json-parse)/],
  ['prom-client', /node_modules\/prom-client/],
  ['bench client (undici fetch)', /(node:internal\/deps\/undici|bench\/)/],
  ['metarelay relayer intake', /src\/relayer\/(intake|service|store|bundle)/],
  ['metarelay relayer engine', /src\/relayer\/engine/],
  ['metarelay other', /\/src\//],
  ['node http/net', /node:(_http|http|net|internal\/(http|stream|streams|net|dns))/],
  ['node internal other', /^node:/],
];

/** Profiles this process while `fn` runs; self time by category. */
export async function cpuProfile<T>(fn: () => Promise<T>): Promise<{ value: T; cpu: CpuSummary }> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 500 });
  await session.post('Profiler.start');
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const value = await fn();
  const wallMs = performance.now() - t0;
  const c = process.cpuUsage(c0);
  const { profile } = await session.post('Profiler.stop');
  session.disconnect();
  // BENCH_PROFILE_OUT=file.cpuprofile keeps the whole profile (Chrome DevTools / speedscope open it).
  if (process.env.BENCH_PROFILE_OUT) writeFileSync(process.env.BENCH_PROFILE_OUT, JSON.stringify(profile));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  const deltas = profile.timeDeltas ?? [];
  (profile.samples ?? []).forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (deltas[i] ?? 0)));
  const byCategory: Record<string, number> = {};
  const byFn = new Map<string, number>();
  let sampled = 0;
  for (const [id, us] of selfUs) {
    const n = byId.get(id)!;
    const url = n.callFrame.url || n.callFrame.functionName;
    const cat = CATEGORIES.find(([, re]) => re.test(url))?.[0] ?? (url ? 'other' : `(${n.callFrame.functionName || 'anonymous'})`);
    byCategory[cat] = (byCategory[cat] ?? 0) + us / 1000;
    if (cat !== 'idle') sampled += us / 1000;
    const key = `${n.callFrame.functionName || '(anon)'} ${url.replace(/^.*node_modules\//, '').replace(/^file:\/\/\/work\/wt-intake\//, '')}:${n.callFrame.lineNumber + 1}`;
    byFn.set(key, (byFn.get(key) ?? 0) + us / 1000);
  }
  const r = (x: number) => Math.round(x * 10) / 10;
  return {
    value,
    cpu: {
      wallMs: r(wallMs),
      sampledMs: r(sampled),
      processCpuMs: r((c.user + c.system) / 1000),
      byCategory: Object.fromEntries(
        Object.entries(byCategory)
          .sort((a, b) => b[1] - a[1])
          .map(([k, v]) => [k, r(v)]),
      ),
      topFunctions: [...byFn.entries()]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 25)
        .map(([fn, ms]) => ({ fn, ms: r(ms) })),
    },
  };
}
