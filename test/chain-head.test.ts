// The shared head reader (src/chain/head.ts) on a real anvil, behind a counting proxy: one read per head,
// headers of the head's chain served without a call, a missed block joined by its parent hash, a reorg
// replacing the kept hashes, a lower head taken as a node behind until read several times in a row, and
// polling once per block time only while someone listens.
import { describe, expect, it, vi } from 'vitest';
import { createChainClient, type ChainClient } from '../src/chain/client.ts';
import { rpcCall } from '../src/devchain/index.ts';
import { mine, revert, snapshot } from './support/anvil-control.ts';
import { anvilBehindProvider } from './support/provider-proxy.ts';

const node = anvilBehindProvider();

const client = (blockTimeMs?: number): ChainClient =>
  createChainClient({ chainId: node.anvil.chainId, name: 'anvil', rpcUrls: [node.provider.url], rpcBatchSize: 1, blockTimeMs }, { pollingIntervalMs: 50 });
/** What anvil itself says is at height `n` (not through the proxy). */
const hashAt = async (n: bigint) => (await rpcCall<{ hash: string } | null>(node.anvil.rpcUrl, 'eth_getBlockByNumber', [`0x${n.toString(16)}`, false]))?.hash ?? null;
const nodeHead = async () => BigInt(await rpcCall<string>(node.anvil.rpcUrl, 'eth_blockNumber', []));
/** The calls `fn` sent through the proxy, by method. */
async function callsOf(fn: () => Promise<unknown>): Promise<Record<string, number>> {
  const seen = node.provider.proxy.calls.length;
  await fn();
  const out: Record<string, number> = {};
  for (const c of node.provider.proxy.calls.slice(seen)) out[c.method] = (out[c.method] ?? 0) + 1;
  return out;
}
/** A replacement block differs from the one it replaces: its own timestamp. */
let stamp = Math.floor(Date.now() / 1000) + 100_000;
const mineDistinct = async (n: number) => {
  for (let i = 0; i < n; i++) {
    await rpcCall(node.anvil.rpcUrl, 'evm_setNextBlockTimestamp', [++stamp]);
    await mine(node.anvil.rpcUrl, 1);
  }
};

describe('the shared chain head', () => {
  it('one call per head read; the headers of its chain below it are served without a call', async () => {
    const c = client();
    await mine(node.anvil.rpcUrl, 3);
    expect(await callsOf(() => c.head.read())).toEqual({ eth_getBlockByNumber: 1 });
    await mine(node.anvil.rpcUrl, 1);
    let top = 0n;
    expect(
      await callsOf(async () => {
        top = (await c.head.read()).number;
      }),
    ).toEqual({ eth_getBlockByNumber: 1 });
    expect(top).toBe(await nodeHead());
    // The head and its parent are kept: no call, and the node's own hashes.
    const kept = await callsOf(async () => {
      expect((await c.head.block(top))!.hash).toBe(await hashAt(top));
      expect((await c.head.block(top - 1n))!.hash).toBe(await hashAt(top - 1n));
    });
    expect(kept).toEqual({});
    // A read within maxAgeMs is no call either.
    expect(await callsOf(() => c.head.read(60_000))).toEqual({});
    // A height below those kept is read once; its hash joins them (it is the lowest one's parent).
    expect(await callsOf(() => c.head.block(top - 2n))).toEqual({ eth_getBlockByNumber: 1 });
    expect(await callsOf(() => c.head.block(top - 2n))).toEqual({});
    // Above the head: read, never kept, and null when the node has no such block (never an error).
    expect(await c.head.block(top + 5n)).toBeNull();
    // A reader that found the node at odds with a kept header has it read again from the node.
    c.head.distrust(top);
    expect(await callsOf(() => c.head.block(top))).toEqual({ eth_getBlockByNumber: 1 });
    expect(await callsOf(() => c.head.block(top - 1n))).toEqual({});
  });

  it('a missed block is joined by its parent hash while readers listen; a long gap, or nobody listening, starts afresh from the new head', async () => {
    // Listening (the loop's own reads are a minute apart here: the reads below are the test's).
    const c = client(60_000);
    const unsubscribe = c.head.subscribe(() => undefined);
    try {
      await c.head.read();
      await mine(node.anvil.rpcUrl, 2);
      const joined = await callsOf(() => c.head.read());
      expect(joined).toEqual({ eth_getBlockByNumber: 1, eth_getBlockByHash: 1 });
      const top = c.head.current!.number;
      expect(await callsOf(() => c.head.block(top - 1n))).toEqual({});
      expect(await callsOf(() => c.head.block(top - 2n))).toEqual({});
      await mine(node.anvil.rpcUrl, 20);
      // Too far to join by parents: no walk of 20 reads, the old heights are dropped (not trusted).
      expect(await callsOf(() => c.head.read())).toEqual({ eth_getBlockByNumber: 1 });
      expect(await callsOf(() => c.head.block(top))).toEqual({ eth_getBlockByNumber: 1 });
    } finally {
      unsubscribe();
      await c.head.stop();
    }
    // Nobody listening (a dispatcher alone, reading every 2 s): a gap is not joined by reading parents.
    const alone = client();
    await alone.head.read();
    await mine(node.anvil.rpcUrl, 2);
    expect(await callsOf(() => alone.head.read())).toEqual({ eth_getBlockByNumber: 1 });
    const top = alone.head.current!.number;
    expect(await callsOf(() => alone.head.block(top - 1n))).toEqual({ eth_getBlockByNumber: 1 });
  });

  it('a reorg: the new fork replaces the kept hashes above the block both share, and subscribers hear the new head', async () => {
    const c = client();
    await c.head.read();
    const snap = await snapshot(node.anvil.rpcUrl);
    await mineDistinct(2);
    const a = await c.head.read();
    const oldHashes = [(await c.head.block(a.number - 1n))!.hash, a.hash];
    await revert(node.anvil.rpcUrl, snap);
    await mineDistinct(2);
    const heads: string[] = [];
    const unsubscribe = c.head.subscribe((h) => heads.push(h.hash));
    let b: Awaited<ReturnType<typeof c.head.read>>;
    try {
      b = await c.head.read();
    } finally {
      unsubscribe();
    }
    expect(b.number).toBe(a.number);
    expect(b.hash).not.toBe(a.hash);
    expect(heads).toContain(b.hash);
    const kept = await callsOf(async () => {
      for (const n of [a.number - 1n, a.number]) expect((await c.head.block(n))!.hash).toBe(await hashAt(n));
    });
    expect(kept).toEqual({});
    expect([(await c.head.block(a.number - 1n))!.hash, (await c.head.block(a.number))!.hash]).not.toContain(oldHashes[0]);
    expect([(await c.head.block(a.number - 1n))!.hash, (await c.head.block(a.number))!.hash]).not.toContain(oldHashes[1]);
    await c.head.stop();
  });

  it('a read with no age asks the node every time, even within one millisecond of the last', async () => {
    const c = client();
    await c.head.read();
    // The clock stands still (a node a hop away answers within the millisecond): each read is still one call.
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      expect(
        await callsOf(async () => {
          for (let i = 0; i < 3; i++) await c.head.read();
        }),
      ).toEqual({ eth_getBlockByNumber: 3 });
      // An age still serves the head held.
      expect(await callsOf(() => c.head.read(1_000))).toEqual({});
    } finally {
      vi.useRealTimers();
    }
  });

  it('a lower head is a node behind: ignored, unless read three times in a row (the chain really went back)', async () => {
    const c = client();
    const snap = await snapshot(node.anvil.rpcUrl);
    const base = await nodeHead();
    await mineDistinct(3);
    const high = await c.head.read();
    expect(high.number).toBe(base + 3n);
    await revert(node.anvil.rpcUrl, snap);
    expect((await c.head.read()).number).toBe(high.number);
    expect((await c.head.read()).number).toBe(high.number);
    // The third in a row: the chain is shorter now; the heights above it are no longer served.
    expect((await c.head.read()).number).toBe(base);
    expect(await c.head.block(high.number)).toBeNull();
  });

  it('through load-balanced nodes a block apart, the head never goes back and ends at the node head', async () => {
    const c = client();
    node.provider.set({ lag: { blocks: 1 } });
    try {
      const seen: bigint[] = [];
      for (let i = 0; i < 8; i++) {
        await mine(node.anvil.rpcUrl, 1);
        for (let k = 0; k < 3; k++) seen.push((await c.head.read()).number);
      }
      expect(node.provider.hits.lag).toBeGreaterThan(0);
      expect(seen).toEqual([...seen].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0)));
      expect(seen.at(-1)).toBe(await nodeHead());
    } finally {
      node.provider.set({});
    }
  });

  it('polls once per block time while someone listens, and not at all once nobody does', async () => {
    const c = client(200);
    const heads: bigint[] = [];
    const unsubscribe = c.head.subscribe((h) => heads.push(h.number));
    const start = await nodeHead();
    for (let i = 0; i < 10; i++) {
      await mine(node.anvil.rpcUrl, 1);
      await new Promise((r) => setTimeout(r, 200));
    }
    // The last head is handed over by a poll that may come late on a loaded machine: wait for it (bounded).
    await expect.poll(() => heads.at(-1)).toBe(start + 10n);
    const polled = node.provider.proxy.count('eth_getBlockByNumber');
    unsubscribe();
    // Every head was handed over, each once, in order.
    expect(new Set(heads).size).toBe(heads.length);
    // A read in flight when the last listener left may still reach the node: wait for the polling loop
    // to be over (it ends when nobody listens), then nothing may read the head any more.
    await expect.poll(() => (c.head as unknown as { loop?: Promise<void> }).loop).toBeUndefined();
    const after = node.provider.proxy.count('eth_getBlockByNumber');
    await new Promise((r) => setTimeout(r, 800));
    expect(node.provider.proxy.count('eth_getBlockByNumber')).toBe(after);
    expect(polled).toBeGreaterThan(0);
    await c.head.stop();
  });
});
