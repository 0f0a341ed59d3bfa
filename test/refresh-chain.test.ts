// Refresh work that comes from the chain: the watcher queues refreshes on ERC-4906 MetadataUpdate /
// BatchMetadataUpdate, ERC-1155 URI and mints (with confirmations, and across a reorg), and a
// refreshAll lists a contract's tokens from mint logs (ERC721 without Enumerable, ERC1155) or with
// ERC721Enumerable. Real anvil (automine), real origin.

import { createWalletClient, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppConfigInput } from '../src/config/schema.ts';
import { devChainDefinition, devPublicClient, erc1155IdHex, rpcCall, startOriginServer, type OriginServer } from '../src/devchain/index.ts';
import type { Services } from '../src/services.ts';
import { DEPLOYER, call, countsFor, erc721WithTokens, resultOf, waitForEnd } from './support/refresh.ts';
import { startTestService, type TestService } from './support/service.ts';
import { eventually, getTokenMetadata, secondProcess, startTokenChain, type TokenChain } from './support/token-chain.ts';

let chain: TokenChain;
let origin: OriginServer;
// Anvil's second dev account: sends where the deployer's nonce bookkeeping must not be disturbed.
const OTHER_KEY = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d';
const OTHER = privateKeyToAccount(OTHER_KEY).address;

beforeAll(async () => {
  [chain, origin] = await Promise.all([startTokenChain(), startOriginServer()]);
}, 120_000);

afterAll(async () => {
  await Promise.all([chain?.stop(), origin?.stop()]);
});

function config(c: TokenChain, overrides: Partial<AppConfigInput> = {}): Partial<AppConfigInput> {
  const { watcher, refresh, ...rest } = overrides;
  return {
    chains: [{ ...c.chainConfig, watch: true }],
    metadata: { hotCacheTtlMs: 0, fetchTimeoutMs: 3_000, inlineWaitMs: 10_000 },
    watcher: { confirmations: 0, pollMs: 100, ...watcher },
    refresh: { pollMs: 50, ...refresh },
    ...rest,
  };
}

async function withService(cfg: Partial<AppConfigInput>, fn: (t: TestService) => Promise<void>) {
  const t = await startTestService(cfg);
  try {
    await fn(t);
  } finally {
    await t.close();
  }
}

/** Runs worker cycles until nothing is left to claim. */
async function drain(s: Services) {
  while ((await s.worker.tick()) > 0);
}

const names = async (t: TestService, contract: string, ids: string[]) => (await getTokenMetadata(t, contract, ids)).map((x) => x.name);

/** Every task the watcher queued, oldest first, with its items. */
async function watcherTasks(s: Services) {
  const tasks = (await s.tasks.list(null)).filter((x) => x.source === 'watcher').reverse();
  return Promise.all(tasks.map(async (x) => ({ contract: x.contract_address, project: x.project_id, items: (await s.tasks.items(x.id)).map((i) => i.item).sort() })));
}

describe('chain watcher', () => {
  it('a MetadataUpdate event leads to the new metadata being served, without any refresh call', () =>
    withService(config(chain), async (t) => {
      origin.setDocument('/e/1', { name: 'E1 v1' });
      origin.setDocument('/e/2', { name: 'E2 v1' });
      const nft = await erc721WithTokens(chain, origin, '/e/', ['1', '2']);
      expect(await names(t, nft, ['1', '2'])).toEqual(['E1 v1', 'E2 v1']);
      const [watcher] = t.services.watchers;
      await watcher.poll(); // a new watcher starts at the head

      origin.setDocument('/e/1', { name: 'E1 v2' });
      await chain.send([{ address: nft, contract: 'DevERC721', functionName: 'emitMetadataUpdate', args: [1n] }]);
      expect(await names(t, nft, ['1', '2'])).toEqual(['E1 v1', 'E2 v1']);

      await watcher.poll();
      expect(await watcherTasks(t.services)).toEqual([{ contract: nft, project: null, items: ['1'] }]);
      await drain(t.services);
      expect(await names(t, nft, ['1', '2'])).toEqual(['E1 v2', 'E2 v1']);
      expect(countsFor(origin, ['/e/1', '/e/2'])).toEqual([2, 1]);

      // The same with the worker and watcher running on their own.
      t.services.startBackground();
      origin.setDocument('/e/2', { name: 'E2 v2' });
      await chain.send([{ address: nft, contract: 'DevERC721', functionName: 'emitMetadataUpdate', args: [2n] }]);
      await eventually(
        () => names(t, nft, ['1', '2']),
        (n) => expect(n).toEqual(['E1 v2', 'E2 v2']),
        15_000,
      );
      expect(countsFor(origin, ['/e/1', '/e/2'])).toEqual([2, 2]);
      // No project asked for any of it.
      expect(await t.services.tasks.list(t.project.id)).toEqual([]);
    }));

  it('BatchMetadataUpdate over the whole id space refreshes the tokens the service has seen; a mint queues the new token, a transfer nothing', () =>
    withService(config(chain), async (t) => {
      for (const id of ['1', '2', '3', '4']) origin.setDocument(`/f2/${id}`, { name: `F${id} v2` });
      origin.setDocument('/f/1', { name: 'F1 v1' });
      origin.setDocument('/f/2', { name: 'F2 v1' });
      const nft = await erc721WithTokens(chain, origin, '/f/', ['1', '2', '3']);
      expect(await names(t, nft, ['1', '2'])).toEqual(['F1 v1', 'F2 v1']);
      const [watcher] = t.services.watchers;
      await watcher.poll();

      // setBaseURI emits BatchMetadataUpdate(0, 2^256-1).
      await chain.send([{ address: nft, contract: 'DevERC721', functionName: 'setBaseURI', args: [`${origin.url}/f2/`] }]);
      await watcher.poll();
      expect(await watcherTasks(t.services)).toEqual([{ contract: nft, project: null, items: ['1', '2'] }]);
      await drain(t.services);
      expect(await names(t, nft, ['1', '2'])).toEqual(['F1 v2', 'F2 v2']);
      expect(countsFor(origin, ['/f2/1', '/f2/2', '/f2/3'])).toEqual([1, 1, 0]);

      await chain.send([
        { address: nft, contract: 'DevERC721', functionName: 'mint', args: [DEPLOYER, 4n] },
        { address: nft, contract: 'DevERC721', functionName: 'transferFrom', args: [DEPLOYER, OTHER, 1n] },
      ]);
      await watcher.poll();
      expect((await watcherTasks(t.services)).at(-1)).toEqual({ contract: nft, project: null, items: ['4'] });
      await drain(t.services);
      expect(origin.requestCount('/f2/4')).toBe(1);
      // Served from what the watcher stored: no fetch of its own.
      expect(await names(t, nft, ['4'])).toEqual(['F4 v2']);
      expect(countsFor(origin, ['/f2/1', '/f2/4'])).toEqual([1, 1]);
    }));

  it('ERC-1155 URI events refresh their token; contracts the service never met are ignored', () =>
    withService(config(chain), async (t) => {
      origin.setDocument(`/u/${erc1155IdHex(1n)}.json`, { name: 'U1 v1' });
      origin.setDocument(`/u2/${erc1155IdHex(1n)}.json`, { name: 'U1 v2' });
      const [multi, stranger] = await chain.deploy([
        { contract: 'DevERC1155', args: [`${origin.url}/u/{id}.json`] },
        { contract: 'DevERC721', args: ['Stranger', 'S', `${origin.url}/s/`, ''] },
      ]);
      await chain.send([{ address: multi, contract: 'DevERC1155', functionName: 'mint', args: [DEPLOYER, 1n, 5n] }]);
      expect(await names(t, multi, ['1'])).toEqual(['U1 v1']);
      const [watcher] = t.services.watchers;
      await watcher.poll();

      await chain.send([
        { address: multi, contract: 'DevERC1155', functionName: 'setURI', args: [`${origin.url}/u2/{id}.json`] },
        { address: stranger, contract: 'DevERC721', functionName: 'emitMetadataUpdate', args: [1n] },
        { address: stranger, contract: 'DevERC721', functionName: 'mint', args: [DEPLOYER, 9n] },
      ]);
      await watcher.poll();
      expect(await watcherTasks(t.services)).toEqual([{ contract: multi.toLowerCase(), project: null, items: ['1'] }]);
      await drain(t.services);
      expect(await names(t, multi, ['1'])).toEqual(['U1 v2']);
      expect(origin.requestCount('/s/9')).toBe(0);
    }));

  it('watchers of two processes on one database queue one refresh per event', () =>
    withService(config(chain), async (t) => {
      origin.setDocument('/two/1', { name: 'T1 v1' });
      const nft = await erc721WithTokens(chain, origin, '/two/', ['1']);
      expect(await names(t, nft, ['1'])).toEqual(['T1 v1']);
      const second = await secondProcess(t, config(chain));
      try {
        const [a] = t.services.watchers;
        const [b] = second.services.watchers;
        await a.poll(); // the cursor is shared: b starts from it too

        // Both read the same blocks at the same moment, five times over: one of them queues.
        for (let round = 1; round <= 5; round++) {
          origin.setDocument('/two/1', { name: `T1 v${round + 1}` });
          await chain.send([{ address: nft, contract: 'DevERC721', functionName: 'emitMetadataUpdate', args: [1n] }]);
          await Promise.all([a.poll(), b.poll()]);
          await Promise.all([a.poll(), b.poll()]);
          expect(await watcherTasks(t.services)).toHaveLength(round);
          expect((await watcherTasks(t.services)).at(-1)).toEqual({ contract: nft, project: null, items: ['1'] });
          await Promise.all([drain(t.services), drain(second.services)]);
          expect(await names(t, nft, ['1'])).toEqual([`T1 v${round + 1}`]);
          expect(origin.requestCount('/two/1')).toBe(round + 1);
        }
      } finally {
        await second.close();
      }
    }));

  it('a new watcher with watchFromBlock reads the chain from that block', async () => {
    origin.setDocument('/h/1', { name: 'H1' });
    const pub = devPublicClient(chain.anvil.rpcUrl, chain.anvil.chainId);
    const nft = await erc721WithTokens(chain, origin, '/h/', ['1']);
    const from = Number(await pub.getBlockNumber()) + 1;
    await chain.send([{ address: nft, contract: 'DevERC721', functionName: 'emitMetadataUpdate', args: [1n] }]);
    const cfg = config(chain, { watcher: { maxBlocksPerPoll: 1 } });
    await withService({ ...cfg, chains: [{ ...chain.chainConfig, watch: true, watchFromBlock: from }] }, async (t) => {
      await names(t, nft, ['1']); // the service meets the contract after the event
      const [watcher] = t.services.watchers;
      await watcher.poll(); // block `from`, one per poll: the event's
      expect(watcher.lastProcessed).toBe(BigInt(from));
      expect(await watcherTasks(t.services)).toEqual([{ contract: nft, project: null, items: ['1'] }]);
    });
  });

  it('waits for the configured confirmations before acting on an event', () =>
    withService(config(chain, { watcher: { confirmations: 2 } }), async (t) => {
      origin.setDocument('/c/1', { name: 'C1' });
      const nft = await erc721WithTokens(chain, origin, '/c/', ['1']);
      await names(t, nft, ['1']);
      // The setup (the mint of 1) sinks below the starting point, head − confirmations.
      for (let i = 0; i < 2; i++) await rpcCall(chain.anvil.rpcUrl, 'evm_mine', []);
      const [watcher] = t.services.watchers;
      await watcher.poll();

      await chain.send([{ address: nft, contract: 'DevERC721', functionName: 'emitMetadataUpdate', args: [1n] }]);
      await watcher.poll();
      await rpcCall(chain.anvil.rpcUrl, 'evm_mine', []);
      await watcher.poll();
      expect(await watcherTasks(t.services)).toEqual([]);
      await rpcCall(chain.anvil.rpcUrl, 'evm_mine', []);
      await watcher.poll();
      expect(await watcherTasks(t.services)).toEqual([{ contract: nft, project: null, items: ['1'] }]);
    }));

  it('notices a reorg by the block hash and reads the replaced blocks again', async () => {
    // Its own chain: reverting would disturb the nonces the shared one hands out.
    const own = await startTokenChain();
    try {
      origin.setDocument('/r/1', { name: 'R1' });
      origin.setDocument('/r/2', { name: 'R2' });
      const [tt] = await own.deploy([{ contract: 'TestTokenURI' }]);
      await own.send(['1', '2'].map((id) => ({ address: tt, contract: 'TestTokenURI', functionName: 'setTokenURI', args: [BigInt(id), `${origin.url}/r/${id}`] })));
      // Blocks enough that the watcher's step back does not reach the setup above.
      for (let i = 0; i < 15; i++) await rpcCall(own.anvil.rpcUrl, 'evm_mine', []);
      await withService(config(own), async (t) => {
        expect(await names(t, tt, ['1', '2'])).toEqual(['R1', 'R2']);
        const [watcher] = t.services.watchers;
        await watcher.poll();

        const snapshot = await rpcCall<string>(own.anvil.rpcUrl, 'evm_snapshot', []);
        await own.send([{ address: tt, contract: 'TestTokenURI', functionName: 'setTokenURI', args: [1n, `${origin.url}/r/1`] }]);
        await watcher.poll();
        expect((await watcherTasks(t.services)).map((x) => x.items)).toEqual([['1']]);

        // The block is replaced by one holding another token's update (sent by another account).
        await rpcCall(own.anvil.rpcUrl, 'evm_revert', [snapshot]);
        const wallet = createWalletClient({ account: privateKeyToAccount(OTHER_KEY), chain: devChainDefinition(own.anvil.chainId, own.anvil.rpcUrl), transport: http(own.anvil.rpcUrl) });
        const abi = own.artifacts.TestTokenURI!.abi;
        const hash = await wallet.writeContract({ address: tt, abi, functionName: 'setTokenURI', args: [2n, `${origin.url}/r/2`] });
        await devPublicClient(own.anvil.rpcUrl, own.anvil.chainId).waitForTransactionReceipt({ hash, pollingInterval: 50 });

        await watcher.poll(); // sees the hash changed, steps back
        await watcher.poll(); // reads the stretch again
        expect((await watcherTasks(t.services)).map((x) => x.items)).toEqual([['1'], ['2']]);
      });
    } finally {
      await own.stop();
    }
  });
});

describe('refreshAll', () => {
  async function getLogsCalls(s: Services): Promise<number> {
    const m = await s.metrics.chainRpcCalls.get();
    return m.values.filter((v) => v.labels.method === 'eth_getLogs').reduce((n, v) => n + v.value, 0);
  }

  it('RefreshAllContractTokens on an ERC721 without Enumerable lists its tokens from mint logs, from the deployment block, in chunks', () =>
    withService(config(chain, { refresh: { logChunkBlocks: 2 } }), async (t) => {
      for (const id of ['7', '70', '7000']) origin.setDocument(`/g/${id}`, { name: `G${id}` });
      const pub = devPublicClient(chain.anvil.rpcUrl, chain.anvil.chainId);
      const before = await pub.getBlockNumber();
      const nft = await erc721WithTokens(chain, origin, '/g/', ['7', '70', '700', '7000']);
      // A transfer is not a mint: 70 is listed once.
      await chain.send([{ address: nft, contract: 'DevERC721', functionName: 'transferFrom', args: [DEPLOYER, OTHER, 70n] }]);
      const head = await pub.getBlockNumber();

      const res = await call(t, 'RefreshAllContractTokens', { chainHandle: 'anvil', contractAddress: nft });
      expect(res.body).toEqual({ taskID: expect.any(Number), retryAfter: 0 });
      const taskId = res.body.taskID as number;
      // Until it has listed the tokens, a like request joins it (newMints is covered by it too).
      expect((await call(t, 'RefreshAllContractTokens', { chainID: 'anvil', contractAddress: nft })).body.taskID).toBe(taskId);
      expect((await call(t, 'EnqueueTokensForRefresh', { chainID: 'anvil', contractAddress: nft, refreshAll: true })).body.taskId).toBe(taskId);
      expect((await call(t, 'RefreshTokenMetadata', { chainID: 'anvil', contractAddress: nft, newMints: true })).body.taskId).toBe(taskId);
      const logsBefore = await getLogsCalls(t.services);
      await drain(t.services);
      expect(await waitForEnd(t, taskId)).toBe('DONE');

      expect(await resultOf(t, taskId)).toEqual({
        status: 'DONE',
        tokens: { '7': true, '70': true, '700': false, '7000': true },
        failureReasons: { '700': 'HTTP_404' },
      });
      const task = (await call(t, 'GetTask', { taskId })).body.task;
      expect(task).toMatchObject({ payload: { refreshAll: true, newMints: false }, result: { enumerated: true, total: 4, succeeded: 3, failed: 1 } });
      // The deployment is the first block after `before`; from there to the head, 2 blocks per eth_getLogs.
      const span = Number(head - (before + 1n) + 1n);
      expect((await getLogsCalls(t.services)) - logsBefore).toBe(Math.ceil(span / 2));
      expect(countsFor(origin, ['/g/7', '/g/70', '/g/700', '/g/7000'])).toEqual([1, 1, 1, 1]);
      // Once it has listed them, a new request is a new task.
      expect((await call(t, 'RefreshAllContractTokens', { chainID: 'anvil', contractAddress: nft })).body.taskID).not.toBe(taskId);
    }));

  it('newMints refreshes only the tokens never seen; refreshAll through RefreshTokenMetadata refreshes every one', () =>
    withService(config(chain), async (t) => {
      for (const id of ['1', '2', '3', '4']) origin.setDocument(`/nm/${id}`, { name: `NM${id}` });
      const nft = await erc721WithTokens(chain, origin, '/nm/', ['1', '2', '3', '4']);
      expect(await names(t, nft, ['1', '2'])).toEqual(['NM1', 'NM2']);

      const fresh = await call(t, 'RefreshTokenMetadata', { chainID: 'anvil', contractAddress: nft, newMints: true });
      expect(fresh.body.taskID).toBe(fresh.body.taskId);
      expect((await call(t, 'RefreshTokenMetadata', { chainID: 'anvil', contractAddress: nft, newMints: true })).body.taskId).toBe(fresh.body.taskId);
      await drain(t.services);
      expect(await resultOf(t, fresh.body.taskId)).toEqual({ status: 'DONE', tokens: { '3': true, '4': true }, failureReasons: {} });
      expect((await call(t, 'GetTask', { taskId: fresh.body.taskId })).body.task.payload).toMatchObject({ refreshAll: true, newMints: true });
      expect(countsFor(origin, ['/nm/1', '/nm/2', '/nm/3', '/nm/4'])).toEqual([1, 1, 1, 1]);

      // Every token is more than the new ones: not joined to a pending newMints task.
      const onlyNewAgain = await call(t, 'RefreshTokenMetadata', { chainID: 'anvil', contractAddress: nft, newMints: true });
      const all = await call(t, 'RefreshTokenMetadata', { chainID: 'anvil', contractAddress: nft, refreshAll: true });
      expect(all.body.taskId).not.toBe(onlyNewAgain.body.taskId);
      await drain(t.services);
      expect(await resultOf(t, onlyNewAgain.body.taskId)).toEqual({ status: 'DONE', tokens: {}, failureReasons: {} });
      expect(Object.keys((await resultOf(t, all.body.taskId)).tokens).sort()).toEqual(['1', '2', '3', '4']);
      expect(countsFor(origin, ['/nm/1', '/nm/2', '/nm/3', '/nm/4'])).toEqual([2, 2, 2, 2]);
    }));

  it('an ERC721Enumerable is listed with totalSupply/tokenByIndex (burnt tokens left out), without reading logs', () =>
    withService(config(chain), async (t) => {
      for (const id of ['5', '50', '500']) origin.setDocument(`/q/${id}`, { name: `Q${id}` });
      const [enumerable] = await chain.deploy([{ contract: 'TestEnumerableERC721', args: [`${origin.url}/q/`] }]);
      await chain.send(['5', '50', '500'].map((id) => ({ address: enumerable, contract: 'TestEnumerableERC721', functionName: 'mint', args: [DEPLOYER, BigInt(id)] })));
      await chain.send([{ address: enumerable, contract: 'TestEnumerableERC721', functionName: 'burn', args: [50n] }]);

      const res = await call(t, 'EnqueueTokensForRefresh', { chainID: 'anvil', contractAddress: enumerable, refreshAll: true });
      await drain(t.services);
      expect(await resultOf(t, res.body.taskId)).toEqual({ status: 'DONE', tokens: { '5': true, '500': true }, failureReasons: {} });
      expect(await getLogsCalls(t.services)).toBe(0);
      expect(origin.requestCount('/q/50')).toBe(0);
    }));

  it('an ERC1155 is listed from its TransferSingle mints', () =>
    withService(config(chain), async (t) => {
      for (const id of [1n, 2n]) origin.setDocument(`/m1155/${erc1155IdHex(id)}.json`, { name: `M${id}` });
      const [multi] = await chain.deploy([{ contract: 'DevERC1155', args: [`${origin.url}/m1155/{id}.json`] }]);
      await chain.send([
        { address: multi, contract: 'DevERC1155', functionName: 'mint', args: [DEPLOYER, 1n, 1n] },
        { address: multi, contract: 'DevERC1155', functionName: 'mint', args: [DEPLOYER, 2n, 10n] },
        { address: multi, contract: 'DevERC1155', functionName: 'mint', args: [OTHER, 2n, 10n] },
      ]);
      const res = await call(t, 'RefreshAllContractTokens', { chainID: 'anvil', contractAddress: multi });
      await drain(t.services);
      expect(await resultOf(t, res.body.taskID)).toEqual({ status: 'DONE', tokens: { '1': true, '2': true }, failureReasons: {} });
      expect(await names(t, multi, ['1', '2'])).toEqual(['M1', 'M2']);
    }));
});
