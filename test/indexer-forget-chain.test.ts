// `npm start` forgets what the indexer held of the dev chain (a new anvil under the same id): its
// cursors and its readers' unread blocks go; another chain's, and the metadata watcher's, stay.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { forgetIndexedChain } from '../src/indexer/index.ts';
import { createTestDb, type TestDb } from './support/db.ts';

let t: TestDb;
beforeAll(async () => {
  t = await createTestDb();
});
afterAll(async () => {
  await t?.drop();
});

it("drops the indexer's cursors and unread blocks of one chain, and nothing of another chain or reader", async () => {
  const unread = [
    [31337, 'indexer:all'],
    [31337, 'indexer:watchlist'],
    [31337, 'watcher'],
    // A reader whose name only looks like the indexer's family (no colon after it).
    [31337, 'indexerish'],
    [1, 'indexer:all'],
  ] as const;
  for (const [chain, reader] of unread) {
    await t.db.query(`INSERT INTO unread_blocks (chain_id, reader, block_number, block_hash, error, next_retry_at) VALUES ($1, $2, 7, '0x07', 'too big', now())`, [chain, reader]);
  }
  for (const chain of [31337, 1]) {
    await t.db.query(`INSERT INTO indexer_cursors (chain_id, scope, block_number, block_hash) VALUES ($1, 'all', 7, '0x07')`, [chain]);
  }

  await forgetIndexedChain(t.db, 31337);

  const left = await t.db.query<{ chain_id: string; reader: string }>('SELECT chain_id::text, reader FROM unread_blocks ORDER BY chain_id, reader');
  expect(left.rows).toEqual([
    { chain_id: '1', reader: 'indexer:all' },
    { chain_id: '31337', reader: 'indexerish' },
    { chain_id: '31337', reader: 'watcher' },
  ]);
  const cursors = await t.db.query<{ chain_id: number }>('SELECT chain_id FROM indexer_cursors');
  expect(cursors.rows.map((r) => Number(r.chain_id))).toEqual([1]);
});
