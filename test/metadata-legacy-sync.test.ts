// The legacy Metadata methods old SDKs (@0xsequence/metadata 1.10 … 2.2) call: the mint monitor
// (AddContractToMintMonitor, RemoveContractFromMintMonitor, MintMonitorTriggerJob, MintMonitorJobStatus)
// and contract syncs (SyncContractTokens, ContractSyncJobStatus, AbortContractSync), end to end on a
// real anvil with a real origin; the database backend is the run's (PGlite or PostgreSQL).

import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppConfigInput } from '../src/config/schema.ts';
import { startOriginServer, type OriginServer } from '../src/devchain/index.ts';
import type { Services } from '../src/services.ts';
import { DEPLOYER, call, enqueue, erc721WithTokens, range } from './support/refresh.ts';
import { asOperator, rpc, startTestService, type TestService } from './support/service.ts';
import { eventually, getTokenMetadata, startTokenChain, type TokenChain } from './support/token-chain.ts';

let chain: TokenChain;
let origin: OriginServer;

beforeAll(async () => {
  [chain, origin] = await Promise.all([startTokenChain(), startOriginServer()]);
  for (const p of ['mm', 'mb', 'tj', 'sy', 'ab']) for (const id of range(1, 120)) origin.setDocument(`/${p}/${id}`, { name: `${p} #${id}` });
}, 120_000);

afterAll(async () => {
  await Promise.all([chain?.stop(), origin?.stop()]);
});

async function withService(overrides: Partial<AppConfigInput>, fn: (t: TestService) => Promise<void>) {
  const { refresh, ...rest } = overrides;
  const t = await startTestService({
    chains: [{ ...chain.chainConfig, watch: true }],
    metadata: { hotCacheTtlMs: 0, fetchTimeoutMs: 3_000, inlineWaitMs: 10_000 },
    watcher: { confirmations: 0, pollMs: 100 },
    refresh: { pollMs: 50, ...refresh },
    ...rest,
  });
  try {
    await fn(t);
  } finally {
    await t.close();
  }
}

const anvil = (contract: string) => ({ chainID: 'anvil', contractAddress: contract });
const mint = (nft: Address, id: number) => chain.send([{ address: nft, contract: 'DevERC721', functionName: 'mint', args: [DEPLOYER, BigInt(id)] }]);

/** Runs worker cycles until nothing is left to claim. */
async function drain(s: Services) {
  while ((await s.worker.tick()) > 0);
}

/** The token names stored for the contract, by id (what the workers saved; no fetch of the test's own). */
async function stored(s: Services, contract: string): Promise<Record<string, unknown>> {
  const res = await s.db.query<{ token_id: string; name: unknown }>(`SELECT token_id, metadata->>'name' AS name FROM token_metadata WHERE chain_id = $1 AND contract_address = $2`, [
    chain.anvil.chainId,
    contract,
  ]);
  return Object.fromEntries(res.rows.map((r) => [r.token_id, r.name]));
}

/** Token ids of the tasks the watcher queued for the contract. */
async function watcherItems(s: Services, contract: string): Promise<string[]> {
  const tasks = (await s.tasks.list(null, 500)).filter((x) => x.source === 'watcher' && x.contract_address === contract);
  return (await Promise.all(tasks.map((x) => s.tasks.items(x.id)))).flat().map((i) => i.item);
}

const requests = (prefix: string, ids: string[]) => ids.reduce((n, id) => n + origin.requestCount(`/${prefix}/${id}`), 0);

describe('mint monitor', () => {
  it("a monitored contract's new mint is stored with no one reading the contract; removal stops the following", () =>
    withService({}, async (t) => {
      const [a, b] = await Promise.all([erc721WithTokens(chain, origin, '/mm/', []), erc721WithTokens(chain, origin, '/mb/', [])]);
      const [watcher] = t.services.watchers;
      await watcher.poll(); // a new watcher starts at the head
      expect((await call(t, 'AddContractToMintMonitor', anvil(a))).body).toEqual({ ok: true });
      expect((await call(t, 'AddContractToMintMonitor', anvil(a.toUpperCase().replace('0X', '0x')))).body).toEqual({ ok: true });
      // The service has never met the contract: without the monitor, the watcher would not read it.
      const met = await t.services.db.query('SELECT 1 FROM contracts WHERE chain_id = $1 AND address = $2', [chain.anvil.chainId, a]);
      expect(met.rows).toEqual([]);

      await mint(a, 1);
      await watcher.poll();
      expect(await watcherItems(t.services, a)).toEqual(['1']);
      await drain(t.services);
      expect(await stored(t.services, a)).toEqual({ '1': 'mm #1' });
      // Served from what the monitor's refresh stored: the origin was asked once.
      expect((await getTokenMetadata(t, a, ['1'])).map((x) => x.name)).toEqual(['mm #1']);
      expect(origin.requestCount('/mm/1')).toBe(1);

      // B is monitored when its token is minted, but removed before the watcher reads that block.
      await call(t, 'AddContractToMintMonitor', anvil(b));
      await mint(b, 1);
      const other = await t.services.projects.create('other-project');
      const them = { app: t.app, accessKey: (await t.services.accessKeys.create(other.id, 'other', { kind: 'secret' })).key };
      // Another project's removal is of nothing it registered.
      expect((await call(them, 'RemoveContractFromMintMonitor', anvil(b))).body).toMatchObject({ error: 'NotFound', code: 3000 });
      expect((await call(t, 'RemoveContractFromMintMonitor', anvil(b))).body).toEqual({ ok: true });
      await watcher.poll();
      await mint(b, 2);
      await watcher.poll();
      await drain(t.services);
      expect(await watcherItems(t.services, b)).toEqual([]);
      expect(await stored(t.services, b)).toEqual({});
      expect(requests('mb', ['1', '2'])).toBe(0);
      for (const m of ['RemoveContractFromMintMonitor', 'MintMonitorTriggerJob', 'MintMonitorJobStatus']) {
        const r = await call(t, m, anvil(b));
        expect([m, r.status, r.body.error, r.body.code]).toEqual([m, 400, 'NotFound', 3000]);
        expect(r.body.cause).toContain('not in this project');
      }
    }));

  it('MintMonitorTriggerJob scans the mints from the deployment block and refreshes every token; MintMonitorJobStatus reaches DONE', () =>
    withService({}, async (t) => {
      const ids = range(1, 30);
      const nft = await erc721WithTokens(chain, origin, '/tj/', ids);
      await call(t, 'AddContractToMintMonitor', anvil(nft));
      const before = await call(t, 'MintMonitorJobStatus', anvil(nft));
      expect(before.body).toMatchObject({ error: 'NotFound', code: 3000 });
      expect(before.body.cause).toContain('MintMonitorTriggerJob starts one');

      expect((await call(t, 'MintMonitorTriggerJob', anvil(nft))).body).toEqual({ ok: true });
      const queued = (await call(t, 'MintMonitorJobStatus', anvil(nft))).body.task;
      expect(queued).toMatchObject({ queue: 'refresh_tokens', status: 'QUEUED', payload: { contractAddress: nft, refreshAll: true, source: 'mint-monitor' } });
      // The job is a task of the project: GetTask shows the same one.
      expect((await call(t, 'GetTask', { taskId: queued.id })).body.task.id).toBe(queued.id);

      t.services.startBackground();
      const done = await eventually(
        async () => (await call(t, 'MintMonitorJobStatus', anvil(nft))).body.task,
        (task) => expect(task.status).toBe('DONE'),
        30_000,
      );
      expect(done.id).toBe(queued.id);
      expect(done.result).toMatchObject({ total: 30, succeeded: 30, failed: 0, enumerated: true });
      expect(await stored(t.services, nft)).toEqual(Object.fromEntries(ids.map((id) => [id, `tj #${id}`])));
      expect(requests('tj', ids)).toBe(30);
    }));
});

describe('contract sync', () => {
  it('SyncContractTokens: ContractSyncJobStatus follows the sync and the refresh to DONE, every token stored', () =>
    withService({}, async (t) => {
      const ids = range(1, 40);
      const nft = await erc721WithTokens(chain, origin, '/sy/', ids);
      const { taskID } = (await call(t, 'SyncContractTokens', anvil(nft))).body;
      expect(typeof taskID).toBe('number');
      // A second sync before the tokens are listed is the same work.
      expect((await call(t, 'SyncContractTokens', anvil(nft))).body).toEqual({ taskID });
      const first = (await call(t, 'ContractSyncJobStatus', { taskID })).body;
      expect([first.syncTask.status, first.syncTask.queue, first.refreshTask.status]).toEqual(['QUEUED', 'sync_contract_tokens', 'QUEUED']);

      await drain(t.services);
      const end = (await call(t, 'ContractSyncJobStatus', { taskID })).body;
      expect(end.syncTask).toMatchObject({ id: taskID, status: 'DONE', result: { tokens: 40, cancelled: false } });
      expect(end.refreshTask).toMatchObject({ id: taskID, status: 'DONE', result: { total: 40, succeeded: 40 } });
      expect(Object.keys(await stored(t.services, nft)).sort()).toEqual([...ids].sort());
      expect(requests('sy', ids)).toBe(40);
    }));

  it('AbortContractSync stops a long sync: its tokens not yet fetched never are; an abort while listing queues none', () =>
    withService({ refresh: { claimBatch: 10 } }, async (t) => {
      const ids = range(1, 120);
      const nft = await erc721WithTokens(chain, origin, '/ab/', ids);
      const { taskID } = (await call(t, 'SyncContractTokens', anvil(nft))).body;
      // One cycle by hand: the listing, then one claim of 10 tokens.
      expect(await t.services.worker.tick()).toBe(11);
      expect(requests('ab', ids)).toBe(10);

      expect((await call(t, 'AbortContractSync', { taskID })).body).toEqual({ ok: true });
      expect((await call(t, 'AbortContractSync', { taskID })).body).toEqual({ ok: false });
      const st = (await call(t, 'ContractSyncJobStatus', { taskID })).body;
      expect([st.syncTask.status, st.refreshTask.status]).toEqual(['DONE', 'FAILED']);
      expect(st.refreshTask.result).toMatchObject({ cancelled: true, total: 120, succeeded: 10 });

      // Aborted while a worker lists the tokens: what the listing finds is not queued.
      const second = (await call(t, 'SyncContractTokens', anvil(nft))).body.taskID;
      expect(second).not.toBe(taskID);
      const listing = await t.services.tasks.claimEnumeration('test-lister', 60);
      expect(listing?.id).toBe(second);
      expect((await call(t, 'AbortContractSync', { taskID: second })).body).toEqual({ ok: true });
      await t.services.tasks.finishEnumeration(
        second,
        ids.map((item) => ({ item, contract: nft })),
        chain.anvil.chainId,
        10,
      );
      expect(await t.services.tasks.items(second)).toEqual([]);
      const aborted = (await call(t, 'ContractSyncJobStatus', { taskID: second })).body;
      expect([aborted.syncTask.status, aborted.refreshTask.status, aborted.syncTask.result.error]).toEqual(['FAILED', 'FAILED', 'cancelled']);

      // Nothing is left to fetch, for a worker running a while either.
      expect(await t.services.worker.tick()).toBe(0);
      t.services.startBackground();
      await new Promise((r) => setTimeout(r, 750));
      expect(requests('ab', ids)).toBe(10);
    }));
});

describe('bad input', () => {
  it('bad address, unknown chain, no code, unknown or foreign task, over the limit: clear webrpc errors', () =>
    withService({ refresh: { maxMintMonitorsPerProject: 1 } }, async (t) => {
      const [nft, another] = await Promise.all([erc721WithTokens(chain, origin, '/x/', []), erc721WithTokens(chain, origin, '/y/', [])]);
      const expectError = async (m: string, body: unknown, status: number, error: string, code: number, cause?: string) => {
        const r = await call(t, m, body);
        expect([m, r.status, r.body.error, r.body.code]).toEqual([m, status, error, code]);
        if (cause) expect(r.body.cause).toContain(cause);
      };
      for (const m of ['AddContractToMintMonitor', 'RemoveContractFromMintMonitor', 'MintMonitorTriggerJob', 'MintMonitorJobStatus', 'SyncContractTokens']) {
        await expectError(m, anvil('0x1234'), 400, 'InvalidArgument', 2001, 'contractAddress');
        await expectError(m, { chainID: 'anvil' }, 400, 'RequiredArgument', 2002, 'contractAddress');
        await expectError(m, { chainID: 'no-such-chain', contractAddress: nft }, 400, 'ChainNotFound', 3003);
      }
      await expectError('AddContractToMintMonitor', anvil(`0x${'ab'.repeat(20)}`), 400, 'InvalidArgument', 2001, 'no contract code');
      // One monitored contract at most here; adding it again is no second one.
      expect((await call(t, 'AddContractToMintMonitor', anvil(nft))).body).toEqual({ ok: true });
      expect((await call(t, 'AddContractToMintMonitor', anvil(nft))).body).toEqual({ ok: true });
      await expectError('AddContractToMintMonitor', anvil(another), 429, 'RateLimited', 2005, 'maxMintMonitorsPerProject');

      for (const m of ['AbortContractSync', 'ContractSyncJobStatus']) {
        await expectError(m, { taskID: 987_654 }, 400, 'NotFound', 3000, 'task 987654 not found');
        await expectError(m, {}, 400, 'RequiredArgument', 2002);
        await expectError(m, { taskID: 'soon' }, 400, 'InvalidArgument', 2001);
      }
      // A refresh of listed tokens is no contract sync.
      const listed = await enqueue(t, nft, ['1']);
      await expectError('ContractSyncJobStatus', { taskID: listed }, 400, 'InvalidArgument', 2001, 'no contract sync');
      // Another project's sync is not found, exactly as a task that does not exist.
      const other = await t.services.projects.create('other-project');
      const them = { app: t.app, accessKey: (await t.services.accessKeys.create(other.id, 'other', { kind: 'secret' })).key };
      const theirs = (await call(them, 'SyncContractTokens', anvil(nft))).body.taskID;
      await expectError('ContractSyncJobStatus', { taskID: theirs }, 400, 'NotFound', 3000);
      await expectError('AbortContractSync', { taskID: theirs }, 400, 'NotFound', 3000);
      expect((await call(them, 'ContractSyncJobStatus', { taskID: theirs })).body.syncTask.status).toBe('QUEUED');
      // Without a key, before anything is looked up.
      expect((await call({ app: t.app, accessKey: '' }, 'AddContractToMintMonitor', anvil(nft))).body.error).toBe('Unauthorized');
      // A mint monitor is the project's state: its publishable key (the app's) neither adds nor removes one.
      const monitors = async () => (await t.services.db.query<{ a: string }>('SELECT contract_address AS a FROM mint_monitors WHERE project_id = $1', [t.project.id])).rows.map((r) => r.a);
      expect(await monitors()).toEqual([nft.toLowerCase()]);
      expect((await call({ app: t.app, accessKey: t.accessKey }, 'AddContractToMintMonitor', anvil(another))).body).toMatchObject({ error: 'PermissionDenied', code: 1001 });
      expect((await call({ app: t.app, accessKey: t.accessKey }, 'RemoveContractFromMintMonitor', anvil(nft))).body).toMatchObject({ error: 'PermissionDenied', code: 1001 });
      expect(await monitors()).toEqual([nft.toLowerCase()]);
      // An admin token names no project here: a clear refusal, not a 500.
      expect((await rpc(t.app, '/rpc/Metadata/AddContractToMintMonitor', anvil(another), asOperator)).body).toMatchObject({ error: 'PermissionDenied' });
    }));
});
