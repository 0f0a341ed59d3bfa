// The console's long lists (activity, ledger, refresh tasks, access keys) a page at a time by cursor,
// filtered and counted, against a real relayer on anvil and a real database. The rows are written as
// the service writes them (its API) or, for meta-transactions and tasks, inserted into their tables as
// fixtures: 131 relayed meta-transactions would take minutes and test the relayer, not the paging.
import { describe, expect, it } from 'vitest';
import type { RelayerEnv } from '../support/relayer-env.ts';
import { bearer, type Call } from './support.ts';
import { consoleRelayerEnv } from '../support/console-env.ts';

let env: RelayerEnv;
let call: Call;
const admin = (method: string, body: unknown = {}) => call(method, body, bearer(env.adminToken));
const WALLET_A = '0x00000000000000000000000000000000000000aa';
const WALLET_B = '0x00000000000000000000000000000000000000bb';

consoleRelayerEnv((e, c) => {
  env = e;
  call = c;
});

const newProject = async () => (await admin('CreateProject', { name: `paging-${Math.random().toString(36).slice(2, 8)}` })).body.project.id as number;

/** Every row of a list, page by page, following nextCursor; fails if a page repeats a row or the cursor does not end. */
async function readAll<T>(method: string, args: Record<string, unknown>, rowsOf: (body: any) => T[], keyOf: (r: T) => string) {
  const seen: T[] = [];
  let cursor: string | undefined;
  let total = -1;
  for (let pages = 0; pages < 100; pages++) {
    const r = await admin(method, { ...args, ...(cursor ? { cursor } : {}) });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    total = r.body.total;
    seen.push(...rowsOf(r.body));
    if (!r.body.nextCursor) break;
    cursor = r.body.nextCursor;
  }
  expect(new Set(seen.map(keyOf)).size).toBe(seen.length);
  return { rows: seen, total };
}

describe('console: paging, filters and counts', () => {
  it('pages activity by cursor to row 131 of 131, in order, even where rows share a queued time; filters by status, wallet, key and date', async () => {
    const projectId = await newProject();
    // 131 meta-transactions, three to an hour (equal queued times: the cursor must break the tie), every
    // tenth FAILED, every third from wallet A, odd ones through key 7.
    await env.services.db.query(
      `INSERT INTO meta_txns (chain_id, id, project_id, wallet, entrypoint, input, status, gas_limit, gas_estimated, key_id, queued_at)
       SELECT $1, lpad(to_hex(i), 64, '0'), $2, CASE WHEN i % 3 = 0 THEN $3 ELSE $4 END, '0x0000000000000000000000000000000000000001', '0x',
              CASE WHEN i % 10 = 0 THEN 'FAILED' ELSE 'SUCCEEDED' END, 100000, 90000, CASE WHEN i % 2 = 1 THEN 7 ELSE NULL END,
              timestamptz '2026-11-01 00:00:00+00' + (i / 3) * interval '1 hour'
         FROM generate_series(1, 131) AS i`,
      [env.chainId, projectId, WALLET_A, WALLET_B],
    );
    const ids = (body: any) => body.transactions as { metaTxnID: string; queuedAt: string; txnStatus: string }[];
    const all = await readAll('GetMetaTransactions', { projectId, pageSize: 20 }, ids, (t) => t.metaTxnID);
    expect(all.total).toBe(131);
    expect(all.rows).toHaveLength(131);
    // Newest first, and the 131st row is the oldest one (i = 1).
    const times = all.rows.map((t) => Date.parse(t.queuedAt));
    expect(times).toEqual([...times].sort((a, b) => b - a));
    expect(all.rows[130].metaTxnID).toBe('1'.padStart(64, '0'));

    const failed = await readAll('GetMetaTransactions', { projectId, pageSize: 5, status: 'FAILED' }, ids, (t) => t.metaTxnID);
    expect(failed.total).toBe(13);
    expect(failed.rows).toHaveLength(13);
    expect(failed.rows.every((t) => t.txnStatus === 'FAILED')).toBe(true);
    const counted = await admin('GetMetaTransactions', { projectId, status: 'FAILED' });
    expect(counted.body.counts).toEqual({ SUCCEEDED: 118, FAILED: 13 });

    const byWallet = await readAll('GetMetaTransactions', { projectId, pageSize: 50, wallet: WALLET_A.toUpperCase().replace('0X', '0x') }, ids, (t) => t.metaTxnID);
    expect(byWallet.rows).toHaveLength(43);
    expect(byWallet.total).toBe(43);
    expect((await admin('GetMetaTransactions', { projectId, keyId: 7 })).body.total).toBe(66);
    // i / 3 = 10 … 19 hours: i from 30 to 59.
    const window = await readAll('GetMetaTransactions', { projectId, pageSize: 7, from: '2026-11-01T10:00:00Z', to: '2026-11-01T20:00:00Z' }, ids, (t) => t.metaTxnID);
    expect(window.total).toBe(30);
    expect(window.rows).toHaveLength(30);
    expect((await admin('GetMetaTransactions', { projectId, from: '2026-11-02' })).body.total).toBe(131 - 71);

    // The older offset pages still answer.
    const second = await admin('GetMetaTransactions', { projectId, page: { page: 1, pageSize: 20 } });
    expect(second.body.transactions.map((t: { metaTxnID: string }) => t.metaTxnID)).toEqual(all.rows.slice(20, 40).map((t) => t.metaTxnID));

    for (const bad of [{ cursor: 'not-a-cursor' }, { from: 'yesterday' }, { status: 'MAYBE' }, { wallet: '0x12' }]) {
      const r = await admin('GetMetaTransactions', { projectId, ...bad });
      expect(r.status, JSON.stringify(bad)).toBe(400);
      expect(r.body.error).toBe('InvalidArgument');
    }
  });

  it('pages the ledger to entry 131 of 131 with the balance each left, filters it by kind, and says what the operator paid where no balance is kept', async () => {
    const projectId = await newProject();
    const network = env.chain.chainConfig.name;
    for (let i = 1; i <= 131; i++) {
      const r = await admin('AdjustProjectBalance', { projectId, chainID: network, amount: '0.001', identifier: `credit-${i}` });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    }
    type Entry = { id: number; kind: string; balanceWei: string | null; identifier: string | null; paidWei: string };
    const ledger = await readAll(
      'ListProjectLedger',
      { projectId, chainID: network, pageSize: 50 },
      (b) => b.entries as Entry[],
      (e) => String(e.id),
    );
    expect(ledger.total).toBe(131);
    expect(ledger.rows).toHaveLength(131);
    expect(ledger.rows[0]).toMatchObject({ identifier: 'credit-131', balanceWei: (131n * 10n ** 15n).toString() });
    expect(ledger.rows[130]).toMatchObject({ identifier: 'credit-1', balanceWei: (10n ** 15n).toString() });
    expect((await admin('ListProjectLedger', { projectId, chainID: network, kind: 'debit' })).body).toMatchObject({ entries: [], total: 0, nextCursor: null });

    // Debits of a project without a tank (the operator pays): no balance, but what was paid so far.
    const tankless = await newProject();
    await env.services.db.query(
      `INSERT INTO gas_tank_ledger (chain_id, project_id, kind, amount_wei, meta_txn_id) SELECT $1, $2, 'debit', -100 * i, lpad(to_hex(i), 64, '0') FROM generate_series(1, 3) AS i`,
      [env.chainId, tankless],
    );
    const paid = await admin('ListProjectLedger', { projectId: tankless, chainID: network });
    expect(paid.body.entries.map((e: Entry) => [e.balanceWei, e.paidWei])).toEqual([
      [null, '600'],
      [null, '300'],
      [null, '100'],
    ]);
    expect((await admin('ListProjectLedger', { projectId: tankless, chainID: network, cursor: '0x1' })).body.error).toBe('InvalidArgument');
  });

  it('pages refresh tasks and access keys to row 131 of 131, with counts per status and state, and a search over key labels', async () => {
    const projectId = await newProject();
    await env.services.db.query(
      `INSERT INTO tasks (project_id, kind, chain_id, status, total) SELECT $1, 'tokens', $2, CASE WHEN i % 4 = 0 THEN 'FAILED' ELSE 'DONE' END, 1 FROM generate_series(1, 131) AS i`,
      [projectId, env.chainId],
    );
    const tasks = await readAll(
      'ListTasks',
      { projectId, pageSize: 30 },
      (b) => b.tasks as { id: number; status: string }[],
      (t) => String(t.id),
    );
    expect(tasks.total).toBe(131);
    expect(tasks.rows).toHaveLength(131);
    expect(tasks.rows.map((t) => t.id)).toEqual([...tasks.rows.map((t) => t.id)].sort((a, b) => b - a));
    const failedTasks = await readAll(
      'ListTasks',
      { projectId, pageSize: 10, status: 'FAILED' },
      (b) => b.tasks as { id: number; status: string }[],
      (t) => String(t.id),
    );
    expect(failedTasks.rows).toHaveLength(32);
    expect((await admin('ListTasks', { projectId })).body.counts).toEqual({ DONE: 99, FAILED: 32 });

    for (let i = 1; i <= 131; i++) expect((await admin('CreateAccessKey', { projectId, label: `k-${i}` })).status).toBe(200);
    const listed = await readAll(
      'ListAccessKeys',
      { projectId, pageSize: 40 },
      (b) => b.accessKeys as { id: number; label: string }[],
      (k) => String(k.id),
    );
    expect(listed.total).toBe(131);
    expect(listed.rows).toHaveLength(131);
    expect(listed.rows[130].label).toBe('k-1');
    for (const k of listed.rows.filter((k) => k.label.endsWith('0'))) expect((await admin('RevokeAccessKey', { projectId, keyId: k.id })).status).toBe(200);
    expect((await admin('ListAccessKeys', { projectId, state: 'revoked' })).body).toMatchObject({ total: 13, counts: { live: 118, revoked: 13 } });
    const search = await admin('ListAccessKeys', { projectId, search: 'K-13' });
    expect(search.body.accessKeys.map((k: { label: string }) => k.label)).toEqual(['k-131', 'k-130', 'k-13']);
    expect(search.body.counts).toEqual({ live: 2, revoked: 1 });
  });
});
