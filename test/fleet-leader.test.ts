// One follower per chain across the fleet (store/leadership.ts): three `metarelay worker` processes on one
// PostgreSQL database, each reaching the node through its own JSON-RPC proxy, so the node calls of each
// process are counted where they arrive. One process follows the chain (the indexer cursor moves in the
// database) and the other two send the node nothing; the leader killed with SIGKILL, another takes over
// and the cursor keeps moving, followed by that one process alone; the lock connections ended by the
// server, no process exits and again one follows. PostgreSQL only: PGlite is one
// process per database.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAnvil, type AnvilHandle } from '../src/devchain/anvil.ts';
import { startCli, type LongRunning } from './support/cli.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { startRpcProxy, type RpcProxy } from './support/rpc-proxy.ts';

let anvil: AnvilHandle;
let testDb: TestDb;
let proxies: RpcProxy[] = [];
let procs: LongRunning[] = [];

const LEADING = /"role":"chain:31337","msg":"leading"/g;
const leads = (p: LongRunning) => (p.output().match(LEADING) ?? []).length;

async function cursor(): Promise<number> {
  const r = await testDb.db.query<{ b: string }>('SELECT block_number::text AS b FROM indexer_cursors WHERE chain_id = $1', [anvil.chainId]);
  return r.rows[0] ? Number(r.rows[0].b) : -1;
}

async function until<T>(what: string, fn: () => Promise<T> | T, ok: (v: T) => boolean, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (last: ${JSON.stringify(v)})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The node calls each proxy saw while the indexer cursor moved `blocks` blocks on. */
async function callsOver(blocks: number): Promise<number[]> {
  // From a cursor the leader has written (its first step writes one without a node call of its own).
  await until('a cursor', cursor, (b) => b >= 0);
  for (const p of proxies) p.calls.length = 0;
  const from = await cursor();
  await until(`the cursor past ${from + blocks}`, cursor, (b) => b >= from + blocks);
  return proxies.map((p) => p.calls.length);
}

beforeAll(async () => {
  [anvil, testDb] = await Promise.all([startAnvil({ blockTime: 1 }), createTestDb()]);
  proxies = await Promise.all([0, 1, 2].map(() => startRpcProxy(anvil.rpcUrl)));
  const dir = mkdtempSync(join(tmpdir(), 'metarelay-fleet-'));
  procs = proxies.map((proxy, i) => {
    const file = join(dir, `worker-${i}.json`);
    writeFileSync(
      file,
      JSON.stringify({
        database: testDb.location,
        allowPrivateNetworks: true,
        logLevel: 'info',
        // Takeover within about a check: short here, so the test waits little.
        postgres: { leaderCheckMs: 250, leaderSessionTimeoutMs: 5_000 },
        media: { enabled: false },
        chains: [{ chainId: anvil.chainId, name: 'anvil', rpcUrls: [proxy.url], watch: true, indexer: { scope: 'all', confirmations: 1 } }],
      }),
    );
    return startCli(['worker', '--config', file]);
  });
  await Promise.all(procs.map((p) => p.waitFor(/refresh worker started/)));
}, 120_000);

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  await Promise.all(proxies.map((p) => p.close()));
  await testDb?.drop();
  await anvil?.stop();
});

describe('one follower per chain across three worker processes (PostgreSQL)', () => {
  it('only the leader calls the node while the chain is followed; killed with SIGKILL, another takes over and follows alone', async () => {
    const before = await callsOver(3);
    // Judged at the node: one process read the blocks the cursor moved over, the others nothing.
    expect(
      before.filter((n) => n > 0),
      JSON.stringify(before),
    ).toHaveLength(1);
    const leader = before.findIndex((n) => n > 0);
    expect(leads(procs[leader]!)).toBe(1);

    procs[leader]!.child.kill('SIGKILL');
    // The cursor keeps moving (another process took over), then one process alone follows.
    await callsOver(1);
    const after = await callsOver(3);
    expect(after[leader]).toBe(0);
    expect(
      after.filter((n) => n > 0),
      JSON.stringify(after),
    ).toHaveLength(1);
    const second = after.findIndex((n) => n > 0);
    expect(leads(procs[second]!)).toBe(1);

    // Every lock connection ended by the server (a failover, pg_terminate_backend): no process exits, the
    // leader stops at once, and after the race for the lock again one process alone follows.
    const ended = await testDb.db.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%pg_try_advisory_lock%' AND pid <> pg_backend_pid()`,
    );
    expect(ended.rows.length).toBe(2);
    await until(
      'the leader to notice',
      () => procs[second]!.output(),
      (o) => /"role":"chain:31337","msg":"no longer leading"/.test(o),
    );
    await callsOver(1);
    const again = await callsOver(3);
    expect(
      again.filter((n) => n > 0),
      JSON.stringify(again),
    ).toHaveLength(1);
    expect(procs.filter((_, i) => i !== leader).map((p) => p.child.exitCode)).toEqual([null, null]);
  }, 120_000);
});
