// The service through a proxy that behaves like a hosted provider (test/support/provider-proxy.ts): batch
// caps, logs without blockTimestamp, log range and result caps, 429s, 502/503 and dropped connections,
// nodes without old state, load-balanced nodes a block apart. Everything is checked against anvil itself:
// balances, receipts, stored rows; never against what the service says of itself.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeFunctionData, encodeFunctionData, parseAbi, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeploymentBlockError, findDeploymentBlock } from '../src/chain/deployment-block.ts';
import { createChainClient } from '../src/chain/client.ts';
import { devPublicClient, rpcCall, startOriginServer, type OriginServer } from '../src/devchain/index.ts';
import { probeAbi } from '../src/relayer/abi.ts';
import { openDb } from '../src/store/db.ts';
import { mine } from './support/anvil-control.ts';
import { runCli, runMain } from './support/cli.ts';
import { createTestDb } from './support/db.ts';
import { runsBundle, startProviderProxy, type ProviderFaults } from './support/provider-proxy.ts';
import type { RpcCall } from './support/rpc-proxy.ts';
import { call, erc721WithTokens, range, resultOf, waitForEnd } from './support/refresh.ts';
import { erc20, sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { newSigner, officialWallet } from './support/sequence-wallet.ts';
import { startTestService } from './support/service.ts';
import { startTokenChain, type TokenChain } from './support/token-chain.ts';

/** The read of wallets' implementation slots on their own (a probe run with no bundle), naming `wallet`. */
const readsSlotOf =
  (wallet: Address) =>
  (call: RpcCall): boolean => {
    if (call.method !== 'eth_call') return false;
    const data = (call.params[0] as { data?: Hex; input?: Hex } | undefined)?.data ?? (call.params[0] as { input?: Hex } | undefined)?.input;
    try {
      const d = decodeFunctionData({ abi: probeAbi, data: data ?? '0x' });
      return d.functionName === 'probeMany' && d.args[0].length === 0 && d.args[3].some((a) => a.toLowerCase() === wallet.toLowerCase());
    } catch {
      return false;
    }
  };

const someone = () => privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
const balanceAbi = parseAbi(['function balanceOf(address) view returns (uint256)']);
const MINT_TOPIC = '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef';

/** Every fault class at once, at rates a busy hosted provider shows. */
const ALL: ProviderFaults = {
  latencyMs: 3,
  rateLimit: { callsPerSec: 2_000, retryAfterSec: 1 },
  logRangeCap: 25,
  logResultCap: 30,
  batchCap: 5,
  stripBlockTimestamp: true,
  refusedMethods: ['eth_getBlockReceipts'],
  flaky: { every: 41, kind: 503 },
  lag: { blocks: 1 },
  noArchiveDepth: 16,
};

let chain: TokenChain;
let origin: OriginServer;
let pub: ReturnType<typeof devPublicClient>;

beforeAll(async () => {
  [chain, origin] = await Promise.all([startTokenChain(), startOriginServer()]);
  pub = devPublicClient(chain.anvil.rpcUrl, chain.anvil.chainId);
}, 120_000);

afterAll(async () => {
  await Promise.all([chain?.stop(), origin?.stop()]);
});

describe('indexer backfill through a provider that caps batches and leaves blockTimestamp out', () => {
  it.each([
    ['batch cap and no blockTimestamp', { batchCap: 4, stripBlockTimestamp: true }],
    ['every fault class together', ALL],
  ] as const)(
    '%s: `metarelay indexer backfill` completes, balances equal the chain',
    async (_name, faults) => {
      const [token] = await chain.deploy([{ contract: 'TestIndexERC20' }]);
      const holders = Array.from({ length: 6 }, someone);
      // One block per transaction (automine): 60 blocks with transfers, each needing its timestamp.
      const calls = Array.from({ length: 60 }, (_, i) =>
        i < 30
          ? { address: token!, contract: 'TestIndexERC20', functionName: 'mint', args: [holders[i % holders.length], BigInt(100 + i)] }
          : { address: token!, contract: 'TestIndexERC20', functionName: 'move', args: [holders[i % holders.length], holders[(i + 1) % holders.length], BigInt(i % 7)] },
      );
      await chain.send(calls);
      const provider = await startProviderProxy(chain.anvil.rpcUrl, faults);
      const testDb = await createTestDb();
      const dir = mkdtempSync(join(tmpdir(), 'metarelay-provider-'));
      try {
        // One process per PGlite folder: the CLI gets the database to itself.
        if (testDb.db.kind === 'pglite') await testDb.db.close();
        const file = join(dir, 'metarelay.json');
        const head = Number(await pub.getBlockNumber());
        const from = Math.max(0, head - 70);
        writeFileSync(
          file,
          JSON.stringify({
            database: testDb.location,
            logLevel: 'silent',
            chains: [{ chainId: chain.anvil.chainId, name: 'anvil', rpcUrls: [provider.url], watch: false, indexer: { scope: 'all', confirmations: 0, chunkBlocks: 200 } }],
          }),
        );
        // The case of every fault runs the built binary (what a shell sees: the summary, the one line and
        // the codes); the other runs main() in this process (runMain), its work and answers the same:
        // a backfill process loads the whole service, ~1.5 s of CPU before its work.
        const cli = faults === ALL ? (args: string[]) => runCli(args, {}, 180_000) : runMain;
        const r = await cli(['indexer', 'backfill', '--chain', 'anvil', '--from', String(from), '--to', String(head), '--config', file]);
        expect(r.code, r.stderr).toBe(0);
        expect(JSON.parse(r.stdout.trim().split('\n').pop()!)).toMatchObject({ status: 'DONE', fromBlock: from, toBlock: head, done: head - from + 1 });
        // The provider did refuse the first big batch, and was not sent one over its cap again.
        expect(provider.proxy.refusedBatches).toBeGreaterThan(0);
        expect(provider.proxy.refusedBatches).toBeLessThanOrEqual(3);

        const db = testDb.db.kind === 'pglite' ? await openDb(testDb.location) : testDb.db;
        try {
          const rows = await db.query<{ account: string; balance: string }>('SELECT account, balance::text AS balance FROM indexer_balances WHERE contract = $1 AND balance > 0', [
            token!.toLowerCase(),
          ]);
          const got = Object.fromEntries(rows.rows.map((x) => [x.account, x.balance]));
          const truth = await Promise.all(holders.map((h) => pub.readContract({ address: token!, abi: balanceAbi, functionName: 'balanceOf', args: [h] })));
          expect(got).toEqual(Object.fromEntries(holders.map((h, i) => [h, truth[i]!.toString()]).filter(([, b]) => b !== '0')));
          // Every transfer dated with its block's own timestamp, read from the blocks.
          const dated = await db.query<{ block_number: string; ts: string }>(
            `SELECT block_number::text AS block_number, extract(epoch FROM ts)::bigint::text AS ts FROM indexer_transfers WHERE contract = $1 ORDER BY block_number LIMIT 3`,
            [token!.toLowerCase()],
          );
          for (const x of dated.rows) expect(Number(x.ts)).toBe(Number((await pub.getBlock({ blockNumber: BigInt(x.block_number) })).timestamp));
        } finally {
          if (testDb.db.kind === 'pglite') await db.close();
        }

        // A provider that drops every connection: one clear line and exit 1, never a stack trace.
        provider.set({ flaky: { every: 1, kind: 'drop' } });
        const failed = await cli(['indexer', 'backfill', '--chain', 'anvil', '--from', String(from), '--config', file]);
        expect(failed.code).toBe(1);
        expect(failed.stderr.trim().split('\n')).toHaveLength(1);
        expect(failed.stderr).toMatch(/^metarelay indexer: /);
        expect(failed.stderr).not.toMatch(/\n\s+at /);
      } finally {
        rmSync(dir, { recursive: true, force: true });
        await provider.close();
        await testDb.drop();
      }
    },
    300_000,
  );
});

describe('whole-contract refresh on a node without old state', () => {
  it('finds every token from the mint logs where eth_getCode has no state, and never reads a failure as "not deployed"', async () => {
    const ids = range(1, 12);
    for (const id of ids) origin.setDocument(`/old/${id}`, { name: `Old ${id}` });
    const before = await pub.getBlockNumber();
    const nft = await erc721WithTokens(chain, origin, '/old/', ids.slice(0, 6));
    await mine(chain.anvil.rpcUrl, 40);
    await chain.send(ids.slice(6).map((id) => ({ address: nft, contract: 'DevERC721', functionName: 'mint', args: [someone(), BigInt(id)] })));
    await mine(chain.anvil.rpcUrl, 40);
    const firstMint = (await pub.getLogs({ address: nft, fromBlock: before, toBlock: 'latest' })).find((l) => l.topics[0] === MINT_TOPIC)!.blockNumber;

    const provider = await startProviderProxy(chain.anvil.rpcUrl, { noArchiveDepth: 16 });
    try {
      // The search itself: the node has no state at the deployment, the first mint log gives the start.
      // A short timeout: rate limited below, a call waits for a slot of the node's budget until it.
      const client = createChainClient({ chainId: chain.anvil.chainId, name: 'anvil', rpcUrls: [provider.url], rpcBatchSize: 200 }, { timeoutMs: 2_000 });
      const head = await pub.getBlockNumber();
      const found = await findDeploymentBlock(client, nft, head, { topics: [MINT_TOPIC], logChunkBlocks: 50 });
      expect(found).toMatchObject({ block: firstMint, source: 'logs' });
      expect(provider.hits.noArchive).toBeGreaterThan(0);
      // Rate limited: an error that says so, never "not deployed".
      provider.set({ noArchiveDepth: 16, rateLimit: { callsPerSec: 0 } });
      await expect(findDeploymentBlock(client, nft, head, { topics: [MINT_TOPIC], logChunkBlocks: 50 })).rejects.toBeInstanceOf(DeploymentBlockError);

      // The task, with every fault class on.
      provider.set(ALL);
      const t = await startTestService({
        chains: [{ ...chain.chainConfig, rpcUrls: [provider.url], watch: false }],
        metadata: { hotCacheTtlMs: 0, fetchTimeoutMs: 3_000, inlineWaitMs: 10_000 },
        refresh: { pollMs: 50, logChunkBlocks: 100 },
      });
      try {
        const res = await call(t, 'RefreshAllContractTokens', { chainID: 'anvil', contractAddress: nft });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        const taskId = res.body.taskID as number;
        for (let i = 0; i < 200 && (await t.services.worker.tick().catch(() => 1)) > 0; i++);
        expect(await waitForEnd(t, taskId, 60_000)).toBe('DONE');
        const result = await resultOf(t, taskId);
        expect(Object.keys(result.tokens).sort((a, b) => Number(a) - Number(b))).toEqual(ids);
        expect(Object.values(result.tokens).every(Boolean)).toBe(true);
      } finally {
        await t.close();
      }
    } finally {
      await provider.close();
    }
  }, 180_000);
});

describe('whole-contract refresh on a node without old state that words it its own way', () => {
  // Providers word "no state for that block" as they please: anvil's own, and one no list could know.
  // The node refuses the old read and serves the same read at the head: that is "no state there".
  it.each([
    ["anvil's wording", { code: -32602, message: 'BlockOutOfRangeError: block height is {head} but requested was {block}' }],
    ['a made-up wording', { code: -32099, message: 'the vault forgot block {block} (it remembers from {head} on)' }],
  ] as const)(
    '%s: EnqueueTokensForRefresh with refreshAll finishes with every token',
    async (_name, noArchiveError) => {
      const ids = range(1, 6);
      const prefix = `/worded-${noArchiveError.code}/`;
      for (const id of ids) origin.setDocument(`${prefix}${id}`, { name: `Worded ${id}` });
      const nft = await erc721WithTokens(chain, origin, prefix, ids);
      await mine(chain.anvil.rpcUrl, 40);
      const provider = await startProviderProxy(chain.anvil.rpcUrl, { noArchiveDepth: 16, noArchiveError });
      try {
        const t = await startTestService({
          chains: [{ ...chain.chainConfig, rpcUrls: [provider.url], watch: false }],
          metadata: { hotCacheTtlMs: 0, fetchTimeoutMs: 3_000, inlineWaitMs: 10_000 },
          refresh: { pollMs: 50, logChunkBlocks: 100 },
        });
        try {
          const res = await call(t, 'EnqueueTokensForRefresh', { chainID: 'anvil', contractAddress: nft, refreshAll: true });
          expect(res.status, JSON.stringify(res.body)).toBe(200);
          const taskId = res.body.taskId as number;
          for (let i = 0; i < 200 && (await t.services.worker.tick().catch(() => 1)) > 0; i++);
          expect(await waitForEnd(t, taskId, 60_000)).toBe('DONE');
          const result = await resultOf(t, taskId);
          expect(Object.keys(result.tokens).sort((a, b) => Number(a) - Number(b))).toEqual(ids);
          expect(Object.values(result.tokens).every(Boolean)).toBe(true);
          // The node did refuse old reads in those words: the start came from the logs, not from luck.
          expect(provider.hits.noArchive).toBeGreaterThan(0);
        } finally {
          await t.close();
        }
      } finally {
        await provider.close();
      }
    },
    120_000,
  );
});

describe('the relayer through load-balanced nodes a block apart', () => {
  // Half the requests to the node behind, by a seeded coin, not strictly by turns: the dispatcher's loop
  // sends two requests a tick, and strict turns gave its sender reads to the node behind every tick, so a
  // mined slot was seen only by the idle sweep 3 s later (each send here waited 3-9 s for its receipt).
  const LAG = { blocks: 1, coin: true };
  let env: RelayerEnv;
  beforeAll(async () => {
    env = await startRelayerEnv({ provider: { lag: LAG }, relayer: { confirmations: 3 } });
    await sponsor(env, 'CONTRACT', env.token);
  }, 120_000);
  afterAll(async () => {
    await env?.close();
  });

  const balance = (owner: Address) => env.public.readContract({ address: env.token, abi: erc20, functionName: 'balanceOf', args: [owner] });
  const transfer = (to: Address, amount: bigint) => ({ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [to, amount] }) });

  /**
   * A send as a client follows the relayer's word: refused Unavailable because "the chain's node is
   * behind ... try again", it is sent again (twice at most). With the node behind picked by a coin per
   * request, every retry of a read pinned to the block seen can still meet it, rarely; such a refusal
   * queued nothing, which expectExecutedOnce checks on chain (each transfer counted once).
   */
  async function sendTrying(w: ReturnType<typeof officialWallet>, txs: Parameters<ReturnType<typeof officialWallet>['sendTransaction']>[0], what: string) {
    for (let attempt = 1; ; attempt++) {
      try {
        return await w.sendTransaction(txs);
      } catch (err) {
        const e = err as Error & { cause?: unknown };
        if (attempt < 3 && /^Unavailable resource/.test(e.message) && /node is behind/.test(String(e.cause))) continue;
        throw new Error(`${what}: ${e.message} (${String(e.cause ?? JSON.stringify(e))})`);
      }
    }
  }

  /** Each meta-transaction's statuses as its events recorded them, oldest first. */
  async function statusTrail(): Promise<Map<string, { status: string; cause: string | null }[]>> {
    const rows = await env.services.db.query<{ payload: unknown }>(`SELECT payload FROM events WHERE type = 'metatxn.status' ORDER BY id`);
    const out = new Map<string, { status: string; cause: string | null }[]>();
    for (const r of rows.rows) {
      const p = (typeof r.payload === 'string' ? JSON.parse(r.payload) : r.payload) as {
        data?: { metaTxnId: string; status: string; cause: string | null };
        metaTxnId?: string;
        status?: string;
        cause?: string | null;
      };
      const d = p.data ?? (p as { metaTxnId: string; status: string; cause: string | null });
      out.set(d.metaTxnId, [...(out.get(d.metaTxnId) ?? []), { status: d.status, cause: d.cause ?? null }]);
    }
    return out;
  }

  async function sendAll(rounds: number) {
    const w = officialWallet({ signerKey: newSigner().privateKey, rpcUrl: env.rpcUrl, chainId: env.chainId, relayerUrl: env.relayerUrl, projectAccessKey: env.accessKey });
    const to = newSigner().address;
    const hashes: string[] = [];
    try {
      await env.chain.send([{ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [w.address, 1_000n] }]);
      // The funding is someone else's write the relayer never saw: two blocks deep, every node has it.
      // What is under test is what follows the relayer's own writes and the heads it has seen.
      await mine(env.rpcUrl, 2);
      // The first deploys the wallet; each next one is sent the moment the last one's receipt is in.
      for (let i = 1; i <= rounds; i++) {
        const sent = await sendTrying(w, [transfer(to, BigInt(i))], `meta-transaction ${i} of ${rounds}`);
        hashes.push(sent.hash);
      }
    } finally {
      w.close();
    }
    return { wallet: w.address as Address, to, hashes };
  }

  const signed = async () => Number((await env.services.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM relay_txs WHERE kind <> 'filler'`)).rows[0]!.n);

  async function expectExecutedOnce(sent: { wallet: Address; to: Address; hashes: string[] }, rounds: number, signedBefore: number) {
    // Ground truth: every transfer happened once, each hash has a successful receipt on anvil.
    expect(await balance(sent.to)).toBe(BigInt((rounds * (rounds + 1)) / 2));
    expect(await balance(sent.wallet)).toBe(1_000n - BigInt((rounds * (rounds + 1)) / 2));
    for (const h of sent.hashes) expect((await env.public.getTransactionReceipt({ hash: h as `0x${string}` })).status).toBe('success');
    // Give the sweep a few heads over the mined transactions (each block seen by the lagging node too).
    for (let i = 0; i < 6; i++) {
      await mine(env.rpcUrl, 1);
      await new Promise((r) => setTimeout(r, 150));
    }
    // No phantom reorg: nothing went back to SENT, no `reorged` event, the sweep never counted one.
    for (const [id, trail] of await statusTrail()) {
      expect(
        trail.map((x) => x.cause).filter((c) => c === 'reorged'),
        id,
      ).toEqual([]);
      const succeeded = trail.findIndex((x) => x.status === 'SUCCEEDED');
      if (succeeded >= 0)
        expect(
          trail.slice(succeeded).map((x) => x.status),
          id,
        ).not.toContain('SENT');
    }
    expect((await env.services.metrics.relayReorgs.get()).values.reduce((n, v) => n + v.value, 0)).toBe(0);
    // The sweep signed no replacement: one signed transaction per meta-transaction.
    expect((await signed()) - signedBefore).toBe(sent.hashes.length);
  }

  it('a wallet deployed by the relayer sends again at once: not refused as undeployed, each executed once, no phantom reorg', async () => {
    const before = await signed();
    const sent = await sendAll(4);
    expect(env.provider!.hits.lag).toBeGreaterThan(0);
    await expectExecutedOnce(sent, 4, before);
  }, 120_000);

  /** A funded wallet whose first meta-transaction (which deploys it) went through the nodes a block apart by turns; the proxy's lag is put back after fn. */
  async function afterDeployment(fn: (a: { w: ReturnType<typeof officialWallet>; to: Address; first: { hash: string }; before: number }) => Promise<void>) {
    const before = await signed();
    const w = officialWallet({ signerKey: newSigner().privateKey, rpcUrl: env.rpcUrl, chainId: env.chainId, relayerUrl: env.relayerUrl, projectAccessKey: env.accessKey });
    const to = newSigner().address;
    try {
      await env.chain.send([{ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [w.address, 1_000n] }]);
      await mine(env.rpcUrl, 2);
      const first = await sendTrying(w, [transfer(to, 1n)], 'the first, deploying the wallet');
      await fn({ w, to, first, before });
    } finally {
      env.provider!.set({ lag: LAG });
      w.close();
    }
  }

  type Deployed = Parameters<Parameters<typeof afterDeployment>[0]>[0];

  /**
   * With `lag` in force, the deployed wallet's next send is refused as the node being behind and nothing
   * is signed on its state; with the node caught up (the coin again), the same bundle is relayed and
   * executed once. Ground truth: what the relayer signed, each with a successful receipt on anvil.
   */
  async function refusedWhileBehindThenRelayed({ w, to, first, before }: Deployed, lag: ProviderFaults['lag']) {
    const hits = env.provider!.hits.lag ?? 0;
    env.provider!.set({ lag });
    const refused = await w.sendTransaction([transfer(to, 2n)]).then(
      () => null,
      (err: Error & { cause?: unknown }) => `${err.message}: ${String(err.cause ?? JSON.stringify(err))}`,
    );
    expect(env.provider!.hits.lag ?? 0).toBeGreaterThan(hits);
    const txs = await env.services.db.query<{ hash: string }>(`SELECT hash FROM relay_txs WHERE kind <> 'filler' ORDER BY id OFFSET $1`, [before]);
    const statuses = await Promise.all(txs.rows.map((t) => env.public.getTransactionReceipt({ hash: t.hash as Hex }).then((r) => r.status)));
    expect(statuses).toEqual(txs.rows.map(() => 'success'));
    expect(refused).toMatch(/^Unavailable resource: the chain's node is behind/);
    expect((await signed()) - before).toBe(1);
    env.provider!.set({ lag: LAG });
    const second = await sendTrying(w, [transfer(to, 2n)], 'sent again once caught up');
    await expectExecutedOnce({ wallet: w.address as Address, to, hashes: [first.hash, second.hash] }, 2, before);
  }

  it(
    'simulations answered by a node a block behind: nothing is signed on its state, the bundle is relayed once the node has caught up',
    () =>
      // Every run of a bundle (the probe's eth_call, an estimate) goes to the node behind, where the wallet
      // deployed a block ago has no code: the call reaches nothing and "needs" next to no gas. What the
      // relayer signed on that state would run out of gas on the real one, at its expense.
      afterDeployment((d) => refusedWhileBehindThenRelayed(d, { blocks: 1, only: runsBundle })),
    120_000,
  );

  it(
    'a head read lower three times in a row by a node behind is not the chain gone back: nothing is signed on the older state, the bundle is relayed once the node has caught up',
    () =>
      afterDeployment(async (d) => {
        const relayer = env.services.relayers.get(env.chainId)!;
        const head = env.services.chains.get(env.chainId)!.head;
        const until = (what: string, ok: () => boolean) => expect.poll(ok, { message: what }).toBe(true);
        // Every node at the head the relayer saw its wallet deployed at, then the head read from the node
        // behind only, until the shared head takes the lower head (three reads in a row: "gone back").
        env.provider!.set({});
        await until('the shared head reaches the block seen', () => head.current?.number === relayer.seen);
        const seen = relayer.seen;
        const readsHead = (call: RpcCall) => call.method === 'eth_blockNumber' || (call.method === 'eth_getBlockByNumber' && call.params[0] === 'latest');
        env.provider!.set({ lag: { blocks: 1, only: readsHead } });
        await until('the shared head takes the lower head', () => (head.current?.number ?? seen) < seen);
        // Every run of a bundle on the node behind too, where the wallet has no code yet: a transaction
        // signed on what it "needs" there reverts on chain at the relayer's expense.
        await refusedWhileBehindThenRelayed(d, { blocks: 1, only: (call) => readsHead(call) || runsBundle(call) });
      }),
    120_000,
  );

  it(
    "a wallet's implementation slot answered by the node behind, its code by one that is not: read again, not refused as another contract",
    () =>
      afterDeployment(async ({ w, to, first, before }) => {
        // The relayer deployed the wallet, so it has not seen its code yet: the next intake reads code and
        // slot side by side. The first slot read goes to the node behind, where the wallet has no code and
        // its slot is zero.
        let lagged = 0;
        const slotRead = readsSlotOf(w.address as Address);
        const at: unknown[] = [];
        const stop = env.provider!.proxy.addRule((call) => void (slotRead(call) && at.push(call.params[1])));
        env.provider!.set({ lag: { blocks: 1, only: (call) => slotRead(call) && lagged++ === 0 } });
        const second = await w.sendTransaction([transfer(to, 2n)]).finally(stop);
        expect(lagged).toBeGreaterThan(1);
        // Read again pinned to a block the relayer has seen, not at latest (where a node behind answers as before).
        expect(at[0]).toBe('latest');
        expect(at.slice(1)).toContainEqual(expect.stringMatching(/^0x[0-9a-f]+$/));
        env.provider!.set({ lag: LAG });
        await expectExecutedOnce({ wallet: w.address as Address, to, hashes: [first.hash, second.hash] }, 2, before);
      }),
    120_000,
  );

  it(
    'every implementation slot read at latest answered by the node behind: intake and the dispatcher recognise the wallet at a block seen',
    () =>
      afterDeployment(async ({ w, to, first, before }) => {
        // A provider that routes these reads to a pool of its own which is behind: re-read at latest, the
        // slot is zero every time; only a read pinned to a block seen (which that pool refuses or has) tells.
        const slotRead = readsSlotOf(w.address as Address);
        env.provider!.set({ lag: { blocks: 1, only: (call) => slotRead(call) && (call.params[1] ?? 'latest') === 'latest' } });
        const hits = env.provider!.hits.lag ?? 0;
        const second = await w.sendTransaction([transfer(to, 2n)]);
        expect(env.provider!.hits.lag ?? 0).toBeGreaterThan(hits);
        env.provider!.set({ lag: LAG });
        await expectExecutedOnce({ wallet: w.address as Address, to, hashes: [first.hash, second.hash] }, 2, before);
      }),
    120_000,
  );

  it("a provider whose senders' counts at latest all come from a node behind: each receipt is found at the head that mined it", async () => {
    // A chain that mines only when sent to: after a meta-transaction's block, no new head comes. Counted
    // at latest by the node behind, the sender's last transaction looks unmined at every sweep.
    env.provider!.set({ lag: { blocks: 1, only: (call) => call.method === 'eth_getTransactionCount' && call.params[1] === 'latest' } });
    try {
      const before = await signed();
      const sent = await sendAll(2);
      expect(env.provider!.hits.lag).toBeGreaterThan(0);
      await expectExecutedOnce(sent, 2, before);
    } finally {
      env.provider!.set({ lag: LAG });
    }
  }, 120_000);

  it('with every fault class at once: each meta-transaction executed once, no phantom reorg, no replacement', async () => {
    env.provider!.set({ ...ALL, lag: LAG });
    try {
      const before = await signed();
      const sent = await sendAll(3);
      await expectExecutedOnce(sent, 3, before);
      expect(env.provider!.hits.flaky).toBeGreaterThan(0);
    } finally {
      env.provider!.set({ lag: LAG });
    }
  }, 180_000);
});

describe('the relayer under a provider rate limit of 10 calls/s', () => {
  // The operator's case (issue 56): a hosted plan of 10 calls/s, 429 with Retry-After beyond. The
  // service's own calls must fit the budget with room for its clients: none refused while the load is
  // one the budget carries, and its sender reads per meta-transaction about what they cost without a limit.
  /** Many wallets, few rounds each: a round waits for its receipt (a block), the pace is what is under test. */
  const WALLETS = 25;
  const ROUNDS = 2;
  /** One send started at most this often: about 1.5 meta-transactions a second, within 10 calls/s. */
  const PACE_MS = 650;
  let env: RelayerEnv;
  beforeAll(async () => {
    // The relayer's own poll (500 ms), as `serve` runs it, not the 50 ms other relayer tests use.
    env = await startRelayerEnv({ provider: {}, relayer: { pollMs: 500 } });
    await sponsor(env, 'CONTRACT', env.token);
  }, 120_000);
  afterAll(async () => {
    await env?.close();
  });

  const transfer = (to: Address, amount: bigint) => ({ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [to, amount] }) });
  const balance = (owner: Address) => env.public.readContract({ address: env.token, abi: erc20, functionName: 'balanceOf', args: [owner] });

  it('50 meta-transactions at a pace the budget carries: no client refused, each executed once, sender reads near their idle cost', async () => {
    const wallets = Array.from({ length: WALLETS }, () =>
      officialWallet({ signerKey: newSigner().privateKey, rpcUrl: env.rpcUrl, chainId: env.chainId, relayerUrl: env.relayerUrl, projectAccessKey: env.accessKey }),
    );
    const to = newSigner().address;
    try {
      // Funding is no call of the service's: straight to anvil.
      await env.chain.send(wallets.map((w) => ({ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [w.address, 1_000n] })));
      await mine(env.rpcUrl, 2);
      // A block a second, as on a live chain (not a block per transaction): between a transaction and its
      // confirmations the sweep meets several heads, as the operator's did.
      await rpcCall(env.rpcUrl, 'evm_setIntervalMining', [1]);
      env.provider!.set({ rateLimit: { callsPerSec: 10, retryAfterSec: 1 } });
      const from = env.provider!.proxy.calls.length;
      const refused: string[] = [];
      let nextStart = Date.now();
      /** Each wallet sends its rounds one after another (its nonce), all of them under one pace. */
      const paced = async () => {
        const at = nextStart;
        nextStart = Math.max(nextStart, Date.now()) + PACE_MS;
        if (at > Date.now()) await new Promise((r) => setTimeout(r, at - Date.now()));
      };
      await Promise.all(
        wallets.map(async (w, i) => {
          for (let round = 0; round < ROUNDS; round++) {
            await paced();
            await w.sendTransaction([transfer(to, BigInt(i * ROUNDS + round + 1))]).catch((err: Error & { cause?: unknown }) => {
              refused.push(`wallet ${i} round ${round}: ${err.message} (${String(err.cause ?? '')})`);
            });
          }
        }),
      );
      const calls = env.provider!.proxy.calls.slice(from);
      const count = (m: string) => calls.filter((c) => c.method === m).length;
      const byMethod = Object.fromEntries([...new Set(calls.map((c) => c.method))].map((m) => [m, count(m)]));
      // The figures docs/production.md quotes: `METARELAY_CALLS=1 npx vitest run test/provider-faults.test.ts -t 'rate limit'`.
      if (process.env.METARELAY_CALLS) console.log(JSON.stringify({ calls: calls.length, byMethod, refusedByProvider: env.provider!.hits.rateLimit ?? 0 }));
      if (process.env.METARELAY_CALLS) console.log(refused.slice(0, 4).join('\n'));
      expect(refused).toEqual([]);
      // Ground truth: every transfer executed once.
      const n = WALLETS * ROUNDS;
      expect(await balance(to)).toBe(BigInt((n * (n + 1)) / 2));
      // Near what they cost with no limit at all, or below (measured on this test with no limit: 2.2 counts
      // and 2.3 balances a meta-transaction, 1.3 of them the simulations' sender balance per block seen;
      // under the limit 0.3 and 0.9). Before the budget the counts per meta-transaction relayed were 2.4
      // under the limit, while 29 of 50 were refused.
      expect(count('eth_getTransactionCount') / n).toBeLessThanOrEqual(2.5);
      expect(count('eth_getBalance') / n).toBeLessThanOrEqual(1.5);
    } finally {
      env.provider!.set({});
      for (const w of wallets) w.close();
    }
  }, 180_000);
});
