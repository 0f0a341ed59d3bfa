// What an idle `serve` costs its node (issue #31), counted at the node: the services of `serve` (a relayer
// with 3 senders and its dispatcher, the chain watcher with a contract to watch, the indexer follower) on
// anvil mining a block a second, behind the provider-like proxy, with nothing to relay. Every call is
// counted per block produced (not per second), so a slow machine cannot make the bound pass or fail.
import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/load.ts';
import { deploySequenceV2Context, rpcCall, startAnvil, type AnvilHandle } from '../src/devchain/index.ts';
import { createServices, type Services } from '../src/services.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';
import { startProviderProxy, type ProviderProxy } from './support/provider-proxy.ts';

/** anvil's accounts 1, 2 and 3. */
const SENDERS = [
  '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d',
  '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a',
  '0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6',
] as const;
/** Blocks each window counts over. */
const WINDOW_BLOCKS = 12;
const SENDER_READS = new Set(['eth_getTransactionCount', 'eth_getBalance']);
const HEAD_READS = new Set(['eth_getBlockByNumber', 'eth_getBlockByHash', 'eth_blockNumber']);

let anvil: AnvilHandle;
let provider: ProviderProxy;
let testDb: TestDb;
let services: Services;

const head = async () => Number(await rpcCall<string>(anvil.rpcUrl, 'eth_blockNumber', []));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function untilBlock(n: number, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await head()) < n) {
    if (Date.now() > deadline) throw new Error(`anvil did not reach block ${n}`);
    await sleep(50);
  }
}

/** The calls the service sent over `blocks` blocks produced, by method. */
async function countOver(blocks: number): Promise<{ blocks: number; ms: number; byMethod: Map<string, number> }> {
  const from = await head();
  const seen = provider.proxy.calls.length;
  const t0 = Date.now();
  await untilBlock(from + blocks);
  const calls = provider.proxy.calls.slice(seen);
  const byMethod = new Map<string, number>();
  for (const c of calls) byMethod.set(c.method, (byMethod.get(c.method) ?? 0) + 1);
  return { blocks: (await head()) - from, ms: Date.now() - t0, byMethod };
}

const sum = (m: Map<string, number>, keep: (method: string) => boolean) => [...m].filter(([k]) => keep(k)).reduce((n, [, v]) => n + v, 0);

beforeAll(async () => {
  anvil = await startAnvil({ blockTime: 1 });
  await deploySequenceV2Context(anvil.rpcUrl);
  provider = await startProviderProxy(anvil.rpcUrl);
  testDb = await createTestDb();
  const config = parseConfig({
    allowPrivateNetworks: true,
    logLevel: 'silent',
    database: testDb.location,
    relayer: { quoteSecret: 'test-quote-secret-0123456789abcdef0123' },
    chains: [
      {
        chainId: anvil.chainId,
        name: 'anvil',
        rpcUrls: [provider.url],
        watch: true,
        relayer: { senderKeys: [...SENDERS], feeTokens: [{ address: null, name: 'Ether', symbol: 'ETH', decimals: 18, nativePrice: '1' }] },
        indexer: { scope: 'all' },
      },
    ],
  });
  services = await createServices(config, { db: testDb.db, log: createLogger('silent') });
  // A contract the watcher knows: its idle reads are eth_getLogs too, not skipped for want of addresses.
  const nft = `0x${'ab'.repeat(20)}` as Address;
  await testDb.db.query(`INSERT INTO contracts (chain_id, address, type) VALUES ($1, $2, 'ERC721')`, [anvil.chainId, nft]);
  services.startDispatchers();
  services.startBackground();
  // Warm: the dispatcher's first sweep read every sender, the watcher and the follower have cursors.
  await untilBlock((await head()) + 4);
}, 120_000);

afterAll(async () => {
  await services?.close();
  await testDb?.drop();
  await provider?.close();
  await anvil?.stop();
});

describe(`an idle serve's node calls, per block produced (${TEST_DB})`, () => {
  it('one head read per block for the dispatcher, the watcher and the follower together; one eth_getLogs per several blocks; at most 2 calls per block', async () => {
    const w = await countOver(WINDOW_BLOCKS);
    const detail = JSON.stringify({ blocks: w.blocks, ms: w.ms, byMethod: Object.fromEntries(w.byMethod) });
    const perBlock = (n: number) => n / w.blocks;
    // Nobody asks for the head on their own: every reader takes the shared one.
    expect(w.byMethod.get('eth_blockNumber') ?? 0, detail).toBe(0);
    // The head, read once per block time (1 per block on a quiet machine; a read that came before its
    // block, or a block missed and joined by its parent hash, costs one more on a busy one).
    expect(perBlock(sum(w.byMethod, (m) => HEAD_READS.has(m))), detail).toBeLessThanOrEqual(1.5);
    // Two readers of logs, each one eth_getLogs per idleReadMs (5 s) while nothing is found.
    expect(w.byMethod.get('eth_getLogs') ?? 0, detail).toBeLessThanOrEqual(2 * Math.ceil(w.blocks / 5) + 2);
    // Quiet senders are read once per quietSenderReadMs (30 s): 3 calls each, at most one round in a window this short.
    expect(
      sum(w.byMethod, (m) => SENDER_READS.has(m)),
      detail,
    ).toBeLessThanOrEqual(3 * SENDERS.length);
    // Nothing else.
    expect(
      [...w.byMethod.keys()].filter((m) => !HEAD_READS.has(m) && !SENDER_READS.has(m) && m !== 'eth_getLogs'),
      detail,
    ).toEqual([]);
    // Per block produced, everything but the senders' reads (which are per 30 s, not per block): at most 2.
    expect(perBlock(sum(w.byMethod, (m) => !SENDER_READS.has(m))), detail).toBeLessThanOrEqual(2);
  }, 90_000);

  it('through load-balanced nodes a block apart, still bounded per block: a head read from the node behind is not a new head', async () => {
    provider.set({ lag: { blocks: 1 } });
    try {
      const lagBefore = provider.hits.lag ?? 0;
      const w = await countOver(WINDOW_BLOCKS);
      const detail = JSON.stringify({ blocks: w.blocks, ms: w.ms, byMethod: Object.fromEntries(w.byMethod) });
      expect(provider.hits.lag ?? 0).toBeGreaterThan(lagBefore);
      expect(w.byMethod.get('eth_blockNumber') ?? 0, detail).toBe(0);
      // A read answered by the node behind brings no new head: it is read again a quarter interval later.
      expect(sum(w.byMethod, (m) => HEAD_READS.has(m)) / w.blocks, detail).toBeLessThanOrEqual(2.5);
      expect(w.byMethod.get('eth_getLogs') ?? 0, detail).toBeLessThanOrEqual(2 * Math.ceil(w.blocks / 5) + 4);
      // The follower and the watcher kept up: each reaches the head (less its confirmations) of the window's end.
      const end = (await head()) - 2;
      const cursors = async () => {
        const f = await testDb.db.query<{ b: string }>('SELECT block_number::text AS b FROM indexer_cursors WHERE chain_id = $1', [anvil.chainId]);
        const w = await testDb.db.query<{ b: string }>('SELECT block_number::text AS b FROM chain_cursors WHERE chain_id = $1', [anvil.chainId]);
        return [Number(f.rows[0]!.b), Number(w.rows[0]!.b)];
      };
      const deadline = Date.now() + 20_000;
      while ((await cursors()).some((b) => b < end) && Date.now() < deadline) await sleep(200);
      expect(Math.min(...(await cursors()))).toBeGreaterThanOrEqual(end);
    } finally {
      provider.set({});
    }
  }, 90_000);
});
