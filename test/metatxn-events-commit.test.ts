// A meta-transaction's status event is written with its transaction's COMMIT (events/metatxn-events.ts,
// Tx.atCommit), not awaited inside it: it must still commit with the status it reports or not at all,
// come before a later statement sent with the COMMIT (the sponsorship charge) fails it, and wake the
// readers (the bell) only once it is committed and they can see it.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metaTxnStatusEvents } from '../src/events/metatxn-events.ts';
import { EventBell } from '../src/events/outbox.ts';
import { metaTxnRepo, type MetaTxnRepo } from '../src/relayer/store.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { queueRow } from './support/meta-rows.ts';

const CHAIN = 31337;
let t: TestDb;
let repo: MetaTxnRepo;
const bell = new EventBell();
let rings = 0;
/** What each ring said of webhook deliveries, in order. */
let said: boolean[] = [];

beforeAll(async () => {
  t = await createTestDb();
  repo = metaTxnRepo(t.db, { onStatus: metaTxnStatusEvents(() => repo, bell) });
  bell.on((deliveries) => {
    rings++;
    said.push(deliveries);
  });
});
afterAll(async () => {
  await t?.drop();
});

const eventsOf = async (id: string) =>
  (await t.db.query<{ status: string }>(`SELECT payload->>'status' AS status FROM events WHERE subject = $1`, [`metatxn:${CHAIN}:${id}`])).rows.map((r) => r.status);

/** A meta-transaction of one bundle queued as intake writes it; `beforeCommit` runs on its transaction. */
const send = (id: string, beforeCommit?: Parameters<MetaTxnRepo['insert']>[2]) => queueRow(repo, CHAIN, { id, wallet: `0x${id.slice(0, 40)}`, nonce: 0n }, undefined, beforeCommit);

describe('the QUEUED event of an intake', () => {
  it('commits with the meta-transaction, and the bell rings once it has', async () => {
    const id = 'a1'.repeat(32);
    rings = 0;
    let ringsAtCommit = -1;
    const { created } = await send(id, async (tx) => {
      // Registered after the event (as the charge is): runs after it, in the COMMIT's message.
      void tx.atCommit('SELECT 1').then(() => {
        ringsAtCommit = rings;
      });
    });
    expect(created).toBe(true);
    expect(await eventsOf(id)).toEqual(['QUEUED']);
    // Rung after the commit, not while the transaction could still roll back.
    await new Promise((r) => setImmediate(r));
    expect(ringsAtCommit).toBe(0);
    expect(rings).toBe(1);
  });

  it('rolls back with a charge that fails at the COMMIT: no meta-transaction, no event, no ring', async () => {
    const id = 'b2'.repeat(32);
    rings = 0;
    await expect(
      send(id, async (tx) => {
        void tx.atCommit(`SELECT metarelay_over_budget($1, 'totalBudget')`, [7]);
      }),
    ).rejects.toThrow('metarelay_over_budget:7:totalBudget');
    expect(await repo.find(CHAIN, id)).toBeUndefined();
    expect(await eventsOf(id)).toEqual([]);
    await new Promise((r) => setTimeout(r, 20));
    expect(rings).toBe(0);
  });
});

describe('the bell says whether the events made webhook deliveries', () => {
  it('no endpoint subscribed: rung for readers, without waking the delivery worker; one subscribed: with', async () => {
    const project = Number((await t.db.query<{ id: string }>(`INSERT INTO projects (name) VALUES ('bell-${Date.now()}') RETURNING id`)).rows[0]!.id);
    const deliveries = async () => Number((await t.db.query<{ n: string }>('SELECT count(*)::text AS n FROM webhook_deliveries')).rows[0]!.n);
    const before = await deliveries();
    said = [];
    await queueRow(repo, CHAIN, { id: 'c3'.repeat(32), wallet: `0x${'c3'.repeat(20)}`, nonce: 0n, projectId: project });
    await new Promise((r) => setImmediate(r));
    expect(said).toEqual([false]);
    expect(await deliveries()).toBe(before);

    await t.db.query(`INSERT INTO webhooks (project_id, url, events, secret) VALUES ($1, 'https://example.com/hook', '{metatxn.status}', 's')`, [project]);
    await queueRow(repo, CHAIN, { id: 'd4'.repeat(32), wallet: `0x${'d4'.repeat(20)}`, nonce: 0n, projectId: project });
    await new Promise((r) => setImmediate(r));
    expect(said).toEqual([false, true]);
    expect(await deliveries()).toBe(before + 1);
  });
});
