import { createHash } from 'node:crypto';
import pg from 'pg';
import { PREPARED_MARK, commitSlot, runsAfter, type Db, type QueryResult } from './db-core.ts';
import { keepMaintained, type MaintenanceListener } from './maintenance.ts';
import { Limiter } from '../util/limiter.ts';
import { DatabaseHealth } from './db-health.ts';
import { isConnectionLoss } from './outage.ts';
import { Held, isReadOnly, markNotRun, notRun, retrying } from './pg-client.ts';
import { APPLICATION_NAME, PG_SESSION_DEFAULTS, sessionOptions, type PgSession } from './pg-session.ts';

// BIGINT (int8) comes back as string by default; ids and counters here fit in a JS number.
pg.types.setTypeParser(20, (v) => {
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : v;
});

/** Statements named (prepared once per connection) at most. */
const MAX_PREPARED = 500;

/**
 * Names the statements marked `prepared()` (store/db.ts), so each connection parses them once:
 * parsing and planning were half of PostgreSQL's time per SendMetaTxn (pg_stat_statements,
 * bench/relayer-intake.ts). They are still planned for their values (force_custom_plan below). Only
 * marked statements (naming every one, with generic plans, made the token index's DELETE … token_id =
 * ANY($3) scan the whole table), and only statements with parameters (a text without them may hold
 * several statements). At most MAX_PREPARED of them.
 */
export class StatementNames {
  private readonly names = new Map<string, string>();
  /** Bumped when PostgreSQL refuses a cached plan (a migration changed a table under it): new names, new plans. */
  private generation = 0;

  nameOf(sql: string): string | undefined {
    const known = this.names.get(sql);
    if (known) return known;
    if (this.names.size >= MAX_PREPARED || !sql.startsWith(PREPARED_MARK)) return undefined;
    const name = `mr${this.generation}_${createHash('sha1').update(sql).digest('hex').slice(0, 16)}`;
    this.names.set(sql, name);
    return name;
  }

  /** After "cached plan must not change result type": every text gets a fresh name (and so a fresh plan). */
  renew() {
    this.generation++;
    this.names.clear();
  }

  get size() {
    return this.names.size;
  }
}

/** A named statement's plan no longer fits (a migration changed a table under it), or the session dropped it (DISCARD ALL). */
const isStalePlan = (err: unknown) =>
  ((err as { code?: string }).code === '0A000' && /cached plan must not change result type/.test(String((err as Error).message))) || (err as { code?: string }).code === '26000';

/**
 * Runs `sql` on a pool or a client, named when `names` says so. A stale cached plan renews the names;
 * on the pool (autocommit) the statement is retried once, inside a transaction (aborted by the error)
 * the error goes up and the next transaction gets fresh plans.
 */
async function run(on: pg.Pool | pg.PoolClient, names: StatementNames, sql: string, params?: unknown[], retry = true) {
  const name = params?.length ? names.nameOf(sql) : undefined;
  if (!name) return on.query(sql, params);
  try {
    return await on.query({ name, text: sql, values: params });
  } catch (err) {
    if (!isStalePlan(err)) throw err;
    names.renew();
    if (!retry) throw err;
    return on.query(sql, params);
  }
}

export interface PostgresOptions {
  max?: number;
  probe?: boolean;
  maintain?: boolean;
  /** Connection bounds (config `postgres`); the defaults when left out. */
  session?: PgSession;
  /** The main pool's, for its dedicated pools: one outage is one. */
  health?: DatabaseHealth;
}

export async function openPostgres(url: string, opts: PostgresOptions = {}): Promise<Db> {
  const session = opts.session ?? PG_SESSION_DEFAULTS;
  const max = opts.max ?? session.poolSize;
  // Named statements keep the one plan made without values (generic), as on PGlite (pglite-worker.mjs):
  // the same plans on both engines, which test/relayer-store-plans.test.ts holds to keyed look-ups.
  // PostgreSQL's default (auto) kept planning the two intake statements that unnest arrays for their
  // values at every run (a generic plan counts 100 elements an array, a custom one its real length, so
  // the generic never looked cheaper): 1.3 ms of the server's time per SendMetaTxn (30 Nov, seventh
  // session). Unnamed (per-request) statements are planned for their values, as always. The session's
  // lock and idle-transaction bounds ride along (pg-session.ts).
  const pool = new pg.Pool({ connectionString: url, max, options: sessionOptions(session), application_name: APPLICATION_NAME });
  // Fail at boot, not at the first request, when the server is unreachable.
  if (opts.probe !== false) {
    const probe = await pool.connect();
    probe.release();
  }
  pool.on('error', () => {
    /* an idle client died; the pool replaces it on next use */
  });
  let closed = false;
  const names = new StatementNames();
  const health = opts.health ?? new DatabaseHealth();
  // The main pool's; a dedicated pool (a loop's few connections) leaves it to the main one.
  let maintenanceListener: MaintenanceListener | undefined;
  const stopMaintaining = opts.maintain === false ? () => undefined : keepMaintained(pool, () => maintenanceListener);

  /**
   * One autocommit statement on a client of its own (pg-pool's query(), with the connection's death
   * listened for). Retried when it never reached the server (no connection could be had), or when it
   * only reads and its connection died under it. Like pg-pool's, a client whose statement failed is
   * destroyed rather than kept.
   */
  const autocommit = (sql: string, params: unknown[] | undefined, named: boolean) =>
    retrying(
      async () => {
        const held = await Held.of(pool);
        try {
          const res = named ? await run(held.client, names, sql, params) : await held.client.query(sql, params);
          held.release();
          return res;
        } catch (err) {
          held.release(err);
          throw err;
        }
      },
      (err) => notRun.has(err as object) || (isConnectionLoss(err) && isReadOnly(sql)),
      health,
    );

  return {
    kind: 'postgres',
    connections: max,
    async query<T>(sql: string, params?: unknown[]): Promise<QueryResult<T>> {
      const res = await autocommit(sql, params, true);
      return { rows: res.rows as T[], rowCount: res.rowCount ?? 0 };
    },
    async exec(sql: string) {
      await autocommit(sql, undefined, false);
    },
    /**
     * Retried only when it failed before `fn` ran (no connection, or BEGIN on a connection that had
     * died in the pool): `fn` may act outside the database (sign, broadcast, count in memory), so once
     * it has run the failure is its caller's, as any failed transaction is. A connection lost later
     * rolls the transaction back on the server (or, lost during COMMIT, leaves its outcome unknown),
     * and the error goes up: HTTP answers 503, the loops try again at their next turn, and SendMetaTxn
     * sent again finds the meta-transaction if it did commit.
     */
    transaction(fn) {
      return retrying(
        async () => {
          const held = await Held.of(pool);
          const client = held.client;
          const slot = commitSlot();
          // One statement at a time, in call order, whatever the outcome before it: callers issue several at
          // once (Promise.all on a transaction, the statements held for the COMMIT). pg's own queue did this,
          // but pg deprecates it (a warning in every log on its first use) and drops it in version 9.
          const oneAtATime = new Limiter(1);
          let unusable: unknown;
          try {
            await client.query('BEGIN').catch((err) => {
              throw markNotRun(err);
            });
            const out = await fn({
              async exec(sql: string) {
                await oneAtATime.run(() => client.query(sql));
              },
              async query<T>(sql: string, params?: unknown[]) {
                const res = await oneAtATime.run(() => run(client, names, sql, params, false));
                return { rows: res.rows as T[], rowCount: res.rowCount ?? 0 };
              },
              atCommit: slot.atCommit,
            });
            // Each sent once the answer before it is read (one at a time, as the connection runs them
            // anyway), the COMMIT last; one whose `onlyIf` the answer before it does not meet is not sent.
            // The first failure is what this throws (the catch below rolls back).
            const results: QueryResult<unknown>[] = [];
            for (const x of slot.statements) {
              if (!runsAfter(x.onlyIf, results.at(-1))) {
                results.push({ rows: [], rowCount: 0 });
                continue;
              }
              const r = await oneAtATime.run(() => run(client, names, x.sql, x.params, false));
              results.push({ rows: r.rows, rowCount: r.rowCount ?? 0 });
            }
            await oneAtATime.run(() => client.query('COMMIT'));
            slot.settle(results);
            return out;
          } catch (err) {
            slot.settle(undefined);
            // A ROLLBACK that fails (the connection is gone) leaves the client unusable: it is destroyed.
            if (!held.lost) await oneAtATime.run(() => client.query('ROLLBACK')).catch((e) => (unusable = e));
            throw err;
          } finally {
            held.release(unusable);
          }
        },
        (err) => notRun.has(err as object),
        health,
      );
    },
    async lockSession(idleTimeoutMs: number) {
      // The server ends the session after idleTimeoutMs without a statement (a frozen holder, a network
      // gone quiet); the leader's own checks run far more often. A statement hung on a dead socket fails
      // on the client within the same bound.
      const client = new pg.Client({
        connectionString: url,
        application_name: APPLICATION_NAME,
        options: `${sessionOptions(session)} -c idle_session_timeout=${idleTimeoutMs} -c statement_timeout=${idleTimeoutMs}`,
        query_timeout: idleTimeoutMs,
        connectionTimeoutMillis: idleTimeoutMs,
        keepAlive: true,
      });
      let lost: ((err: Error) => void) | undefined;
      let ended = false;
      const end = (err: Error) => {
        if (ended) return;
        ended = true;
        lost?.(err);
      };
      // An 'error' nobody listens to would exit the process (pg-client.ts).
      client.on('error', end);
      client.on('end', () => end(new Error('the lock connection ended')));
      try {
        await client.connect();
      } catch (err) {
        await client.end().catch(() => undefined);
        throw err;
      }
      return {
        query: async <T>(sql: string, params?: unknown[]) => ({ rows: (await client.query(sql, params)).rows as T[] }),
        onLost(fn: (err: Error) => void) {
          lost = fn;
        },
        onNotification(fn: (channel: string, payload: string) => void) {
          client.on('notification', (n) => fn(n.channel, n.payload ?? ''));
        },
        async close() {
          ended = true;
          await client.end().catch(() => undefined);
        },
      };
    },
    dedicated: (n: number) => openPostgres(url, { max: n, probe: false, maintain: false, session, health }),
    onMaintenance(listener) {
      maintenanceListener = listener;
    },
    onHealth(listener) {
      health.listener = listener;
    },
    async close() {
      if (closed) return;
      closed = true;
      stopMaintaining();
      await pool.end();
    },
  };
}
