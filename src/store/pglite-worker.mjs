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
import { PGlite, parse, protocol } from '@electric-sql/pglite';
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
// shared_buffers 32 MB, not PostgreSQL's 128 MB: PGlite zeroes its buffers in the WebAssembly memory at
// every open, 128 MB cost ~180 ms of CPU more per open (770 -> 590 ms on the 2-core VM, 7 Dec) and ~110 MB
// of resident memory per process (262 -> 153 MB), for every `metarelay keys …` and every `npm start`. An
// embedded database's working set fits in 32 MB many times; a page outside it is read from the folder,
// which the operating system's page cache holds.
const startParams = [...PGlite.defaultStartParams, '-c', 'shared_buffers=32MB'];
const pg = await PGlite.create(workerData.dataDir, { extensions: { pg_trgm }, pgliteWasmModule, startParams }).catch((err) => {
  parentPort.postMessage({ id: 0, error: serialise(err) });
  return undefined;
});

/** The marker of statements run on hot paths (store/db.ts `prepared()`): named here, parsed once. */
const PREPARED_MARK = '/*prepared*/ ';
/** Statements named at most, as on PostgreSQL. */
const MAX_PREPARED = 500;
/** Named statements by text: name, parameter types, and the row description of their results. */
const named = new Map();
/** Names are never reused: one forgotten inside a transaction still exists in the session. */
let nameSeq = 0;
const wire = protocol.serialize;

function concat(parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** A named statement's plan no longer fits (a migration changed a table under it), or the statement is gone. */
const isStaleName = (err) => (err?.code === '0A000' && /cached plan must not change result type/.test(String(err.message))) || err?.code === '26000';

/**
 * Session settings every statement runs under, set again after a DISCARD ALL resets them. Named
 * statements keep the one plan made for them without values (generic), as PostgreSQL's default may
 * after five runs (postgres.ts). Planning was most of PGlite's time: the hot named statements of a dev
 * burst took 15.8 ms per round planned for their values against 4.5 ms generic (issue #36;
 * docs/performance-log.md, "Named statements and one generic plan per statement on PGlite"). A kept
 * plan is only as good as the statistics it was made with, which maintain (below) keeps current.
 * Unnamed statements are planned for their values, as always.
 */
const SESSION = 'SET plan_cache_mode = force_generic_plan';
if (pg) await pg.exec(SESSION);

/**
 * A statement marked `prepared()`, run as a named statement: parsed and described once (one message),
 * then each run is one message to PGlite (bind, execute, sync) instead of query()'s six, with no parse
 * and no analysis. PGlite's query() spent more on that than on most statements' execution (a look-up
 * by key 0.28 ms against 0.09 ms named; bench/relayer-dev-burst.ts, issue #36). Values are serialised
 * by the types PostgreSQL described, as query() does.
 */
async function runNamed(sql, params, inTx) {
  let st = named.get(sql);
  if (!st) {
    const name = `mr_${++nameSeq}`;
    const described = await pg.execProtocol(concat([wire.parse({ name, text: sql }), wire.describe({ type: 'S', name }), wire.sync()]), { syncToFs: false });
    const rowDescription = described.messages.find((m) => m.name === 'rowDescription');
    st = { name, types: parse.parseDescribeStatementResults(described.messages), rowDescription };
    named.set(sql, st);
  }
  const values = params.map((v, i) => {
    if (v === null || v === undefined) return null;
    const serialise = pg.serializers[st.types[i]];
    return serialise ? serialise(v) : v.toString();
  });
  const r = await pg.execProtocol(concat([wire.bind({ statement: st.name, values }), wire.execute({}), wire.sync()]), { syncToFs: !inTx });
  const messages = st.rowDescription ? [st.rowDescription, ...r.messages] : r.messages;
  return result(parse.parseResults(messages, pg.parsers)[0]);
}

/** After a stale name: every statement is named again, fresh. */
async function forgetNamed() {
  named.clear();
  await pg.exec('DEALLOCATE ALL').catch(() => undefined);
}

/**
 * An exec that drops the session's named statements (DISCARD ALL, DEALLOCATE: a reset of a reused
 * database, test/support/db.ts) forgets them here too, and sets the session's settings again (an exec
 * of DEALLOCATE inside a transaction once hung here).
 */
async function afterExec(q, sql) {
  if (!/\b(DISCARD|DEALLOCATE)\b/i.test(sql)) return;
  named.clear();
  // On the same connection object: inside a transaction, PGlite's own exec would wait for it to end.
  await q.exec(SESSION);
}

async function runQuery(q, m, inTx) {
  if (!m.params?.length || !m.sql.startsWith(PREPARED_MARK) || (!named.has(m.sql) && named.size >= MAX_PREPARED)) return result(await q.query(m.sql, m.params));
  try {
    return await runNamed(m.sql, m.params, inTx);
  } catch (err) {
    if (!isStaleName(err)) throw err;
    // Outside a transaction the statement is run again, freshly; inside, the error aborted it.
    if (inTx) {
      named.clear();
      throw err;
    }
    await forgetNamed();
    return runNamed(m.sql, m.params, false);
  }
}

/**
 * What autovacuum does, done here as store/maintenance.ts says (main hands over its rules): PGlite has no
 * autovacuum, so nothing analysed or vacuumed its tables. Between transactions, at most every `everyMs`.
 */
const { everyMs: MAINTAIN_EVERY_MS, againMs: MAINTAIN_AGAIN_MS, busyMs: MAINTAIN_BUSY_MS, dueSql: MAINTENANCE_DUE, targetSql: MAINTENANCE_TARGET } = workerData.maintenance;
let maintainedAt = Date.now();
/** The last turn that found work: for busyMs after it, turns come every againMs (a growing table's plans follow its size). */
let workedAt = Number.NEGATIVE_INFINITY;
let closed = false;

async function maintain() {
  const now = Date.now();
  if (open || closed || now - maintainedAt < (now - workedAt < MAINTAIN_BUSY_MS ? MAINTAIN_AGAIN_MS : MAINTAIN_EVERY_MS)) return;
  maintainedAt = now;
  try {
    // PGlite's counters of changes reach pg_stat_user_tables only when flushed (between statements).
    await pg.query('SELECT pg_stat_force_next_flush()');
    // Every table due at once: the tables a burst changed together are done before its next statements run.
    const { rows } = await pg.query(MAINTENANCE_DUE);
    if (!rows.length) return;
    workedAt = Date.now();
    await pg.exec(MAINTENANCE_TARGET);
    try {
      for (const { sql } of rows) await pg.exec(sql);
    } finally {
      await pg.exec('RESET default_statistics_target');
    }
    report({ ran: rows.map((r) => r.sql), ms: Date.now() - workedAt });
  } catch (err) {
    // What failed is due again at the next turn; main tells the service's log and metrics.
    workedAt = Date.now();
    report({ failed: String(err?.message ?? err) });
  }
}

/** A turn's report to main (id -1: nobody asked for it; pglite.ts). */
function report(maintenance) {
  parentPort.postMessage({ id: -1, maintenance });
}

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
      return runQuery(q, m, Boolean(m.tx && open));
    case 'exec':
      await q.exec(m.sql);
      await afterExec(q, m.sql);
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
        const closing = await ended;
        if (closing.op === 'rollback') throw ROLLBACK;
        // The atCommit statements, in order; the first error rolls the transaction back. Named when
        // marked so, like the transaction's other statements: the sponsorship charge (six CTEs) sent
        // with the COMMIT was parsed and planned at every intake here, 2.7 ms of this thread per
        // sponsored SendMetaTxn on `npm start` against 0.9 ms named (30 Nov).
        const results = [];
        // One whose `onlyIf` the answer before it does not meet is skipped (db-core.ts runsAfter).
        for (const last of closing.last ?? []) {
          const before = results.at(-1)?.rows[0]?.[last.onlyIf];
          results.push(!last.onlyIf || (before != null && Number(before) !== 0) ? await runQuery(tx, last, true) : { rows: [], rowCount: 0 });
        }
        return results;
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
      closed = true;
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
    await maintain();
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
