// PGlite's SQL, run in a worker thread (pglite.ts starts it): its WebAssembly is CPU the main thread
// then does not spend, so requests, the relayer's dispatcher and the database no longer take turns on
// one thread (issue #36). Plain JavaScript that imports only PGlite, so it loads the same way under
// tsx (`npm start`), from dist/ (the package) and under vitest.
//
// PGlite is one connection. Messages are statements in arrival order; while a transaction is open only
// its own statements run, the others wait here (as they waited on PGlite's mutex in-process). A message
// marked `high` (the dispatcher's, pglite.ts) goes ahead of the normal ones waiting.
import { readFile } from 'node:fs/promises';
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import { pg_trgm } from '@electric-sql/pglite/contrib/pg_trgm';

/** Thrown into PGlite's transaction() to have it roll back: main asked for it, nothing failed. */
const ROLLBACK = Symbol('rollback');

/** Database errors keep the fields callers read (code, detail, constraint…); functions cannot cross. */
function serialise(err) {
  if (!(err instanceof Error)) return { message: String(err) };
  const out = { message: err.message, name: err.name, stack: err.stack };
  for (const [k, v] of Object.entries(err)) if (typeof v !== 'function' && k !== 'queryOptions') out[k] = v;
  return out;
}

const wasm = new URL('./pglite.wasm', import.meta.resolve('@electric-sql/pglite'));
// Compiled once per process: main hands it to the next worker (one per database opened).
const pgliteWasmModule = workerData.wasmModule ?? (await WebAssembly.compile(await readFile(wasm)));
const pg = await PGlite.create(workerData.dataDir, { extensions: { pg_trgm }, pgliteWasmModule }).catch((err) => {
  parentPort.postMessage({ id: 0, error: serialise(err) });
  return undefined;
});

const queue = [];
/** The open transaction: its id, PGlite's tx, and how to end it. */
let open;
let running = false;

const result = (r) => ({ rows: r.rows, rowCount: r.affectedRows ?? r.rows.length });

function next() {
  // A transaction's statements only while it is open; the others only while none is.
  const eligible = (m) => (open ? m.tx === open.id && m.op !== 'begin' : !m.tx || m.op === 'begin');
  let i = queue.findIndex((m) => m.high && eligible(m));
  if (i < 0) i = queue.findIndex(eligible);
  return i < 0 ? undefined : queue.splice(i, 1)[0];
}

async function run(m) {
  if (m.tx && open?.failed && m.op !== 'begin') {
    // Its BEGIN failed (main sends the first statements without waiting for it): every statement
    // fails as BEGIN did, and the COMMIT too; the ROLLBACK has nothing to undo.
    const { failed } = open;
    if (m.op === 'commit' || m.op === 'rollback') open = undefined;
    if (m.op === 'rollback') return undefined;
    throw failed;
  }
  const q = m.tx && open ? open.tx : pg;
  switch (m.op) {
    case 'query':
      return result(await q.query(m.sql, m.params));
    case 'exec':
      await q.exec(m.sql);
      return undefined;
    case 'begin': {
      // PGlite's own transaction(), held open until main ends it: its BEGIN, COMMIT (a COMMIT that
      // rolled back is an error) and ROLLBACK on error, as in-process.
      let started;
      const ready = new Promise((r) => (started = r));
      let end;
      const ended = new Promise((r) => (end = r));
      const done = pg.transaction(async (tx) => {
        open = { id: m.tx, tx, end, done: undefined };
        started();
        const last = await ended;
        if (last.op === 'rollback') throw ROLLBACK;
        return last.sql ? result(await tx.query(last.sql, last.params)) : undefined;
      });
      try {
        await Promise.race([ready, done]);
      } catch (failed) {
        open = { id: m.tx, failed };
        throw failed;
      }
      open.done = done;
      return undefined;
    }
    case 'commit':
    case 'rollback': {
      const { end, done } = open;
      end(m);
      try {
        return await done;
      } catch (err) {
        if (err !== ROLLBACK) throw err;
        return undefined;
      } finally {
        open = undefined;
      }
    }
    case 'close':
      await pg.close();
      return undefined;
  }
}

async function drain() {
  if (running) return;
  running = true;
  for (let m; (m = next()); ) {
    try {
      parentPort.postMessage({ id: m.id, value: await run(m) });
    } catch (err) {
      try {
        parentPort.postMessage({ id: m.id, error: serialise(err) });
      } catch {
        // A field that cannot be cloned: the message still answers the call, the queue goes on.
        parentPort.postMessage({ id: m.id, error: { message: String(err?.message ?? err), code: err?.code } });
      }
    }
    // A turn of the event loop lets the messages that arrived meanwhile in: a `high` one goes next.
    await new Promise(setImmediate);
  }
  running = false;
}

if (pg) {
  parentPort.on('message', (m) => {
    queue.push(m);
    void drain();
  });
  parentPort.postMessage({ id: 0, wasmModule: workerData.wasmModule ? undefined : pgliteWasmModule });
}
