// Claims that may meet a frozen holder (a process stopped inside a transaction: SIGSTOP, a long GC, a
// VM paused) skip what it holds instead of waiting for it (issue #53): the dispatcher's lock of the
// meta-transactions it signs, the usage roll-up's turn, the refresh workers' turn to claim, a process's
// claim of its senders (beside a row another process's sweep or signing is writing). Before, each
// waited until lock_timeout and failed, pass after pass, in every process, until the holder's session
// was ended. PostgreSQL (a second pool is the frozen holder); judged by what each claim returned.

import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { taskStore } from '../src/metadata/refresh/task-store.ts';
import { claimSenders } from '../src/relayer/engine/ledger.ts';
import { metaTxnRepo } from '../src/relayer/store.ts';
import { metaTxnUsage } from '../src/relayer/usage.ts';
import type { Db } from '../src/store/db.ts';
import { openPostgres } from '../src/store/postgres.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { queueRow } from './support/meta-rows.ts';

const CHAIN = 31337;
let t: TestDb;
let holder: Db;

beforeAll(async () => {
  t = await createTestDb();
  holder = await openPostgres(t.location, { max: 1, maintain: false });
});
afterAll(async () => {
  await holder?.close();
  await t?.drop();
});

/** A transaction of the holder's that runs `lock` and stays open (frozen) until the returned release is called. */
async function frozen(lock: string, params: unknown[] = []): Promise<() => Promise<void>> {
  let release!: () => void;
  const released = new Promise<void>((r) => {
    release = r;
  });
  let locked!: () => void;
  const isLocked = new Promise<void>((r) => {
    locked = r;
  });
  const tx = holder.transaction(async (q) => {
    await q.query(lock, params);
    locked();
    await released;
  });
  await isLocked;
  return async () => {
    release();
    await tx;
  };
}

describe('claims skip what a frozen transaction holds (PostgreSQL)', () => {
  it("the dispatcher's lock of queued meta-transactions returns those it could take, not waiting on the held one", async () => {
    const repo = metaTxnRepo(t.db);
    for (const [i, id] of ['aa01', 'aa02', 'aa03'].entries()) await queueRow(repo, CHAIN, { id, wallet: `0x${(0xc0 + i).toString(16).padStart(40, '0')}` as Address, nonce: 0n });
    const release = await frozen(`SELECT id FROM meta_txns WHERE chain_id = $1 AND id = 'aa02' FOR UPDATE`, [CHAIN]);
    try {
      const got = await t.db.transaction((tx) => repo.lockQueued(tx, CHAIN, ['aa01', 'aa02', 'aa03']));
      expect([...got].sort()).toEqual(['aa01', 'aa03']);
    } finally {
      await release();
    }
    // Once it is free again, it is taken.
    expect([...(await t.db.transaction((tx) => repo.lockQueued(tx, CHAIN, ['aa02'])))]).toEqual(['aa02']);
  });

  it('the usage roll-up leaves its turn to the pass that holds it, and takes it once that is over', async () => {
    const usage = metaTxnUsage(t.db);
    const before = await t.db.query<{ w: string }>(`SELECT watermark::text AS w FROM usage_rollup_marks WHERE name = 'meta_txns'`);
    const release = await frozen(`SELECT 1 FROM usage_rollup_marks WHERE name = 'meta_txns' FOR UPDATE`);
    try {
      expect(await usage.rollUp()).toBe(0);
      expect((await t.db.query<{ w: string }>(`SELECT watermark::text AS w FROM usage_rollup_marks WHERE name = 'meta_txns'`)).rows).toEqual(before.rows);
    } finally {
      await release();
    }
    await usage.rollUp();
    expect((await t.db.query<{ w: string }>(`SELECT watermark::text AS w FROM usage_rollup_marks WHERE name = 'meta_txns'`)).rows).not.toEqual(before.rows);
  });

  it("a process's claim of its senders (its heartbeat) takes the free one while another process is writing the other's row, not waiting on it", async () => {
    const [a, b] = ['0x00000000000000000000000000000000000000a1', '0x00000000000000000000000000000000000000b2'] as Address[];
    // Another process has claimed both (their rows exist) and is writing one of them, as a sweep or a signing does.
    expect((await claimSenders(t.db, CHAIN, 'other-host:1', [a, b])).map((r) => r.address).sort()).toEqual([a, b]);
    const release = await frozen('UPDATE relay_senders SET updated_at = now() WHERE chain_id = $1 AND address = $2', [CHAIN, a]);
    try {
      // Its leases are still live: this process's share (one of two) comes once one of them runs out. Before,
      // the claim's insert of the sender rows waited on the one being written until lock_timeout failed it.
      expect(await claimSenders(t.db, CHAIN, 'this-host:2', [a, b])).toEqual([]);
      await t.db.query(`UPDATE relay_senders SET lease_until = now() - interval '1 second' WHERE chain_id = $1 AND address = $2`, [CHAIN, b]);
      expect((await claimSenders(t.db, CHAIN, 'this-host:2', [a, b])).map((r) => r.address)).toEqual([b]);
    } finally {
      await release();
    }
  });

  it("a refresh worker's claim claims nothing while another claim's turn is held, rather than wait for it", async () => {
    const tasks = taskStore(t.db);
    const release = await frozen('SELECT pg_advisory_xact_lock($1)', [0x6d72636c]);
    try {
      expect(await tasks.claim('worker-b', 10, 60)).toEqual([]);
    } finally {
      await release();
    }
  });
});
