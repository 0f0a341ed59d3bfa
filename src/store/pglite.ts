import { mkdirSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { commitSlot, type AtCommit, type Db, type QueryResult, type Queryable } from './db-core.ts';
import { lockFolder, type FolderLock } from './folder-lock.ts';
import { MAINTENANCE_AGAIN_MS, MAINTENANCE_BUSY_MS, MAINTENANCE_DUE_SQL, MAINTENANCE_EVERY_MS, MAINTENANCE_TARGET_SQL, type MaintenanceListener, type MaintenanceReport } from './maintenance.ts';

/** pglite.wasm as the first worker compiled it: the next ones (one per database opened) skip that. */
let wasmModule: WebAssembly.Module | undefined;

interface Message {
  op: 'query' | 'exec' | 'begin' | 'commit' | 'rollback' | 'close';
  sql?: string;
  params?: unknown[];
  /** The transaction a statement belongs to. */
  tx?: number;
  /** Goes ahead of the normal statements waiting (pglite-worker.mjs). */
  high?: boolean;
  /** A COMMIT's: the transaction's atCommit statements, run in order before it. */
  last?: AtCommit[];
}

type Answer = { id: number; value?: unknown; error?: Record<string, unknown>; wasmModule?: WebAssembly.Module; maintenance?: MaintenanceReport };

/** The worker's report of a maintenance turn comes unasked, under this id. */
const MAINTENANCE_REPORT = -1;

/** An error as PGlite threw it in the worker, with the same fields (code, detail, constraint…). */
const revive = (e: Record<string, unknown>) => Object.assign(new Error(String(e.message)), e);

/** The worker running PGlite (pglite-worker.mjs), and the calls to it: one message, one answer. */
async function startWorker(dataDir: string | undefined) {
  const worker = new Worker(new URL('./pglite-worker.mjs', import.meta.url), {
    // The rules of maintenance.ts, run by the worker between transactions (PGlite is one connection).
    workerData: {
      dataDir,
      wasmModule,
      maintenance: { everyMs: MAINTENANCE_EVERY_MS, againMs: MAINTENANCE_AGAIN_MS, busyMs: MAINTENANCE_BUSY_MS, dueSql: MAINTENANCE_DUE_SQL, targetSql: MAINTENANCE_TARGET_SQL },
    },
    // Plain Node: no loader of the parent's (tsx, vitest) is needed for a .mjs importing only PGlite.
    execArgv: [],
  });
  const calls = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  let seq = 0;
  let gone: Error | undefined;
  const fail = (err: Error) => {
    gone ??= err;
    for (const c of calls.values()) c.reject(gone);
    calls.clear();
  };
  worker.on('error', fail);
  worker.on('exit', () => fail(new Error('PGlite is closed')));
  let maintenanceListener: MaintenanceListener | undefined;
  worker.on('message', (a: Answer) => {
    if (a.id === MAINTENANCE_REPORT) return void maintenanceListener?.(a.maintenance!);
    const c = calls.get(a.id);
    if (!c) return;
    calls.delete(a.id);
    // An idle worker must not keep the process alive, as an idle in-process PGlite did not.
    if (calls.size === 0) worker.unref();
    if (a.error) c.reject(revive(a.error));
    else c.resolve(a.id === 0 ? a.wasmModule : a.value);
  });
  const call = <T>(m: Message, id = ++seq): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      if (gone) return reject(gone);
      calls.set(id, { resolve: resolve as (v: unknown) => void, reject });
      worker.ref();
      if (id) worker.postMessage({ ...m, id });
    });
  try {
    // The worker's first answer (id 0): PGlite is open, or why not.
    const compiled = await call<WebAssembly.Module | undefined>({ op: 'exec' }, 0);
    wasmModule ??= compiled;
  } catch (err) {
    await worker.terminate();
    throw err;
  }
  return {
    call,
    /** Throws what the connection was lost to (close, a crash), as the next call would. */
    check: () => {
      if (gone) throw gone;
    },
    terminate: () => worker.terminate(),
    onMaintenance: (listener: MaintenanceListener) => {
      maintenanceListener = listener;
    },
  };
}

/**
 * PGlite is one connection, run in a worker thread (pglite-worker.mjs): statements run in order, and a
 * transaction holds it throughout. A folder is one process's: it is locked while open (folder-lock.ts).
 */
export async function openPglite(location: string): Promise<Db> {
  const inMemory = location === 'memory://' || location === '';
  let lock: FolderLock | undefined;
  if (!inMemory) {
    mkdirSync(location, { recursive: true });
    // Before PGlite reads a page: a folder another process holds is refused, not opened beside it.
    lock = lockFolder(location);
  }
  let pg: Awaited<ReturnType<typeof startWorker>>;
  try {
    pg = await startWorker(inMemory ? undefined : location);
  } catch (err) {
    lock?.release();
    throw err;
  }
  let txs = 0;
  let closed = false;
  /** The Db, its statements marked `high` or not. */
  const handle = (high: boolean): Db => {
    const queryable = (tx?: number, isOpen = () => true): Queryable => ({
      async exec(sql: string) {
        if (!isOpen()) throw new Error('Transaction is closed');
        await pg.call({ op: 'exec', sql, tx, high });
      },
      async query<T>(sql: string, params?: unknown[]): Promise<QueryResult<T>> {
        if (!isOpen()) throw new Error('Transaction is closed');
        return pg.call<QueryResult<T>>({ op: 'query', sql, params, tx, high });
      },
    });
    const base = queryable();
    return {
      kind: 'pglite',
      query: base.query,
      exec: base.exec,
      async transaction(fn) {
        // A closed connection runs no fn, as PGlite's transaction() did not.
        pg.check();
        const tx = ++txs;
        // Not waited for: the first statement follows it at once, one round trip less while the
        // transaction holds the connection. A failed BEGIN fails the statements and the COMMIT instead.
        pg.call({ op: 'begin', tx, high }).catch(() => undefined);
        const slot = commitSlot();
        let ended = false;
        try {
          const value = await fn({ ...queryable(tx, () => !ended), atCommit: slot.atCommit });
          ended = true;
          // The atCommit statements go with the COMMIT: one message, so nothing runs between them.
          const results = await pg.call<Array<QueryResult<unknown>>>({ op: 'commit', tx, last: slot.statements });
          slot.settle(results);
          return value;
        } catch (err) {
          if (!ended) {
            ended = true;
            await pg.call({ op: 'rollback', tx });
          }
          slot.settle(undefined);
          throw err;
        }
      },
      // The dispatcher's handle: the same connection, its statements ahead of the requests' waiting
      // ones, as PostgreSQL gives it connections of its own (services.ts). Closed with this one.
      dedicated: high ? undefined : async () => handle(true),
      onMaintenance: high ? undefined : pg.onMaintenance,
      close: high ? async () => undefined : close,
    };
  };
  async function close() {
    if (closed) return;
    closed = true;
    try {
      await pg.call({ op: 'close' });
    } finally {
      await pg.terminate();
      lock?.release();
    }
  }
  return handle(false);
}
