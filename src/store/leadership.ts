import { createHash } from 'node:crypto';
import type { Logger } from '../telemetry/logger.ts';
import { FailureStreak } from '../util/failure-streak.ts';

/**
 * One connection of its own (PostgreSQL), outside every pool: session-level advisory locks live as long
 * as it does, so a process that dies (kill -9, a crash, a lost connection) lets go of them with it.
 */
export interface LockSession {
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<{ rows: T[] }>;
  /** `fn` is called once when the connection ends or fails (the server restarted, ended it, or the network went). */
  onLost(fn: (err: Error) => void): void;
  /** `fn` is called with each notification of a channel this connection LISTENs to (another process's NOTIFY). */
  onNotification?(fn: (channel: string, payload: string) => void): void;
  close(): Promise<void>;
}

/** Work only one process of the fleet does at a time: started when this process leads, stopped when it stops leading. */
export interface Role {
  start(): void;
  stop(): Promise<void>;
  /**
   * A PostgreSQL channel other processes NOTIFY when they leave work for the role (the queued
   * meta-transactions of a chain): the lock connection LISTENs to it, and while the role runs here each
   * notification is handed to `wake` (with its payload), so the leader needs no poll of its own for it.
   */
  channel?: string;
  wake?(payload: string): void;
}

export interface LeadershipOptions {
  /** How often a process that does not lead tries to, and the leader checks its connection (postgres.leaderCheckMs). */
  checkMs: number;
  log: Logger;
  /** Told 1 when this process starts leading `name`, 0 when it stops (the metarelay_leader gauge). */
  onChange?: (name: string, leading: boolean) => void;
}

/**
 * A dead leader is replaced within about checkMs (kill -9: the server sees its socket close at once);
 * a frozen or cut-off one within sessionTimeoutMs + checkMs. One statement per process per checkMs,
 * and one more where the process has joined a count (`join`).
 */
export const LEADERSHIP_DEFAULTS = Object.freeze({ checkMs: 2_000, sessionTimeoutMs: 15_000 });

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * The holders of one shared advisory lock on this database, by lock key: the processes joined to a
 * count. A 64-bit advisory lock is listed with its key's high half as classid, its low half as objid.
 */
const COUNT_HOLDERS = `
SELECT k::text AS k, (
  SELECT count(*) FROM pg_locks l
  WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND l.classid = ((k >> 32) & 4294967295)::oid AND l.objid = (k & 4294967295)::oid
) AS n
FROM unnest($1::bigint[]) AS k`;

/** The advisory lock key of a role: 64 bits of its name's hash (names, not numbers, in the code and the logs). */
export function lockKey(name: string): bigint {
  return createHash('sha256').update(`metarelay:${name}`).digest().readBigInt64BE(0);
}

/**
 * Which process of the fleet does each role's work (a chain's follower and watcher, the media sweep):
 * the one holding the role's PostgreSQL advisory lock on its own connection (LockSession). Processes that
 * do not lead try again every `checkMs` with one statement on that connection, and do nothing else for
 * the role: no node call, no other statement. A leader that dies lets go of its locks with its connection
 * (kill -9: at once, as the server sees the socket close; a frozen or cut-off one when the server ends
 * its idle session, postgres.leaderSessionTimeoutMs), and another process takes over at its next check.
 * A leader whose connection fails stops its roles at once, before another can have taken them: two
 * leaders of one role overlap at most for the moments the old one takes to notice, and the roles' own
 * writes stay correct then (each step checks the shared cursor it moves, under a row lock).
 *
 * The same connection counts processes (`join`): each process joined to a name holds a shared lock
 * of it, so the live holders are the live processes, and a dead one leaves the count as it leaves its
 * roles. The API processes count themselves so (`api`) to share the rate buckets (util/fleet-share.ts).
 *
 * Without sessions (PGlite: one process per database, folder-lock.ts) this process leads every role,
 * and is alone in every count.
 */
export class Leadership {
  private readonly roles = new Map<string, { role: Role; key: bigint; leading: boolean }>();
  /** The counts this process has joined, and who is told each turn's count. */
  private readonly counts = new Map<string, { key: bigint; onCount: (n: number) => void }>();
  private session: LockSession | undefined;
  /** The channels the open session LISTENs to. */
  private listening = new Set<string>();
  /** The counts whose shared lock the open session holds. */
  private joined = new Set<string>();
  private running = false;
  private timer: NodeJS.Timeout | undefined;
  private turn: Promise<void> = Promise.resolve();
  private readonly streak: FailureStreak;

  constructor(
    private readonly open: (() => Promise<LockSession>) | undefined,
    private readonly o: LeadershipOptions,
  ) {
    this.streak = new FailureStreak(o.log, 'leader election');
  }

  /** `role` runs while this process leads `name` (once start() is called). */
  add(name: string, role: Role): void {
    if (this.roles.has(name)) throw new Error(`leadership: role ${name} added twice`);
    this.roles.set(name, { role, key: lockKey(name), leading: false });
    if (this.running) this.check();
  }

  has(name: string): boolean {
    return this.roles.has(name);
  }

  /**
   * Counts this process among the processes joined to `name` on the database (once start() is called);
   * `onCount` is told how many are live, this one included, each turn (every checkMs). While the lock
   * connection is down it is told nothing, so the last count holds.
   */
  join(name: string, onCount: (n: number) => void): void {
    if (this.counts.has(name)) throw new Error(`leadership: count ${name} joined twice`);
    this.counts.set(name, { key: lockKey(`count:${name}`), onCount });
    if (this.running) this.check();
  }

  /** The roles this process leads now. */
  get leading(): string[] {
    return [...this.roles].filter(([, r]) => r.leading).map(([n]) => n);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.check();
  }

  /** Stops every role this process leads and lets go of the locks (its session closes). */
  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    await this.turn;
    await this.resign();
    const s = this.session;
    this.session = undefined;
    await s?.close().catch(() => undefined);
  }

  /** One turn now (turns never overlap), then the next one checkMs later. */
  private check(): void {
    clearTimeout(this.timer);
    this.turn = this.turn
      .then(() => this.once())
      .finally(() => {
        if (this.running) {
          clearTimeout(this.timer);
          this.timer = setTimeout(() => this.check(), this.o.checkMs);
          this.timer.unref();
        }
      });
  }

  private async once(): Promise<void> {
    if (!this.running) return;
    if (!this.open) {
      for (const [name, r] of this.roles) if (!r.leading) this.lead(name, r);
      for (const c of this.counts.values()) c.onCount(1);
      return;
    }
    try {
      if (!this.session) {
        const s = await this.open();
        if (!this.running) return void (await s.close().catch(() => undefined));
        this.session = s;
        this.listening = new Set();
        this.joined = new Set();
        s.onNotification?.((channel, payload) => {
          if (this.session !== s) return;
          for (const r of this.roles.values()) if (r.leading && r.role.channel === channel) r.role.wake?.(payload);
        });
        s.onLost((err) => {
          if (this.session !== s) return;
          this.session = undefined;
          this.o.log.warn({ cause: err.message }, 'leader election: the lock connection was lost; roles led here stop');
          void s.close().catch(() => undefined);
          // In the turns' order: a role's stop is over before the next turn may start it again.
          this.turn = this.turn.then(() => this.resign());
          if (this.running) this.check();
        });
      }
      const session = this.session;
      // The roles' channels, once per connection (before their locks: a role led from this turn on
      // misses no notification sent after it started).
      for (const channel of new Set([...this.roles.values()].flatMap((r) => (r.role.channel ? [r.role.channel] : [])))) {
        if (this.listening.has(channel) || !session.onNotification) continue;
        await session.query(`LISTEN ${quoteIdent(channel)}`);
        this.listening.add(channel);
      }
      // One statement a turn: the locks not held are tried (an empty list still proves the connection).
      const wanted = [...this.roles].filter(([, r]) => !r.leading);
      const res = await session.query<{ k: string; got: boolean }>('SELECT k::text AS k, pg_try_advisory_lock(k) AS got FROM unnest($1::bigint[]) AS k', [wanted.map(([, r]) => r.key.toString())]);
      if (this.session !== session || !this.running) return;
      const got = new Set(res.rows.filter((r) => r.got).map((r) => r.k));
      for (const [name, r] of wanted) if (got.has(r.key.toString())) this.lead(name, r);
      if (this.counts.size) await this.countJoined(session);
      this.streak.succeeded();
    } catch (err) {
      this.streak.failed(err);
      // Whatever was held may be gone with the connection: stop first, then start over on a new one.
      const s = this.session;
      this.session = undefined;
      await this.resign();
      await s?.close().catch(() => undefined);
    }
  }

  /** Takes the shared lock of each count not held on this session yet, then counts every count's holders: one statement a turn after the first. */
  private async countJoined(session: LockSession): Promise<void> {
    for (const [name, c] of this.counts) {
      if (this.joined.has(name)) continue;
      // Shared locks never wait for each other, and no process takes these exclusively.
      const r = await session.query<{ got: boolean }>('SELECT pg_try_advisory_lock_shared($1::bigint) AS got', [c.key.toString()]);
      if (r.rows[0]?.got) this.joined.add(name);
    }
    const res = await session.query<{ k: string; n: number | string }>(COUNT_HOLDERS, [[...this.counts.values()].map((c) => c.key.toString())]);
    if (this.session !== session || !this.running) return;
    const byKey = new Map(res.rows.map((r) => [r.k, Number(r.n)]));
    for (const c of this.counts.values()) c.onCount(byKey.get(c.key.toString()) ?? 0);
  }

  private lead(name: string, r: { role: Role; leading: boolean }): void {
    r.leading = true;
    if (this.open) this.o.log.info({ role: name }, 'leading');
    this.o.onChange?.(name, true);
    r.role.start();
  }

  private async resign(): Promise<void> {
    const stopping: Promise<void>[] = [];
    for (const [name, r] of this.roles) {
      if (!r.leading) continue;
      r.leading = false;
      if (this.open && this.running) this.o.log.info({ role: name }, 'no longer leading');
      this.o.onChange?.(name, false);
      stopping.push(r.role.stop().catch(() => undefined));
    }
    await Promise.all(stopping);
  }
}

/**
 * One role per chain (`chain:<id>`, in `chainIds` order) with every follower of it (the metadata watcher,
 * the indexer's follower), started and stopped together: one process of the fleet follows each chain, as
 * the others would read the same heads and logs from the node only to drop their step at the cursor.
 */
export function chainRoles(chainIds: number[], followers: Array<[chainId: number, follower: Role]>): Array<[string, Role]> {
  const roles: Array<[string, Role]> = [];
  for (const chainId of chainIds) {
    const of = followers.filter(([id]) => id === chainId).map(([, f]) => f);
    if (!of.length) continue;
    roles.push([
      `chain:${chainId}`,
      {
        start: () => {
          for (const f of of) f.start();
        },
        stop: async () => {
          await Promise.all(of.map((f) => f.stop()));
        },
      },
    ]);
  }
  return roles;
}
