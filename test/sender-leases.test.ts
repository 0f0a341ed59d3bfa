// Sender leases on the real database: one holder per sender, a fair share per live process, a dead
// local process's senders taken over at once; and claims on queued meta-transactions, so processes
// reading one queue do not simulate the same work.

import { spawn } from 'node:child_process';
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Address } from 'viem';
import { claimSenders, fairShare, newOwner, releaseSenders, setSenderStopped } from '../src/relayer/engine/sender-pool.ts';
import { queueRow } from './support/meta-rows.ts';
import { metaTxnRepo } from '../src/relayer/store.ts';
import { createTestDb, type TestDb } from './support/db.ts';

const SENDERS = Array.from({ length: 5 }, (_, i) => `0x${String(i + 1).padStart(40, '0')}` as Address);
const addrs = (rows: { address: string }[]) => rows.map((r) => r.address).sort();

let t: TestDb;
let chainId = 900;
beforeAll(async () => {
  t = await createTestDb();
});
afterAll(() => t?.drop());

describe('fairShare', () => {
  it('divides the senders over the live processes, rounding up, and gives a lone process all', () => {
    expect(fairShare(5, 1)).toBe(5);
    expect(fairShare(5, 2)).toBe(3);
    expect(fairShare(4, 2)).toBe(2);
    expect(fairShare(2, 3)).toBe(1);
    expect(fairShare(3, 0)).toBe(3);
  });
});

describe('claimSenders', () => {
  it('a lone process holds every sender and renews the same ones', async () => {
    const c = ++chainId;
    const a = newOwner();
    expect(addrs(await claimSenders(t.db, c, a, SENDERS))).toEqual(SENDERS);
    expect(addrs(await claimSenders(t.db, c, a, SENDERS))).toEqual(SENDERS);
  });

  it('a process that joins gets its share on its next pass; the first hands the rest back; no sender has two holders', async () => {
    const c = ++chainId;
    const a = newOwner();
    const b = newOwner();
    expect(await claimSenders(t.db, c, a, SENDERS)).toHaveLength(5);
    // b is seen as alive from its first pass, but a still holds everything.
    expect(await claimSenders(t.db, c, b, SENDERS)).toHaveLength(0);
    const heldA = await claimSenders(t.db, c, a, SENDERS);
    expect(heldA).toHaveLength(3);
    const heldB = await claimSenders(t.db, c, b, SENDERS);
    expect(heldB).toHaveLength(2);
    expect(addrs([...heldA, ...heldB])).toEqual(SENDERS);
    // Steady: further passes keep the same split.
    expect(addrs(await claimSenders(t.db, c, a, SENDERS))).toEqual(addrs(heldA));
    expect(addrs(await claimSenders(t.db, c, b, SENDERS))).toEqual(addrs(heldB));
    const owners = await t.db.query<{ owner: string; n: number }>('SELECT owner, count(*)::int AS n FROM relay_senders WHERE chain_id = $1 GROUP BY owner', [c]);
    expect(Object.fromEntries(owners.rows.map((r) => [r.owner, r.n]))).toEqual({ [a]: 3, [b]: 2 });

    // b leaves: a takes everything back on its next pass.
    await releaseSenders(t.db, c, b);
    expect(await claimSenders(t.db, c, a, SENDERS)).toHaveLength(5);
  });

  it('a process that died on this host counts as gone at once: its senders are taken over without waiting for the lease', async () => {
    const c = ++chainId;
    const child = spawn(process.execPath, ['-e', '0']);
    const pid = child.pid!;
    await new Promise((r) => child.on('exit', r));
    const dead = `${hostname()}:${pid}:deadbeef`;
    expect(await claimSenders(t.db, c, dead, SENDERS)).toHaveLength(5);
    const live = newOwner();
    expect(addrs(await claimSenders(t.db, c, live, SENDERS))).toEqual(SENDERS);
    const instances = await t.db.query<{ owner: string }>('SELECT owner FROM relay_instances WHERE chain_id = $1', [c]);
    expect(instances.rows.map((r) => r.owner)).toEqual([live]);
  });

  it('a process on another host keeps its senders until its lease ends', async () => {
    const c = ++chainId;
    const remote = `elsewhere.example:1:cafe`;
    expect(await claimSenders(t.db, c, remote, SENDERS)).toHaveLength(5);
    const local = newOwner();
    expect(await claimSenders(t.db, c, local, SENDERS)).toHaveLength(0);
    // Its lease and heartbeat run out (it stopped renewing them): everything comes over.
    await t.db.query(`UPDATE relay_senders SET lease_until = now() - interval '1 second' WHERE chain_id = $1`, [c]);
    await t.db.query(`UPDATE relay_instances SET seen_until = now() - interval '1 second' WHERE chain_id = $1 AND owner = $2`, [c, remote]);
    expect(await claimSenders(t.db, c, local, SENDERS)).toHaveLength(5);
  });

  it('says which held senders an operator stopped', async () => {
    const c = ++chainId;
    const a = newOwner();
    await setSenderStopped(t.db, c, SENDERS[1], true);
    const rows = await claimSenders(t.db, c, a, SENDERS);
    expect(rows.filter((r) => r.stopped).map((r) => r.address)).toEqual([SENDERS[1]]);
    await setSenderStopped(t.db, c, SENDERS[1], false);
    expect((await claimSenders(t.db, c, a, SENDERS)).some((r) => r.stopped)).toBe(false);
  });
});

describe('claims on queued meta-transactions', () => {
  async function queue(chainId: number, n: number) {
    const repo = metaTxnRepo(t.db);
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const id = `${chainId.toString(16).padStart(8, '0')}${String(i).padStart(56, '0')}`;
      const wallet = `0x${String(i + 1).padStart(40, 'a')}` as Address;
      await queueRow(repo, chainId, { id, wallet, nonce: 0n });
      ids.push(id);
    }
    return { repo, ids };
  }

  it('what one process claimed the other neither reads nor claims until the claim runs out; the claimer still reads it', async () => {
    const c = ++chainId;
    const { repo, ids } = await queue(c, 4);
    const [a, b] = [newOwner(), newOwner()];
    expect([...(await repo.claim(c, ids.slice(0, 2), a, 15))].sort()).toEqual(ids.slice(0, 2));
    expect((await repo.queued(c, 10, b)).map((r) => r.id)).toEqual(ids.slice(2));
    expect((await repo.queued(c, 10, a)).map((r) => r.id)).toEqual(ids);
    expect([...(await repo.claim(c, ids, b, 15))].sort()).toEqual(ids.slice(2));
    // a renews its own claim; b's are not a's to take.
    expect([...(await repo.claim(c, ids, a, 15))].sort()).toEqual(ids.slice(0, 2));
    await t.db.query(`UPDATE meta_txns SET claimed_until = now() - interval '1 second' WHERE chain_id = $1 AND claimed_by = $2`, [c, a]);
    expect((await repo.queued(c, 10, b)).map((r) => r.id)).toEqual(ids);
    expect([...(await repo.claim(c, ids.slice(0, 2), b, 15))].sort()).toEqual(ids.slice(0, 2));
  });

  it('only queued meta-transactions can be claimed', async () => {
    const c = ++chainId;
    const { repo, ids } = await queue(c, 2);
    await repo.setStatus(t.db, c, ids[0], { status: 'SENT' });
    expect([...(await repo.claim(c, ids, newOwner(), 15))]).toEqual([ids[1]]);
    // A status change guarded by the status it expects does nothing once the status moved on.
    expect(await repo.setStatus(t.db, c, ids[0], { status: 'DROPPED' }, 'QUEUED')).toBe(false);
    expect((await repo.find(c, ids[0]))!.status).toBe('SENT');
    expect(await repo.setStatus(t.db, c, ids[1], { status: 'DROPPED' }, 'QUEUED')).toBe(true);
  });
});
